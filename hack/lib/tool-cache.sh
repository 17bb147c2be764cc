# tool-cache.sh is sourced by the build.sh of one Go tool (hack/kubectl, hack/alertmanager,
# hack/helm): a binary built from the Go module proxy into a cache keyed by its version and
# the Go version, under WHYPENDING_CACHE (default: <repo>/.cache).
#
#   tool_cache_begin NAME VERSION   # sets dir, bin and say; prints the path and exits 0 when
#                                   # the binary is there (or another build just made it);
#                                   # else returns holding the build lock
#   ... go build -o "$bin.tmp" ...
#   tool_cache_done                 # moves it into place and prints the path

tool_cache_begin() {
  local name=$1 version=$2 repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  dir=${WHYPENDING_CACHE:-$repo/.cache}/$name/$name-$version-$(go env GOVERSION)
  bin=$dir/$name
  tool_name=$name
  tool_start=$SECONDS
  if [[ -x $bin ]]; then
    echo "$bin"
    exit 0
  fi
  mkdir -p "$dir"
  # Several test binaries may ask for the tool at once on a cold cache: one builds, the
  # others wait for it and then find the cache warm.
  if command -v flock >/dev/null; then
    exec 9>"$dir/build.lock"
    if ! flock -n 9; then
      say "another build of $name is running; waiting for it"
      flock 9
    fi
    if [[ -x $bin ]]; then
      echo "$bin"
      exit 0
    fi
  fi
}

say() { echo "$tool_name: $*" >&2; }

tool_cache_done() {
  mv "$bin.tmp" "$bin"
  say "$tool_name built ($((SECONDS - tool_start))s)"
  echo "$bin"
}
