# Shared by soak.sh and farm_soak.sh (sourced): needs BIN, TMP and the arrays
# AGENT (pids) and PORT (agent ports), indexed by agent number.

# Whether process $1 runs (exists and is not a zombie).
alive() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ ${s##*) } != Z* ]]
}

# start_agent I [PORT]: a dfarm-agent on 127.0.0.1 (PORT, else a free one)
# with store $TMP/store-I; waits while it starts (however slow the machine:
# a second agent on its store would be refused) and starts another only when
# it exited without listening (the old port not free yet, its predecessor
# still stopping).
start_agent() {
  local i=$1 listen="127.0.0.1:${2:-0}"
  for _ in $(seq 50); do
    "$BIN/dfarm-agent" --listen "$listen" --insecure --store "$TMP/store-$i" \
      >"$TMP/port-$i" 2>>"$TMP/agent-$i.log" &
    AGENT[i]=$!
    while alive "${AGENT[i]}" && ! grep -qs listening "$TMP/port-$i"; do sleep 0.02; done
    grep -qs listening "$TMP/port-$i" && break
    sleep 0.1
  done
  PORT[i]=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/port-$i")
}

# soak_delegates JOBS: the spec's delegate entries, JOBS/200 configurations
# (cpu, then xnnpack with max_delegated_partitions 1..JOBS/200-1).
soak_delegates() {
  local configs=$(($1 / 200)) d='{"name":"cpu"}'
  if ((configs > 1)); then
    d+=",{\"name\":\"xnnpack\",\"options\":{\"max_delegated_partitions\":[$(seq -s, 1 $((configs - 1)))]}}"
  fi
  echo "$d"
}
