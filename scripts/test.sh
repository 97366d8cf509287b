#!/usr/bin/env bash
# The tests: set up, build everything, run the whole CTest suite, then the
# same suite built with clang under ASan+UBSan (scripts/sanitize.sh; set
# DFARM_SANITIZE_SUITE=0 to skip that second pass). Arguments go to the first
# ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh"
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
ctest --test-dir "${DFARM_BUILD_DIR:-$ROOT/build}" --output-on-failure -j "$(nproc)" "$@"
if [ "${DFARM_SANITIZE_SUITE:-1}" != 0 ]; then
  bash "$ROOT/scripts/sanitize.sh"
fi
