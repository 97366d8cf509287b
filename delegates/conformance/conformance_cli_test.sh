#!/usr/bin/env bash
# dfarm-conformance's command line: what it refuses exits 2 before any case
# runs (no table, no "all passed"); a good one runs and exits 0.
# Usage: conformance_cli_test.sh DFARM_CONFORMANCE EXAMPLE_PLUGIN
set -uo pipefail
TOOL="$1"
PLUGIN="$2"
fail=0
expect() {  # expect CODE TEXT_IN_STDERR ARGS...
  local want="$1" text="$2"
  shift 2
  local out err code
  out="$("$TOOL" "$@" 2>/tmp/conformance_cli_err.$$)"
  code=$?
  err="$(cat /tmp/conformance_cli_err.$$)"
  rm -f /tmp/conformance_cli_err.$$
  if [ "$code" != "$want" ]; then
    echo "FAIL: dfarm-conformance $* exited $code, want $want; stderr: $err"
    fail=1
  elif [ -n "$text" ] && ! grep -qF -- "$text" <<<"$err"; then
    echo "FAIL: dfarm-conformance $*: stderr lacks '$text': $err"
    fail=1
  elif [ "$want" = 2 ] && [ -n "$out" ]; then
    echo "FAIL: dfarm-conformance $* printed a table before refusing: $out"
    fail=1
  fi
}
expect 2 "no case name contains 'NOSUCHCASE'" --case NOSUCHCASE "external:path:$PLUGIN"
expect 2 "unknown delegate 'tpu' (known: cpu" tpu
expect 2 "--case needs" "external:path:$PLUGIN" --case
expect 2 "unknown option '--bogus'" --bogus "external:path:$PLUGIN"
expect 2 "name at least one delegate" --case ADD
expect 2 "/no/such/plugin.so" "external:path:/no/such/plugin.so"
expect 2 "only adds kernels" cpu
expect 0 "" --case ADD "external:path:$PLUGIN"
[ "$fail" = 0 ] && echo "dfarm-conformance refuses a bad command line with exit 2"
exit "$fail"
