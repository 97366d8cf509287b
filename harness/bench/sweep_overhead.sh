#!/bin/bash
# The harness's own overhead per job, and a large sweep on local agents.
#   harness/bench/sweep_overhead.sh MODEL [DEVICES] [THREADS]
# Starts DEVICES dfarm-agents on 127.0.0.1 (not children of dfarm, so that
# /usr/bin/time measures dfarm alone; --insecure: no token, loopback only), sweeps MODEL (use a trivial one, e.g. a
# model builder single-ADD model) over num_threads 1..THREADS on each with
# warmup 0 / 1 run, and prints jobs, wall, dfarm's CPU and per-job figures.
# BIN (default build/bin) holds dfarm, dfarm-agent, dfarm-runner.
set -euo pipefail
MODEL=$(realpath "$1"); DEVICES=${2:-4}; THREADS=${3:-250}
BIN=$(realpath "${BIN:-build/bin}")
TMP=$(mktemp -d); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT
URIS=()
for i in $(seq 1 "$DEVICES"); do
  "$BIN/dfarm-agent" --listen 127.0.0.1:0 --insecure --store "$TMP/store-$i" >"$TMP/port-$i" 2>"$TMP/agent-$i.log" &
  PIDS+=($!)
done
for i in $(seq 1 "$DEVICES"); do
  for _ in $(seq 100); do grep -q listening "$TMP/port-$i" && break; sleep 0.05; done
  URIS+=("\"tcp://$(sed -n 's/.*listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$TMP/port-$i")\"")
done
THR=$(seq -s, 1 "$THREADS"); DEVS=$(IFS=,; echo "${URIS[*]}")
cat >"$TMP/spec.json" <<JSON
{"name":"overhead","models":["$MODEL"],"devices":[$DEVS],
 "benchmark":{"warmup_runs":0,"num_runs":1,"num_threads":[$THR]}}
JSON
# Warm the agents' stores so the measured sweep pushes nothing.
"$BIN/dfarm" sweep "$TMP/spec.json" --db "$TMP/warm.db" --device "${URIS[0]//\"/}" >/dev/null 2>&1 || true
/usr/bin/time -f '%e %U %S' -o "$TMP/time" \
  "$BIN/dfarm" sweep "$TMP/spec.json" --db "$TMP/x.db" --json 2>/dev/null >"$TMP/out" || true
read -r WALL USR SYS <"$TMP/time"
JOBS=$(sqlite3 "$TMP/x.db" "select count(*) from jobs where status='ok'")
RUNNER_MS=$(sqlite3 "$TMP/x.db" "select sum(wall_ms) from jobs")
cat "$TMP/out"
awk -v j="$JOBS" -v w="$WALL" -v u="$USR" -v s="$SYS" -v r="$RUNNER_MS" -v d="$DEVICES" 'BEGIN {
  printf "ok jobs %d on %d devices: wall %.2f s (%.1f jobs/s); dfarm CPU %.2f s user + %.2f s sys\n", j, d, w, j / w, u, s;
  printf "per job: dfarm CPU %.3f ms; wall per job per device %.2f ms, of which runner %.2f ms, harness+agent %.2f ms\n",
    1000 * (u + s) / j, 1000 * w * d / j, r / j, (1000 * w * d - r) / j }'
