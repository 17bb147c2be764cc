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
# shellcheck source=../lib/tool-cache.sh
source "$here/../lib/tool-cache.sh"
tool_cache_begin kubectl "$k8s_version"
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

cd "$repo/hack/controlplane/kube"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" k8s.io/kubernetes/cmd/kubectl
tool_cache_done
