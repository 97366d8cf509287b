#!/usr/bin/env bash
# Latency of our cpu path against TensorFlow Lite 2.9's XNNPACK (not a CI test): per corpus
# model, R alternated rounds; each round runs, for each thread count, one
# `dfarm-runner --delegate cpu` process and one `dfarm-tflite-runner --delegate xnnpack` process
# (TensorFlow Lite's own XNNPACK delegate from its C library), each a fresh process doing one
# warm-up run and then N measured runs on the same seeded inputs, and reads the JSON's
# metrics.p50_us. Odd rounds run ours first, even rounds TFLite first, so a drift in the
# machine's load falls on both sides alike.
#
# Prints one row per model and thread count: each round's p50 (ms) of ours and of TFLite, the
# median over rounds of ours/TFLite (each round's ratio of its two p50s), and on the 2-thread
# row each side's speed-up, median 1-thread p50 / median 2-thread p50. `cat /proc/loadavg` is
# printed at the start and the end: a busy machine moves these figures.
#
# Usage: scripts/bench-speed.sh [MODEL.tflite...]    (default: every models/*.tflite)
#
# Settings (environment): DFARM_BUILD_DIR (build), BENCH_ROUNDS (R, 3), BENCH_RUNS (N measured
# runs per process, 100), BENCH_THREADS ("1 2"), BENCH_SEED (1), DFARM_TFLITE_LIB
# (.cache/tflite/linux_<arch>/libtensorflowlite_c.so). A model a runner cannot run gets its
# status instead of a figure (TensorFlow Lite lacks the selfie models' custom op).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${BENCH_ROUNDS:-3}"
RUNS="${BENCH_RUNS:-100}"
THREADS="${BENCH_THREADS:-1 2}"
SEED="${BENCH_SEED:-1}"
BENCH_NAME=bench-speed
# shellcheck source=scripts/bench-common.sh
source "$ROOT/scripts/bench-common.sh" "$@"
if [ ! -f "$TFLITE_LIB" ]; then
  echo "bench-speed: $TFLITE_LIB is missing (scripts/setup.sh fetches it, or set DFARM_TFLITE_LIB)" >&2
  exit 2
fi

# p50 RUNNER-ARGS...: the p50 in µs of one process, or its status when it did not run.
p50() {
  local json
  json="$("$@" --num-runs "$RUNS" --warmup-runs 1 --seed "$SEED" --json 2>/dev/null)" || true
  python3 -c 'import json, sys
try:
    d = json.loads(sys.argv[1])
except ValueError:
    print("no_json"); sys.exit()
m = d.get("metrics") or {}
print(m["p50_us"] if d.get("status") == "ok" and m.get("p50_us") else d.get("status", "failed"))' "$json"
}

ours() { p50 "$BIN/dfarm-runner" --model "$1" --delegate cpu --num-threads "$2"; }
theirs() {
  p50 "$BIN/dfarm-tflite-runner" --tflite-lib "$TFLITE_LIB" --model "$1" --delegate xnnpack \
    --num-threads "$2"
}

# The cost of one parallel region between this machine's cores (BM_PoolRun/gap_us:0, built by
# `scripts/build.sh benchmarks`): about 0.3 µs where the two cores sit near each other. On a VM
# the host may place them farther apart for a while (we have seen 0.7-1.2 µs), and the 2-thread
# figures then drop (face_detection_full_range 2t/1t 1.8x to 1.2-1.5x) with nothing else
# running. Compare only sittings whose two readings are near 0.3 µs. A slow spell can also
# fall between the two readings: then one round of a model is slower than its others, for both
# runners at once.
pool_round_trip() {
  local bench="$BIN/dfarm_model_benchmark"
  if [ ! -x "$bench" ]; then
    echo "not measured ($bench is not built)"
    return
  fi
  "$bench" --benchmark_filter='BM_PoolRun/gap_us:0/' --benchmark_min_time=0.2 \
    --benchmark_format=csv 2>/dev/null |
    python3 -c 'import csv, sys
rows = [r for r in csv.reader(sys.stdin) if r and r[0].startswith("BM_")]
print(f"{float(rows[0][2]):.0f} ns" if rows else "not measured")'
}

echo "loadavg at start: $(cat /proc/loadavg)"
echo "pool round trip at start: $(pool_round_trip)"
echo "rounds $ROUNDS, $RUNS measured runs per process, seed $SEED"
SAMPLES="$(mktemp)"
trap 'rm -f "$SAMPLES"' EXIT
for model in "${MODELS[@]}"; do
  name="$(basename "$model" .tflite)"
  for round in $(seq 1 "$ROUNDS"); do
    for threads in $THREADS; do
      if [ $((round % 2)) -eq 1 ]; then
        a="$(ours "$model" "$threads")"
        b="$(theirs "$model" "$threads")"
      else
        b="$(theirs "$model" "$threads")"
        a="$(ours "$model" "$threads")"
      fi
      echo "$name $threads $round $a $b" >>"$SAMPLES"
    done
  done
done

python3 - "$SAMPLES" <<'PY'
import collections, statistics, sys

rows = collections.defaultdict(list)  # (model, threads) -> [(ours_us, theirs_us)] by round
order = []
for line in open(sys.argv[1]):
    model, threads, _, a, b = line.split()
    key = (model, int(threads))
    if key not in rows:
        order.append(key)
    rows[key].append((a, b))


def num(v):
    try:
        return float(v)
    except ValueError:
        return None


def ms(v):
    x = num(v)
    return v if x is None else f"{x / 1000:.2f}"


def median_of(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def side_median(key, i):
    return median_of([num(r[i]) for r in rows.get(key, [])])


print(f"{'model':34} {'thr':>3} {'ours p50 ms (rounds)':>22} {'tflite p50 ms (rounds)':>24} "
      f"{'ours/tfl':>8} {'ours 2t/1t':>10} {'tfl 2t/1t':>9}")
for key in order:
    model, threads = key
    rounds = rows[key]
    ratios = [num(a) / num(b) for a, b in rounds if num(a) and num(b)]
    ratio = f"{statistics.median(ratios):.3f}" if ratios else "-"
    speedups = []
    for i in (0, 1):
        one, this = side_median((model, 1), i), side_median(key, i)
        speedups.append(f"{one / this:.2f}x" if threads != 1 and one and this else "")
    print(f"{model:34} {threads:>3} {' '.join(ms(a) for a, _ in rounds):>22} "
          f"{' '.join(ms(b) for _, b in rounds):>24} {ratio:>8} {speedups[0]:>10} "
          f"{speedups[1]:>9}")
PY
echo "loadavg at end: $(cat /proc/loadavg)"
echo "pool round trip at end: $(pool_round_trip)"
