#!/usr/bin/env bash
# build.sh builds Alertmanager from the Go module proxy (github.com/prometheus/alertmanager,
# pinned in this folder's go.mod) into a cache keyed by version, and prints the path of the
# binary. A warm cache returns at once. The alert tests run it as the real Alertmanager.
#
#   hack/alertmanager/build.sh     # prints e.g. .cache/alertmanager/alertmanager-v0.31.1-go1.26.8/alertmanager
#
# v0.31.1 is pinned: v0.32 and later embed UI assets that their module zip lacks, so they do
# not build from the proxy. WHYPENDING_CACHE overrides the cache root (default: <repo>/.cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
am_version=v0.31.1
# shellcheck source=../lib/tool-cache.sh
source "$here/../lib/tool-cache.sh"
tool_cache_begin alertmanager "$am_version"
say "building alertmanager $am_version from the Go module proxy into $dir"
say "a cold build takes about 2 minutes on 2 idle cores (100 s of CPU); later runs reuse the cache"

cd "$here"
v=github.com/prometheus/common/version
ldflags="-s -w -X $v.Version=${am_version#v} -X $v.Branch=HEAD -X $v.Revision=$am_version"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" github.com/prometheus/alertmanager/cmd/alertmanager
tool_cache_done
