#!/usr/bin/env bash
# build.sh builds the release binary: static (CGO off), -trimpath, stripped, stamped with
# VERSION and COMMIT (default: git describe / git rev-parse when run in a git checkout). The
# Dockerfile and CI (.ci/run) both build through it, so the image holds what CI checked.
#
#   hack/build.sh OUT                         # e.g. hack/build.sh /tmp/whypending
#   VERSION=v0.2.0 COMMIT=abc123 hack/build.sh /out/whypending
set -euo pipefail
out=${1:?usage: hack/build.sh OUT}
cd "$(dirname "$0")/.."
if [[ -z ${VERSION:-} ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  VERSION=$(git describe --tags --always --dirty 2>/dev/null || true)
fi
if [[ -z ${COMMIT:-} ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
fi
CGO_ENABLED=0 go build -trimpath -buildvcs=false \
  -ldflags "-s -w -X main.version=${VERSION:-} -X main.commit=${COMMIT:-}" \
  -o "$out" ./cmd/whypending
