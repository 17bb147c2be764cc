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
helm_version=v3.22.0
# shellcheck source=../lib/tool-cache.sh
source "$here/../lib/tool-cache.sh"
tool_cache_begin helm "$helm_version"
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

CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" helm.sh/helm/v3/cmd/helm
tool_cache_done
