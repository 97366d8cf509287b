#!/usr/bin/env bash
# The tests: set up, build everything, run the whole CTest suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh"
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
ctest --test-dir "${DFARM_BUILD_DIR:-$ROOT/build}" --output-on-failure -j "$(nproc)" "$@"
