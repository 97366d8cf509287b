#!/usr/bin/env bash
# The main job: set up, build, sweep two MediaPipe models (face detection,
# hand landmarks) over cpu and xnnpack (1 and 2 threads) on the local device
# (this host), and write an HTML report (latency, memory, placement, error vs cpu).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${DFARM_OUT:-$ROOT/out}"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh" dfarm dfarm-agent dfarm-runner
mkdir -p "$OUT"
DB="$OUT/quickstart.db"
DFARM="${DFARM_BUILD_DIR:-$ROOT/build}/bin/dfarm"
run_id="$("$DFARM" sweep "$ROOT/harness/examples/quickstart.json" --db "$DB")"
"$DFARM" report "$run_id" --db "$DB" --format html -o "$OUT/quickstart.html"
"$DFARM" show "$run_id" --db "$DB"
echo "database: $DB"
echo "report:   $OUT/quickstart.html"
