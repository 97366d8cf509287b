#!/usr/bin/env bash
# The reports as their consumers read them: a real small sweep on
# `local` (2 models x cpu, xnnpack, xnnpack fp16, xnnpack taking no node
# (min_nodes_per_partition above the graph), xnnpack taking nodes 0..9 only,
# and a plugin that cannot load, 2 trials each), then
#   screenshot BIN MODELS OUT  the HTML report rendered by headless Chromium;
#                              the PNG is checked (size, colours, a red banner,
#                              no green one) and kept as OUT/report_shot.png;
#                              the partly delegated cells are marked
#   junit BIN MODELS OUT       `dfarm report --format junit` (and `dfarm gate
#                              --format junit` when it exists) read back by
#                              python3-junitparser: one testcase per cell,
#                              failures with messages
# Exit 77 (CTest: skipped) when chromium or junitparser is not installed.
set -euo pipefail
mode="$1"
BIN="$2"
MODELS="$3"
OUT="$4"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "$mode" = screenshot ]; then
  CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
  if [ -z "$CHROMIUM" ]; then
    echo "SKIP: chromium is not installed (scripts/setup.sh installs Debian's chromium)"
    exit 77
  fi
elif [ "$mode" = junit ]; then
  # Debian's python3 has python3-junitparser; a python3 earlier on PATH (pyenv) may not.
  PY=python3
  for p in /usr/bin/python3 python3; do
    if "$p" -c 'import junitparser' 2>/dev/null; then PY="$p"; break; fi
  done
  if ! "$PY" -c 'import junitparser' 2>/dev/null; then
    echo "SKIP: python3-junitparser is not installed (scripts/setup.sh installs it)"
    exit 77
  fi
else
  echo "usage: $0 screenshot|junit BIN_DIR MODELS_DIR OUT_DIR" >&2
  exit 2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/dfarm_report_${mode}.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
cat >"$WORK/spec.json" <<SPEC
{"name": "report-$mode",
 "models": ["$MODELS/face_detection_short_range.tflite", "$MODELS/hand_landmark_lite.tflite"],
 "delegates": [{"name": "cpu"}, {"name": "xnnpack"}, {"name": "xnnpack", "options": {"fp16": true}},
               {"name": "xnnpack", "options": {"min_nodes_per_partition": 100000}},
               {"name": "xnnpack", "options": {"last_delegate_node_index": 9}},
               {"name": "external", "options": {"path": "$MODELS/selfie_segmentation.tflite"}}],
 "devices": ["local"],
 "benchmark": {"warmup_runs": 1, "num_runs": 12, "repeats": 2}}
SPEC
DB="$WORK/farm.db"
# The plugin cells fail (not a shared library): the sweep exits 1, and prints the run id.
run_id="$("$BIN/dfarm" sweep "$WORK/spec.json" --db "$DB" --agent-store "$WORK/agent-store" \
  2>"$WORK/sweep.err" || true)"
if ! [[ "$run_id" =~ ^[0-9]+$ ]]; then
  echo "FAIL: the sweep printed no run id" >&2
  cat "$WORK/sweep.err" >&2
  exit 1
fi

if [ "$mode" = screenshot ]; then
  "$BIN/dfarm" report "$run_id" --db "$DB" --format html -o "$WORK/report.html"
  # Chromium wants a writable home for its profile; the screenshot is taken
  # once the page has loaded (no network: everything is inline).
  HOME="$WORK" timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --no-first-run --user-data-dir="$WORK/profile" \
    --screenshot="$WORK/shot.png" --window-size=1400,2000 "file://$WORK/report.html" \
    >"$WORK/chromium.log" 2>&1 || { cat "$WORK/chromium.log" >&2; exit 1; }
  cp "$WORK/shot.png" "$OUT/report_shot.png"
  cp "$WORK/report.html" "$OUT/report_shot.html"
  # The cell that took no node is no xnnpack speed; the one that took nodes
  # of 0..9 only (folded ones among them stay on the CPU) says how many.
  grep -q '<b>not delegated</b>' "$WORK/report.html" ||
    { echo "FAIL: no 'not delegated' cell in the heatmap" >&2; exit 1; }
  grep -Eq '&#9888; xnnpack: 0 of [0-9]+ nodes<sup>' "$WORK/report.html" ||
    { echo "FAIL: the cell that took no node is not marked" >&2; exit 1; }
  grep -Eq '&#9888; xnnpack: [1-9][0-9]* of [0-9]+ nodes<sup>' "$WORK/report.html" ||
    { echo "FAIL: the partly delegated cell is not marked" >&2; exit 1; }
  python3 "$HERE/report_png_check.py" "$WORK/shot.png" 1400 2000
else
  "$BIN/dfarm" report "$run_id" --db "$DB" --format json -o "$WORK/rows.json"
  # The other formats through the CLI: csv on stdout, md and html with the gate's verdicts.
  "$BIN/dfarm" report "$run_id" --db "$DB" --format csv -o - >"$WORK/rows.csv"
  head -n 1 "$WORK/rows.csv" | grep -q '^run_id,job_id,job_key,model' ||
    { echo "FAIL: the CSV header is not the contract's" >&2; exit 1; }
  "$BIN/dfarm" report "$run_id" --db "$DB" --baseline "$run_id" --format md -o "$WORK/r.md"
  grep -q '^## Verdicts' "$WORK/r.md" || { echo "FAIL: no verdict table in the md" >&2; exit 1; }
  "$BIN/dfarm" report "$run_id" --db "$DB" --baseline "$run_id" --format html -o "$WORK/r.html"
  grep -q 'Against the baseline' "$WORK/r.html" ||
    { echo "FAIL: no verdicts in the html" >&2; exit 1; }
  rc=0
  "$BIN/dfarm" report "$run_id" --db "$DB" --format pdf -o - 2>/dev/null || rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: --format pdf exited $rc, not 2" >&2; exit 1; }
  "$BIN/dfarm" report "$run_id" --db "$DB" --format junit -o "$WORK/report.xml"
  cp "$WORK/report.xml" "$OUT/report_junit.xml"
  "$PY" "$HERE/report_junit_check.py" "$WORK/report.xml" "$WORK/rows.json"
  if "$BIN/dfarm" gate --help >/dev/null 2>&1; then
    rc=0
    "$BIN/dfarm" gate "$run_id" --baseline "$run_id" --db "$DB" --format junit \
      -o "$WORK/gate.xml" || rc=$?
    if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then
      echo "FAIL: dfarm gate exited $rc (0 or 1 expected)" >&2
      exit 1
    fi
    "$PY" "$HERE/report_junit_check.py" "$WORK/gate.xml" "$WORK/rows.json"
  else
    echo "note: no 'dfarm gate' in this build; its JUnit is not read back"
  fi
fi
echo "PASS: $mode"
