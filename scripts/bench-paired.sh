#!/usr/bin/env bash
# The paired gate's benchmark (not a CI test): on a machine kept busy by
# scripts/load.py, how often does the gate cry wolf when baseline and candidate
# are the same build (A/A), and how often does it find a 5% and a 10% slow-down,
# paired against unpaired? Prints one line per condition and mode.
#
# Usage: scripts/bench-paired.sh [REPS] [SEED]      (default 100 repetitions, seed 1)
#        BENCH_REGATE=DIR [BENCH_POLICY=FILE] scripts/bench-paired.sh
#            gates the runs of an earlier benchmark's folder DIR again (its results.csv
#            names them) under FILE: no sweep; DIR/regate.csv and the same summary.
#
# Each repetition of each condition sweeps one cell (BENCH_MODEL with
# BENCH_DELEGATE on `local`) with two runners, baseline "base" (build/bin/dfarm-runner)
# and candidate "cand": dfarm-runner again for A/A, else dfarm-runner-slowdown (test
# only: real CPU work for DFARM_TEST_SLOWDOWN_FRACTION of each invocation's time) at
# 0.05 and 0.10. Up to three sweeps per repetition (BENCH_MODES), each with BENCH_PAIRS
# trials per runner:
#   paired       the spec with "pairing": {"baseline_runner":"base"}, order_seed the
#                repetition's seed: stepped pairs (the two runner processes take turns
#                sample by sample); `dfarm gate RUN --paired` (Wilcoxon signed-rank);
#   paired-jobs  the same with "stepped": false: each pair two whole jobs back to back;
#                gated --paired too;
#   unpaired     the same spec without "pairing" (one runner's jobs after the other's);
#             `dfarm gate RUN --baseline RUN --candidate-runner cand
#             --baseline-runner base` (Mann-Whitney);
# and the paired run judged --unpaired too ("paired-run-unpaired-test": the test
# alone, on interleaved trials). Policy: the default (alpha 0.05, min_effect 0.05),
# or BENCH_POLICY. The gate passes unless a cell is regressed (or fails); "false
# alarm" is a regressed or improved verdict in A/A, "power" a regressed one under a
# slow-down.
#
# Settings (environment): DFARM_BUILD_DIR (build), BENCH_MODEL
# (models/face_detection_short_range.tflite), BENCH_DELEGATE (xnnpack),
# BENCH_PAIRS (10), BENCH_RUNS (samples per trial, 20), BENCH_LOAD_CORES (1; 0: no load),
# BENCH_CONDITIONS ("aa:0 slow5:0.05 slow10:0.10"), BENCH_MODES ("paired paired-jobs
# unpaired"), BENCH_POLICY (a policy file for every
# gate), BENCH_OUT (a fresh folder in /tmp: the database, specs and results.csv, kept).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS="${1:-100}"
SEED="${2:-1}"
BIN="${DFARM_BUILD_DIR:-$ROOT/build}/bin"
MODEL="${BENCH_MODEL:-$ROOT/models/face_detection_short_range.tflite}"
DELEGATE="${BENCH_DELEGATE:-xnnpack}"
PAIRS="${BENCH_PAIRS:-10}"
RUNS="${BENCH_RUNS:-20}"
LOAD_CORES="${BENCH_LOAD_CORES:-1}"
CONDITIONS="${BENCH_CONDITIONS:-aa:0 slow5:0.05 slow10:0.10}"
MODES="${BENCH_MODES:-paired paired-jobs unpaired}"
POLICY=()
[ -n "${BENCH_POLICY:-}" ] && POLICY=(--policy "$BENCH_POLICY")

# verdict RUN GATE-ARGS...: "verdict ratio p ci_low ci_high" of the gate's one cell
verdict() {
  local run="$1"; shift
  "$BIN/dfarm" gate "$run" "$@" "${POLICY[@]}" --format json -o - 2>/dev/null |
    python3 -c 'import json,sys
d=json.load(sys.stdin); c=d["cells"][0]; l=c["latency"]
print(c["verdict"], l["ratio"], l["p_value"], l["ci_low"], l["ci_high"])' || echo "error - - - -"
}

# gate_row CONDITION REP MODE RUN: one results line for RUN judged as MODE
gate_row() {
  local args=(--paired)
  case "$3" in
    paired-run-unpaired-test) args=(--baseline "$4" --unpaired --candidate-runner cand --baseline-runner base) ;;
    unpaired) args=(--baseline "$4" --candidate-runner cand --baseline-runner base) ;;
  esac
  local v r p lo hi
  read -r v r p lo hi <<<"$(verdict "$4" "${args[@]}")"
  echo "$1,$2,$3,$v,$r,$p,$lo,$hi,$4"
}

# summary CSV ELAPSED: one line per condition and mode
summary() {
  python3 - "$1" "$2" "$PAIRS" "$LOAD_CORES" <<'PY'
import csv, sys, collections, statistics
path, elapsed, pairs, load = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
by = collections.defaultdict(collections.Counter)
ratios = collections.defaultdict(list)
widths = collections.defaultdict(list)
for r in rows:
    key = (r["condition"], r["mode"])
    by[key][r["verdict"]] += 1
    try:
        ratios[key].append(float(r["ratio"]))
        widths[key].append(float(r["ci_high"]) - float(r["ci_low"]))
    except (KeyError, ValueError, TypeError):
        pass
reps = max(int(r["rep"]) for r in rows) if rows else 0
print(f"bench-paired: {reps} repetitions, {pairs} trials per runner, load {load} core(s), "
      f"{elapsed} s; results in {path}")
for (cond, mode), c in sorted(by.items()):
    n = sum(c.values())
    med = statistics.median(ratios[(cond, mode)]) if ratios[(cond, mode)] else float("nan")
    width = statistics.median(widths[(cond, mode)]) if widths[(cond, mode)] else float("nan")
    alarm = c["regressed"] + c["improved"]
    what = (f"false alarms {alarm}/{n} ({100 * alarm / n:.0f}%), gate passed "
            f"{n - c['regressed'] - c['fail'] - c['error']}/{n}" if cond == "aa" else
            f"power {c['regressed']}/{n} ({100 * c['regressed'] / n:.0f}%)")
    detail = ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
    print(f"{cond:7s} {mode:25s} {what}; {detail}; median ratio {med:.3f}, "
          f"median CI width {width:.3f}")
PY
}

HEADER="condition,rep,mode,verdict,ratio,p,ci_low,ci_high,run"
if [ -n "${BENCH_REGATE:-}" ]; then
  export DFARM_DB="$BENCH_REGATE/bench.db"
  echo "$HEADER" >"$BENCH_REGATE/regate.csv"
  start=$(date +%s)
  tail -n +2 "$BENCH_REGATE/results.csv" | while IFS=, read -r cond rep mode rest; do
    run="${rest##*,}"
    [ "$run" = "-" ] || gate_row "$cond" "$rep" "$mode" "$run" >>"$BENCH_REGATE/regate.csv"
  done
  summary "$BENCH_REGATE/regate.csv" $(( $(date +%s) - start ))
  exit 0
fi

OUT="${BENCH_OUT:-$(mktemp -d /tmp/dfarm-bench-paired.XXXXXX)}"
mkdir -p "$OUT"
for exe in dfarm dfarm-agent dfarm-runner dfarm-runner-slowdown; do
  [ -x "$BIN/$exe" ] || { echo "bench-paired: $BIN/$exe is not built (scripts/build.sh $exe)" >&2; exit 2; }
done
[ -f "$MODEL" ] || { echo "bench-paired: no model '$MODEL' (scripts/setup.sh)" >&2; exit 2; }
export DFARM_DB="$OUT/bench.db"
STORE="$OUT/agent-store"

load_pid=""
if [ "$LOAD_CORES" -gt 0 ]; then
  python3 "$ROOT/scripts/load.py" --cores "$LOAD_CORES" --seed "$SEED" &
  load_pid=$!
fi
trap '[ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null; true' EXIT

# spec FILE CANDIDATE_BUILD ORDER_SEED PAIRED(0|1|jobs)
spec() {
  python3 - "$@" "$MODEL" "$DELEGATE" "$BIN/dfarm-runner" "$PAIRS" "$RUNS" <<'PY'
import json, sys
path, cand, seed, paired, model, delegate, base, pairs, runs = sys.argv[1:]
doc = {"name": "bench-paired", "models": [model], "delegates": [{"name": delegate}],
       "devices": ["local"],
       "runners": [{"name": "base", "builds": {"x86_64": base}},
                   {"name": "cand", "builds": {"x86_64": cand}}],
       "benchmark": {"warmup_runs": 2, "num_runs": int(runs), "repeats": int(pairs),
                     "order_seed": int(seed)}}
if paired != "0":
    doc["pairing"] = {"baseline_runner": "base"}
if paired == "jobs":
    doc["pairing"]["stepped"] = False
json.dump(doc, open(path, "w"))
PY
}

echo "$HEADER" >"$OUT/results.csv"
start=$(date +%s)
for cond in $CONDITIONS; do
  name="${cond%%:*}"
  fraction="${cond#*:}"
  cand="$BIN/dfarm-runner-slowdown"
  [ "$name" = "aa" ] && cand="$BIN/dfarm-runner"
  for rep in $(seq 1 "$REPS"); do
    seed=$((SEED * 100000 + rep))
    for mode in $MODES; do
      case "$mode" in
        paired) paired=1 ;;
        paired-jobs) paired=jobs ;;
        *) paired=0 ;;
      esac
      spec "$OUT/spec.json" "$cand" "$seed" "$paired"
      run=$(DFARM_TEST_SLOWDOWN_FRACTION="$fraction" "$BIN/dfarm" sweep "$OUT/spec.json" \
              --agent-store "$STORE" 2>/dev/null) || true
      if [ -z "$run" ]; then
        echo "$name,$rep,$mode,error,-,-,-,-,-" >>"$OUT/results.csv"
        continue
      fi
      gate_row "$name" "$rep" "$mode" "$run" >>"$OUT/results.csv"
      [ "$mode" = paired ] && gate_row "$name" "$rep" paired-run-unpaired-test "$run" >>"$OUT/results.csv"
    done
  done
done
summary "$OUT/results.csv" $(( $(date +%s) - start ))
