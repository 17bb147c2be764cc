#!/usr/bin/env bash
# build.sh builds helm from the Go module proxy (helm.sh/helm/v3, pinned in this folder's go.mod)
# into a cache keyed by version, and prints the path of the binary. A warm cache returns at once.
#
#   hack/helm/build.sh            # prints e.g. .cache/helm/helm-v3.22.0-go1.26.8/helm
#   $(hack/helm/build.sh) lint --strict charts/whypending
#
# The binary is built the way helm's Makefile builds it (CGO off, -trimpath, version and
# Kubernetes version stamped), so `helm version` and .Capabilities.KubeVersion are right.
# WHYPENDING_CACHE overrides the cache root (default: <repo>/.cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
helm_version=v3.22.0
go_version=$(go env GOVERSION)
cache_root=${WHYPENDING_CACHE:-$repo/.cache}
dir=$cache_root/helm/helm-$helm_version-$go_version
bin=$dir/helm

if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
say() { echo "helm: $*" >&2; }

# Several test binaries may ask for helm at once on a cold cache: one builds, the others wait
# for it and then find the cache warm.
if command -v flock >/dev/null; then
  exec 9>"$dir/build.lock"
  if ! flock -n 9; then
    say "another build of helm is running; waiting for it"
    flock 9
  fi
  if [[ -x $bin ]]; then
    echo "$bin"
    exit 0
  fi
fi
say "building helm $helm_version from the Go module proxy into $dir"
say "a cold build takes about 4 minutes on 2 idle cores; later runs reuse the cache"

cd "$here"
# Kubernetes version helm assumes when it has no cluster (helm template, helm lint): the
# minor of the k8s.io/client-go it is built with, as helm's Makefile computes it.
client_go=$(GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/client-go)
k8s_minor=${client_go#v0.}; k8s_minor=${k8s_minor%%.*}
v=helm.sh/helm/v3/internal/version
ldflags="-s -w -X $v.version=$helm_version -X $v.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$k8s_minor"
done

start=$SECONDS
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" helm.sh/helm/v3/cmd/helm
mv "$bin.tmp" "$bin"
say "helm built ($((SECONDS - start))s)"
echo "$bin"
