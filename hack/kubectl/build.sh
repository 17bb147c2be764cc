#!/usr/bin/env bash
# build.sh builds kubectl from the Go module proxy (k8s.io/kubernetes/cmd/kubectl at the
# Kubernetes version the local control plane runs, through hack/controlplane/kube's go.mod and
# its replace lines) into a cache keyed by version, and prints the path of the binary. A warm
# cache returns at once. The tests use it to check that every kubectl write a diagnosis suggests
# is accepted by the real API server with --dry-run=server (triage/collect TestFixesDryRun).
#
#   hack/kubectl/build.sh            # prints e.g. .cache/kubectl/kubectl-v1.37.2-go1.26.8/kubectl
#
# WHYPENDING_CACHE overrides the cache root (default: <repo>/.cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
k8s_version=v1.37.2
go_version=$(go env GOVERSION)
cache_root=${WHYPENDING_CACHE:-$repo/.cache}
dir=$cache_root/kubectl/kubectl-$k8s_version-$go_version
bin=$dir/kubectl

if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
say() { echo "kubectl: $*" >&2; }

# Several test binaries may ask for kubectl at once on a cold cache: one builds, the others
# wait for it and then find the cache warm.
if command -v flock >/dev/null; then
  exec 9>"$dir/build.lock"
  if ! flock -n 9; then
    say "another build of kubectl is running; waiting for it"
    flock 9
  fi
  if [[ -x $bin ]]; then
    echo "$bin"
    exit 0
  fi
fi
say "building kubectl $k8s_version from the Go module proxy into $dir"
say "a cold build takes about 3 minutes on 2 idle cores; later runs reuse the cache"

# Stamp the version the way Kubernetes' own build does, so `kubectl version` is right.
ver=k8s.io/component-base/version
cgv=k8s.io/client-go/pkg/version
minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for p in $ver $cgv; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

start=$SECONDS
cd "$repo/hack/controlplane/kube"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" k8s.io/kubernetes/cmd/kubectl
mv "$bin.tmp" "$bin"
say "kubectl built ($((SECONDS - start))s)"
echo "$bin"
