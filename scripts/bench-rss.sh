#!/usr/bin/env bash
# Peak memory of our cpu path against TensorFlow Lite 2.9's (not a CI test): per corpus model
# and thread count, the peak resident set (VmHWM, the runners' "peak_rss_bytes") of one
# `dfarm-runner --delegate cpu` process and of one `dfarm-tflite-runner --delegate cpu` process
# (TensorFlow Lite's builtin kernels from its C library) on the same model, thread count, seed
# and number of runs, and their ratio. Each figure is a whole process: program, libraries,
# model bytes, weights, arena, scratch and threads.
#
# Usage: scripts/bench-rss.sh [MODEL.tflite...]      (default: every models/*.tflite)
#
# Settings (environment): DFARM_BUILD_DIR (build), BENCH_THREADS ("1 2"), BENCH_RUNS (measured
# runs per process, 10), DFARM_TFLITE_LIB (.cache/tflite/linux_<arch>/libtensorflowlite_c.so).
# A model a runner cannot run gets its status instead of a figure (TensorFlow Lite lacks the
# selfie models' custom op).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS="${BENCH_THREADS:-1 2}"
RUNS="${BENCH_RUNS:-10}"
BENCH_NAME=bench-rss
# shellcheck source=scripts/bench-common.sh
source "$ROOT/scripts/bench-common.sh" "$@"

# peak RUNNER-ARGS...: "KIB ARENA_KIB" of one run, or "STATUS -" when it did not run.
peak() {
  local json
  json="$("$@" --delegate cpu --num-runs "$RUNS" --warmup-runs 1 --seed 1 --json 2>/dev/null)" || true
  python3 -c 'import json, sys
try:
    d = json.loads(sys.argv[1])
except ValueError:
    print("no_json -"); sys.exit()
m = d.get("metrics") or {}
if d.get("status") != "ok" or not m.get("peak_rss_bytes"):
    print(d.get("status", "failed"), "-"); sys.exit()
arena = m.get("arena_bytes")
print(m["peak_rss_bytes"] // 1024, "-" if arena is None else arena // 1024)' "$json"
}

printf '%-40s %7s %12s %12s %12s %8s\n' model threads ours_KiB tflite_KiB ours_arena_KiB ratio
for model in "${MODELS[@]}"; do
  name="$(basename "$model" .tflite)"
  for threads in $THREADS; do
    read -r ours arena < <(peak "$BIN/dfarm-runner" --model "$model" --num-threads "$threads")
    read -r theirs _ < <(peak "$BIN/dfarm-tflite-runner" --tflite-lib "$TFLITE_LIB" \
      --model "$model" --num-threads "$threads")
    ratio=-
    if [[ "$ours" =~ ^[0-9]+$ && "$theirs" =~ ^[0-9]+$ ]]; then
      ratio="$(python3 -c "print(f'{$ours / $theirs:.3f}')")"
    fi
    printf '%-40s %7s %12s %12s %12s %8s\n' "$name" "$threads" "$ours" "$theirs" "$arena" "$ratio"
  done
done
