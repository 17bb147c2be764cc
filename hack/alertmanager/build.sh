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
repo=$(cd "$here/../.." && pwd)
am_version=v0.31.1
go_version=$(go env GOVERSION)
cache_root=${WHYPENDING_CACHE:-$repo/.cache}
dir=$cache_root/alertmanager/alertmanager-$am_version-$go_version
bin=$dir/alertmanager

if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
say() { echo "alertmanager: $*" >&2; }

# Several test binaries may ask for it at once on a cold cache: one builds, the others wait
# for it and then find the cache warm.
if command -v flock >/dev/null; then
  exec 9>"$dir/build.lock"
  if ! flock -n 9; then
    say "another build of alertmanager is running; waiting for it"
    flock 9
  fi
  if [[ -x $bin ]]; then
    echo "$bin"
    exit 0
  fi
fi
say "building alertmanager $am_version from the Go module proxy into $dir"
say "a cold build takes about 2 minutes on 2 idle cores (100 s of CPU); later runs reuse the cache"

cd "$here"
v=github.com/prometheus/common/version
ldflags="-s -w -X $v.Version=${am_version#v} -X $v.Branch=HEAD -X $v.Revision=$am_version"
start=$SECONDS
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" github.com/prometheus/alertmanager/cmd/alertmanager
mv "$bin.tmp" "$bin"
say "alertmanager built ($((SECONDS - start))s)"
echo "$bin"
