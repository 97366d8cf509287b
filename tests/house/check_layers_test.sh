#!/usr/bin/env bash
# The layer check itself must catch an upward include: a tiny tree where
# reports/ includes harness/ (and agent/base/ includes agent/client/) fails,
# naming both, and the same tree without them passes.
set -euo pipefail
CHECK="$1"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/reports" "$tree/harness/run" "$tree/agent/base" "$tree/agent/client"
printf '#include "harness/run/sweep.h"\n#include "reports/report.h"\n' >"$tree/reports/report.cc"
printf '#include "agent/client/client.h"\n' >"$tree/agent/base/result.h"
printf '#include "reports/report.h"\n#include "agent/base/result.h"\n' >"$tree/harness/run/sweep.cc"
printf '#include "harness/run/sweep.h"\n' >"$tree/reports/report_test.cc"  # tests may
if out="$(bash "$CHECK" "$tree" 2>&1)"; then
  echo "FAIL: upward includes were not caught: $out"
  exit 1
fi
grep -q 'reports/report.cc:1: include "harness/run/sweep.h"' <<<"$out" || { echo "FAIL: $out"; exit 1; }
grep -q 'agent/base/result.h:1: include "agent/client/client.h"' <<<"$out" || { echo "FAIL: $out"; exit 1; }
if grep -q 'report_test.cc\|harness/run/sweep.cc' <<<"$out"; then echo "FAIL: flagged a test or a downward include: $out"; exit 1; fi
rm "$tree/agent/base/result.h"
printf '#include "reports/report.h"\n' >"$tree/reports/report.cc"
bash "$CHECK" "$tree" >/dev/null || { echo "FAIL: a clean tree was refused"; exit 1; }
echo "check-layers catches upward includes"
