#!/usr/bin/env bash
# Runs every libFuzzer target (harness/fuzz, agent/fuzz, runtime/fuzz) for
# DURATION seconds each, PARALLEL at a time, in a clang build with the fuzzers
# (build-fz/, configured once), and prints each one's executions.
# Usage: [DURATION=600] [PARALLEL=2] scripts/fuzz.sh [NAME...]
#   NAME: spec runner_json frame session model model_options (default: all)
# Each keeps its corpus in BUILD/fuzz/NAME/ across runs and its log in
# BUILD/fuzz/NAME.log; a finding leaves BUILD/fuzz/NAME-crash-* (or timeout-,
# leak-, oom-) and fails the script. Replay one: BUILD/bin/dfarm_NAME_fuzzer FILE.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${DFARM_FUZZ_BUILD_DIR:-$ROOT/build-fz}"
DURATION="${DURATION:-600}"
PARALLEL="${PARALLEL:-2}"
JOBS="${DFARM_JOBS:-$(nproc)}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
ALL=(spec runner_json frame session model model_options)
NAMES=("$@")
[ "${#NAMES[@]}" -gt 0 ] || NAMES=("${ALL[@]}")

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG -gline-tables-only" \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG -gline-tables-only" \
    -DDFARM_BUILD_FUZZERS=ON -DDFARM_BUILD_GUI=OFF -DDFARM_BUILD_BENCHMARKS=OFF >/dev/null
fi
targets=(dfarm_frame_fuzzer_seeds dfarm_model_fuzzer_seeds)
for name in "${NAMES[@]}"; do targets+=("dfarm_${name}_fuzzer"); done
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"

OUTDIR="$BUILD/fuzz"
mkdir -p "$OUTDIR/frame_seeds" "$OUTDIR/model_seeds"
"$BUILD/bin/dfarm_frame_fuzzer_seeds" "$OUTDIR/frame_seeds" >/dev/null
"$BUILD/bin/dfarm_model_fuzzer_seeds" "$OUTDIR/model_seeds" >/dev/null
[ -d "$ROOT/models" ] && find "$ROOT/models" -maxdepth 1 -name '*.tflite' -exec cp -f {} "$OUTDIR/model_seeds/" \;

# The arguments of each fuzzer after its corpus: seed folders and options.
args_of() {
  case "$1" in
    spec) echo "$ROOT/harness/fuzz/seeds/spec -max_len=16384 -timeout=10" ;;
    runner_json) echo "$ROOT/harness/fuzz/seeds/runner_json -max_len=16384 -timeout=10" ;;
    frame) echo "$OUTDIR/frame_seeds -max_len=65536" ;;
    session) echo "$OUTDIR/frame_seeds -max_len=65536 -timeout=30 -close_fd_mask=2" ;;
    model) echo "$OUTDIR/model_seeds -max_len=8388608 -timeout=30" ;;
    model_options) echo "$ROOT/runtime/fuzz/seeds/model_options -max_len=512 -timeout=10" ;;
    *) echo "fuzz.sh: unknown fuzzer $1 (${ALL[*]})" >&2; return 1 ;;
  esac
}

run_one() {
  local name="$1" extra
  extra="$(args_of "$name")"
  mkdir -p "$OUTDIR/$name"
  # shellcheck disable=SC2086
  "$BUILD/bin/dfarm_${name}_fuzzer" "$OUTDIR/$name" $extra -max_total_time="$DURATION" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$OUTDIR/$name-" \
    >"$OUTDIR/$name.log" 2>&1
}

status=0
pids=()
names_running=()
wait_first() {
  local rc=0
  wait "${pids[0]}" || rc=$?
  report "${names_running[0]}" "$rc"
  pids=("${pids[@]:1}")
  names_running=("${names_running[@]:1}")
}
report() {
  local execs secs
  execs="$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$OUTDIR/$1.log" | grep -o '[0-9]*$' || true)"
  secs="$(grep -o 'Done [0-9]* runs in [0-9]* second' "$OUTDIR/$1.log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' || true)"
  if [ "$2" -eq 0 ]; then
    printf 'fuzz.sh: %-14s clean   %12s execs in %ss\n' "$1" "${execs:-?}" "${secs:-$DURATION}"
  else
    status=1
    printf 'fuzz.sh: %-14s FAILED  %12s execs (exit %s): see %s\n' "$1" "${execs:-?}" "$2" \
      "$OUTDIR/$1.log"
    ls "$OUTDIR/$1"-* 2>/dev/null || true
  fi
}
for name in "${NAMES[@]}"; do
  args_of "$name" >/dev/null
  [ "${#pids[@]}" -lt "$PARALLEL" ] || wait_first
  echo "fuzz.sh: $name for ${DURATION}s"
  run_one "$name" &
  pids+=("$!")
  names_running+=("$name")
done
while [ "${#pids[@]}" -gt 0 ]; do wait_first; done
exit "$status"
