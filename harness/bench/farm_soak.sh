#!/bin/bash
# Farm soak benchmark (not run in CI): JOBS jobs queued on a real PostgreSQL
# server and served by 4 `dfarm node` processes with 2 tcp agents each, every
# agent behind a TCP proxy (stall_proxy.py), while random faults are injected;
# then the database is checked.
#   harness/bench/farm_soak.sh [JOBS] [SEED] [FAULT_EVERY_S]
# JOBS (default 10000) must be a multiple of 200 (as in soak.sh: one tiny
# model, cpu and xnnpack configurations x 25 num_threads, warmup 0, 1 run),
# 8 repeats each, all on device "any". Nodes run with --lease-s 4 --heartbeat-s 1. Every
# FAULT_EVERY_S seconds (default 2) one fault, chosen with bash's RANDOM seeded
# by SEED (default 1) and logged:
#   agent-kill   SIGKILL an agent, restart it on the same port and store
#   agent-stop   SIGSTOP an agent for 1-3 s, then SIGCONT
#   runner-kill  SIGKILL one running dfarm-runner (its job ends crashed)
#   node-pause   SIGSTOP a node past its lease (lease + 2-6 s), then SIGCONT:
#                its jobs are reaped and run elsewhere; the woken node must not
#                touch them again
#   node-kill    SIGKILL a node, restart it at once under the same name
#   half-open    SIGSTOP one live proxy connection (both directions stall; the
#                host gives up on it, the agent's side stays open) and SIGKILL
#                it 30 s later
# When the faults stop (the run has nothing queued or running), the summary
# line gives: lost (planned jobs missing or not terminal), doubled (a job key
# stored twice), wrong ok (ok without metrics or with another model), wrong
# failure (a job not ok beyond the runners the soak killed: infra, timeout,
# model_error, ... or more crashed jobs than runner kills), orphans, statuses
# and wall time. Exit 1 when any of the four counts is not 0.
# BIN (default build/bin) holds dfarm, dfarm-agent, dfarm-runner,
# dfarm_soak_model. PostgreSQL 15's initdb/postgres (runs as user postgres when
# started by root).
set -euo pipefail
JOBS=${1:-10000}; SEED=${2:-1}; EVERY=${3:-2}
((JOBS % 200 == 0 && JOBS >= 400)) || { echo "JOBS must be a multiple of 200, >= 400" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$(realpath "${BIN:-build/bin}")
PGBIN=${DFARM_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[[ -x $PGBIN/initdb ]] || { echo "farm_soak: no PostgreSQL (apt-get install postgresql-15)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/dfarm-farm-soak.XXXXXX)
chmod 755 "$TMP"
LOG="$TMP/faults.log"
NODES=4; PER_NODE=2; N=$((NODES * PER_NODE)); LEASE=4
AGENT=(); PORT=(); PROXY=(); PPORT=(); NODE=(); PG=""; STALLS=""
# SIGTERM (SIGINT for PostgreSQL: fast shutdown) to all it started, SIGKILL
# to what is left after 10 s.
cleanup() {
  local p left
  for p in "${NODE[@]}" "${PROXY[@]}" "${AGENT[@]}" $STALLS; do
    kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true
  done
  if [[ -n $PG ]]; then kill -INT "$PG" 2>/dev/null || true; fi
  for _ in $(seq 100); do
    left=""
    for p in "${NODE[@]}" "${PROXY[@]}" "${AGENT[@]}" $STALLS $PG; do
      kill -0 "$p" 2>/dev/null && left+=" $p"
    done
    [[ -z $left ]] && break
    sleep 0.1
  done
  for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
RANDOM=$SEED
say() { echo "$(date -u +%T.%N | cut -c1-12) $*" >>"$LOG"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
AS_PG=()
[[ $(id -u) == 0 ]] && AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups)

# PostgreSQL in $TMP/pg on a free loopback port.
mkdir -p "$TMP/pg"
[[ $(id -u) == 0 ]] && chown postgres: "$TMP/pg"
"${AS_PG[@]}" "$PGBIN/initdb" -D "$TMP/pg/data" -A trust -U dfarm >"$TMP/initdb.log" 2>&1
PGPORT=$(free_port)
"${AS_PG[@]}" "$PGBIN/postgres" -D "$TMP/pg/data" -p "$PGPORT" -k "$TMP/pg" -c listen_addresses=127.0.0.1 \
  -c max_connections=200 >"$TMP/postgres.log" 2>&1 &
PG=$!
URL="postgresql://dfarm@127.0.0.1:$PGPORT/postgres"
for _ in $(seq 200); do psql "$URL" -qAtc 'select 1' >/dev/null 2>&1 && break; sleep 0.05; done

source "$HERE/soak_lib.sh"
start_proxy() {  # i
  local i=$1
  python3 "$HERE/stall_proxy.py" 0 "${PORT[i]}" >"$TMP/proxy-$i" 2>>"$TMP/proxy-$i.log" &
  PROXY[i]=$!
  for _ in $(seq 100); do grep -qs listening "$TMP/proxy-$i" && break; sleep 0.02; done
  PPORT[i]=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/proxy-$i")
}
start_node() {  # k: serves agents k*PER_NODE .. +PER_NODE-1 (through their proxies)
  local k=$1 devs=() i
  for ((i = k * PER_NODE; i < (k + 1) * PER_NODE; i++)); do devs+=(--device "tcp://127.0.0.1:${PPORT[i]}"); done
  "$BIN/dfarm" node --db "$URL" --name "soak-node-$k" --lease-s "$LEASE" --heartbeat-s 1 \
    --cache-dir "$TMP/cache-$k" "${devs[@]}" >>"$TMP/node-$k.log" 2>&1 &
  NODE[k]=$!
}
for i in $(seq 0 $((N - 1))); do start_agent "$i"; start_proxy "$i"; done
for k in $(seq 0 $((NODES - 1))); do start_node "$k"; done

"$BIN/dfarm_soak_model" "$TMP/soak.tflite"
MODEL_SHA=$(sha256sum "$TMP/soak.tflite" | cut -d' ' -f1)
DELEGATES=$(soak_delegates "$JOBS")
# 8 repeats of each configuration: JOBS = CONFIGS x 25 threads x 8 trials.
cat >"$TMP/spec.json" <<JSON
{"name":"farm-soak","models":["$TMP/soak.tflite"],"delegates":[$DELEGATES],"devices":["any"],
 "benchmark":{"warmup_runs":0,"num_runs":1,"num_threads":[$(seq -s, 1 25)],"repeats":8,"timeout_s":20},
 "scheduler":{"retries":4,"backoff_ms":250,"quarantine_after":1000}}
JSON

RUNNER_KILLS=0
fault() {
  local i=$((RANDOM % N)) k=$((RANDOM % NODES)) kind=$((RANDOM % 6))
  case $kind in
    0) say "agent-kill $i (pid ${AGENT[i]})"
       kill -KILL "${AGENT[i]}" 2>/dev/null || true; { wait "${AGENT[i]}"; } 2>/dev/null || true
       sleep "0.$((RANDOM % 10))"; start_agent "$i" "${PORT[i]}"; say "agent-restart $i pid ${AGENT[i]}" ;;
    1) local s=$((1 + RANDOM % 3)); say "agent-stop $i for ${s}s"
       kill -STOP "${AGENT[i]}" || true; sleep "$s"; kill -CONT "${AGENT[i]}" || true ;;
    2) local r=""
       for _ in $(seq 100); do
         r=$(pgrep -f "^dfarm-runner --model $TMP/store-" | shuf -n1 || true); [[ -n $r ]] && break
         sleep 0.01
       done
       say "runner-kill ${r:-none}"
       if [[ -n $r ]] && kill -KILL "$r" 2>/dev/null; then RUNNER_KILLS=$((RUNNER_KILLS + 1)); fi ;;
    3) local s=$((LEASE + 2 + RANDOM % 5)); say "node-pause $k (pid ${NODE[k]}) for ${s}s"
       kill -STOP "${NODE[k]}" || true; sleep "$s"; kill -CONT "${NODE[k]}" || true ;;
    4) say "node-kill $k (pid ${NODE[k]})"
       kill -KILL "${NODE[k]}" 2>/dev/null || true; { wait "${NODE[k]}"; } 2>/dev/null || true
       start_node "$k"; say "node-restart $k pid ${NODE[k]}" ;;
    5) local c; c=$(pgrep -P "${PROXY[i]}" | shuf -n1 || true)
       if [[ -z $c ]]; then say "half-open $i: no connection"
       else say "half-open $i (proxy child $c)"; kill -STOP "$c" 2>/dev/null || true
         (sleep 30; kill -KILL "$c" 2>/dev/null || true) &
         STALLS+=" $!"
       fi ;;
  esac
}

T0=$(date +%s.%N)
RUN=$("$BIN/dfarm" sweep "$TMP/spec.json" --db "$URL" --detach 2>>"$TMP/dfarm.out")
FAULTS=0
pending() { psql "$URL" -qAtc "select count(*) from jobs where run_id = $RUN and status in ('queued','running')"; }
while [[ $(pending) != 0 ]]; do
  sleep "$EVERY"; fault; FAULTS=$((FAULTS + 1))
  # A restarted node may be refused while its predecessor's claims hold: retry.
  for k in $(seq 0 $((NODES - 1))); do
    kill -0 "${NODE[k]}" 2>/dev/null || { say "node $k gone (exit), restarting"; start_node "$k"; }
  done
done
WALL=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')

q() { psql "$URL" -qAtc "$1"; }
TERMINAL="'ok','model_error','delegate_error','unsupported','crashed','timeout','infra'"
ROWS=$(q "select count(*) from jobs where run_id = $RUN")
DONE=$(q "select count(distinct job_key) from jobs where run_id = $RUN and status in ($TERMINAL)")
LOST=$((JOBS - DONE))
DOUBLED=$(q "select (select count(*) from (select job_key from jobs where run_id = $RUN
                    group by job_key having count(*) > 1) d) + greatest(0, $ROWS - $JOBS)")
WRONG_OK=$(q "select count(*) from jobs j left join results r on r.job_id = j.id
  where j.run_id = $RUN and j.status = 'ok' and (r.job_id is null or r.mean_us is null
    or r.num_runs != 1 or j.model_sha256 != '$MODEL_SHA')")
NOT_OK=$(q "select count(*) from jobs where run_id = $RUN and status != 'ok'")
CRASHED=$(q "select count(*) from jobs where run_id = $RUN and status = 'crashed'")
WRONG_FAIL=$((NOT_OK - (CRASHED < RUNNER_KILLS ? CRASHED : RUNNER_KILLS)))
STATUSES=$(q "select string_agg(status || ' ' || n, ', ' order by n desc) from
  (select status, count(*) n from jobs where run_id = $RUN group by status) s")
q "select id, status, device, error from jobs where run_id = $RUN and status != 'ok'" >"$TMP/not_ok.txt"
cleanup; AGENT=(); PROXY=(); NODE=(); PG=""; STALLS=""
sleep 1
ORPHANS=$(pgrep -f "$TMP/store-" | grep -vc "^$$\$" || true)
echo "farm soak: $JOBS jobs, $NODES nodes, $N agents, seed $SEED, $FAULTS faults ($RUNNER_KILLS runner kills):" \
  "lost $LOST, doubled $DOUBLED, wrong ok $WRONG_OK, wrong failure $WRONG_FAIL, orphans $ORPHANS;" \
  "rows $ROWS ($STATUSES); wall $(printf %.1f "$WALL") s"
echo "faults log: $LOG; jobs not ok: $TMP/not_ok.txt"
((LOST == 0 && DOUBLED == 0 && WRONG_OK == 0 && WRONG_FAIL == 0 && ORPHANS == 0))
