#!/usr/bin/env bash
# Configures (once) and builds DelegateFarm in build/ (Release, ccache).
# Usage: scripts/build.sh [TARGET...]   (no target: everything)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${DFARM_BUILD_DIR:-$ROOT/build}"
JOBS="${DFARM_JOBS:-$(nproc)}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Build folders under the checkout share cache hits (paths made relative).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
if [ "$#" -gt 0 ]; then
  targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$BUILD" -j "$JOBS" "${targets[@]}"
else
  cmake --build "$BUILD" -j "$JOBS"
fi
