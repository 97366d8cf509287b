#!/usr/bin/env bash
# The README's test command: set up, build, run the whole CTest suite, then
# print how long each step took. Arguments go to ctest.
# DFARM_SANITIZE_SUITE=1 then runs the sanitizer and fuzz stages as CI does
# (scripts/sanitize.sh: the suite under ASan+UBSan, then the fuzz smoke).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
started=$SECONDS
bash "$ROOT/scripts/setup.sh"
setup_s=$((SECONDS - started))
# The benchmark programs are not tests: .ci/run builds them after the suite.
DFARM_BENCHMARKS=0 bash "$ROOT/scripts/build.sh"
build_s=$((SECONDS - started - setup_s))
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
status=0
ctest --test-dir "${DFARM_BUILD_DIR:-$ROOT/build}" --output-on-failure -j "$(nproc)" "$@" ||
  status=$?
tests_s=$((SECONDS - started - setup_s - build_s))
echo "test.sh: set-up ${setup_s} s, build ${build_s} s, tests ${tests_s} s," \
  "total $((SECONDS - started)) s" >&2
[ "$status" -eq 0 ] || exit "$status"
if [ "${DFARM_SANITIZE_SUITE:-0}" = 1 ]; then
  bash "$ROOT/scripts/sanitize.sh"
fi
