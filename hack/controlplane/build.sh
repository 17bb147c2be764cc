#!/usr/bin/env bash
# build.sh builds etcd, kube-apiserver, kube-scheduler and kube-controller-manager from the Go
# module proxy into a cache keyed by version, and prints the directory that holds them. A warm
# cache returns at once; a cache that lacks some of them (one made before a binary was added here)
# builds only the missing ones.
#
#   hack/controlplane/build.sh            # prints e.g. .cache/controlplane/k8s-v1.37.2-etcd-v3.6.8-go1.26.8/bin
#
# WHYPENDING_CACHE overrides the cache root (default: <repo>/.cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
k8s_version=v1.37.2
etcd_version=v3.6.8
go_version=$(go env GOVERSION)
cache_root=${WHYPENDING_CACHE:-$repo/.cache}
bin=$cache_root/controlplane/k8s-$k8s_version-etcd-$etcd_version-$go_version/bin

binaries=(etcd kube-apiserver kube-scheduler kube-controller-manager)
# missing lists the binaries not yet in the cache.
missing() {
  local b
  for b in "${binaries[@]}"; do
    [[ -x $bin/$b ]] || echo "$b"
  done
}
todo=$(missing)
if [[ -z $todo ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$bin"
say() { echo "controlplane: $*" >&2; }

# Several test binaries may ask for the binaries at once on a cold cache: one builds, the
# others wait for it and then find the cache warm.
if command -v flock >/dev/null; then
  exec 9>"$bin/../build.lock"
  if ! flock -n 9; then
    say "another build of the control plane is running; waiting for it"
    flock 9
  fi
  todo=$(missing)
  if [[ -z $todo ]]; then
    echo "$bin"
    exit 0
  fi
fi
say "building $(echo $todo) (etcd $etcd_version, Kubernetes $k8s_version) from the Go module proxy into $bin"
say "a cold build takes about 7 minutes on 2 cores; later runs reuse the cache"

ver=k8s.io/component-base/version
cgv=k8s.io/client-go/pkg/version
minor=${k8s_version#v1.}; minor=${minor%%.*}
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for p in $ver $cgv; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
done

start=$SECONDS
for cmd in $todo; do
  if [[ $cmd == etcd ]]; then
    (cd "$here/etcd" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" . && mv "$bin/etcd.tmp" "$bin/etcd")
    say "etcd built ($((SECONDS - start))s)"
    continue
  fi
  (cd "$here/kube" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" && mv "$bin/$cmd.tmp" "$bin/$cmd")
  say "$cmd built ($((SECONDS - start))s)"
done
echo "$bin"
