#!/bin/bash
# Soak benchmark (not run in CI): JOBS jobs over 8 tcp agents while
# random faults are injected, then the database is checked.
#   harness/bench/soak.sh [JOBS] [SEED] [FAULT_EVERY_S]
# JOBS (default 10000) must be a multiple of 200: 8 devices x 25 num_threads x
# JOBS/200 delegate configurations (cpu, then xnnpack with
# max_delegated_partitions 1..JOBS/200-1), one tiny model (dfarm_soak_model),
# warmup 0, 1 run. Every FAULT_EVERY_S seconds (default 2) one fault, chosen
# with bash's RANDOM seeded by SEED (default 1) and logged:
#   agent-kill   SIGKILL an agent, restart it on the same port and store
#   agent-stop   SIGSTOP an agent for 1-3 s, then SIGCONT
#   runner-kill  SIGKILL one running dfarm-runner (its job ends crashed)
#   corrupt      overwrite 64 bytes of, or truncate, a stored artifact
#   dfarm-kill   SIGKILL dfarm, then `dfarm sweep --resume`
#   dfarm-term   SIGTERM dfarm (cancels jobs in flight), then `--resume`
# When the faults stop (dfarm finished), `--resume` runs until nothing is
# pending. The summary line gives jobs lost (planned jobs missing or not in a
# terminal state: must be 0), doubled (a job key stored twice, or more rows
# than planned: 0), wrong ok (ok without metrics, whose runner saw another
# model than planned, or an xnnpack ok whose outputs differ from the cpu
# reference: 0), orphans (processes still running from the soak's folder
# after its agents got SIGTERM: 0), the statuses and the wall time.
# BIN (default build/bin) holds dfarm, dfarm-agent, dfarm-runner, dfarm_soak_model.
set -euo pipefail
JOBS=${1:-10000}; SEED=${2:-1}; EVERY=${3:-2}
((JOBS % 200 == 0 && JOBS >= 400)) || { echo "JOBS must be a multiple of 200, >= 400" >&2; exit 2; }
BIN=$(realpath "${BIN:-build/bin}")
TMP=$(mktemp -d /tmp/dfarm-soak.XXXXXX)
LOG="$TMP/faults.log"
N=8; AGENT=(); PORT=(); DFARM=""
cleanup() {
  for p in "${AGENT[@]}" $DFARM; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
RANDOM=$SEED
say() { echo "$(date -u +%T.%N | cut -c1-12) $*" >>"$LOG"; }

source "$(dirname "${BASH_SOURCE[0]}")/soak_lib.sh"
for i in $(seq 0 $((N - 1))); do start_agent "$i"; done

"$BIN/dfarm_soak_model" "$TMP/soak.tflite"
MODEL_SHA=$(sha256sum "$TMP/soak.tflite" | cut -d' ' -f1)
DELEGATES=$(soak_delegates "$JOBS")
DEVS=$(for i in $(seq 0 $((N - 1))); do printf '"tcp://127.0.0.1:%s",' "${PORT[i]}"; done)
cat >"$TMP/spec.json" <<JSON
{"name":"soak","models":["$TMP/soak.tflite"],"delegates":[$DELEGATES],"devices":[${DEVS%,}],
 "benchmark":{"warmup_runs":0,"num_runs":1,"num_threads":[$(seq -s, 1 25)],"timeout_s":20},
 "scheduler":{"retries":4,"backoff_ms":250,"quarantine_after":20}}
JSON
DB="$TMP/soak.db"

fault() {
  local i=$((RANDOM % N)) kind=$((RANDOM % 6))
  case $kind in
    0) say "agent-kill $i (pid ${AGENT[i]})"
       kill -KILL "${AGENT[i]}" 2>/dev/null || true; { wait "${AGENT[i]}"; } 2>/dev/null || true
       sleep "0.$((RANDOM % 10))"; start_agent "$i" "${PORT[i]}"; say "agent-restart $i pid ${AGENT[i]}" ;;
    1) local s=$((1 + RANDOM % 3)); say "agent-stop $i for ${s}s"
       kill -STOP "${AGENT[i]}" || true; sleep "$s"; kill -CONT "${AGENT[i]}" || true ;;
    2) local r=""  # runners live ~10 ms: look for one for up to 1 s
       for _ in $(seq 100); do
         r=$(pgrep -f "^dfarm-runner --model $TMP/store-" | shuf -n1 || true); [[ -n $r ]] && break
         sleep 0.01
       done
       say "runner-kill ${r:-none}"; [[ -n $r ]] && kill -KILL "$r" 2>/dev/null || true ;;
    3) local f; f=$(find "$TMP/store-$i/artifacts" -type f 2>/dev/null | shuf -n1 --random-source=<(yes "$RANDOM") || true)
       if [[ -z $f ]]; then say "corrupt: store-$i empty"
       elif ((RANDOM % 2)); then say "corrupt-overwrite $f"
         dd if=/dev/urandom of="$f" bs=1 count=64 seek=$((RANDOM % 512)) conv=notrunc status=none 2>/dev/null || true
       else say "corrupt-truncate $f"; truncate -s $((RANDOM % 400)) "$f" 2>/dev/null || true
       fi ;;
    4) say "dfarm-kill ${DFARM}"; kill -KILL "$DFARM" 2>/dev/null || true ;;
    5) say "dfarm-term ${DFARM}"; kill -TERM "$DFARM" 2>/dev/null || true ;;
  esac
}

T0=$(date +%s.%N)
"$BIN/dfarm" sweep "$TMP/spec.json" --db "$DB" >"$TMP/dfarm.out" 2>&1 & DFARM=$!
ROUNDS=1; FAULTS=0
while :; do
  # Faults while the sweep runs; when dfarm ends (finished, killed or
  # cancelled), resume the run if anything is pending.
  while kill -0 "$DFARM" 2>/dev/null; do
    sleep "$EVERY"; kill -0 "$DFARM" 2>/dev/null || break
    fault; FAULTS=$((FAULTS + 1))
  done
  { wait "$DFARM"; } 2>/dev/null && RC=0 || RC=$?  # no "Killed" notice
  PENDING=$(sqlite3 "$DB" "select count(*) from jobs where status in ('queued','running')" 2>/dev/null || echo "?")
  say "dfarm exit $RC, pending $PENDING"
  [[ $PENDING == 0 ]] && break
  ((ROUNDS < 500)) || { say "giving up"; break; }
  RUN=$(sqlite3 "$DB" "select max(id) from runs")
  "$BIN/dfarm" sweep --resume "$RUN" --db "$DB" >>"$TMP/dfarm.out" 2>&1 & DFARM=$!
  ROUNDS=$((ROUNDS + 1))
done
WALL=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')

q() { sqlite3 "$DB" "$1"; }
TERMINAL="'ok','model_error','delegate_error','unsupported','crashed','timeout','infra'"
ROWS=$(q "select count(*) from jobs")
DONE=$(q "select count(distinct job_key) from jobs where status in ($TERMINAL)")
LOST=$((JOBS - DONE))
DOUBLED=$(q "select (select count(*) from (select job_key from jobs group by job_key having count(*) > 1))
                  + max(0, (select count(*) from jobs) - $JOBS)")
WRONG_OK=$(q "select count(*) from jobs j left join results r on r.job_id = j.id
  where j.status = 'ok' and (r.job_id is null or r.mean_us is null or r.num_runs != 1
    or j.model_sha256 != '$MODEL_SHA'
    or json_extract(r.runner_json, '$.model') is not '$MODEL_SHA'
    or (j.delegate = 'xnnpack' and not exists (select 1 from output_accuracy a where a.job_id = j.id
          and a.compared = 16 and a.max_abs_error <= 1e-6 and a.nan_count = 0)))")
STATUSES=$(q "select group_concat(status || ' ' || n, ', ') from
  (select status, count(*) n from jobs group by status order by n desc)")
cleanup; AGENT=(); DFARM=""
sleep 1
ORPHANS=$(pgrep -f "$TMP/" | grep -vc "^$$\$" || true)
echo "soak: $JOBS jobs on $N agents, seed $SEED, $FAULTS faults, $ROUNDS dfarm runs:" \
  "lost $LOST, doubled $DOUBLED, wrong ok $WRONG_OK, orphans $ORPHANS; rows $ROWS ($STATUSES);" \
  "wall $(printf %.1f "$WALL") s"
echo "faults log: $LOG"
