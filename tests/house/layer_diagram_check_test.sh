#!/usr/bin/env bash
# The diagram check itself must catch a difference: a README whose gui/ row
# drops agent/base and adds harness/ fails, naming both.
set -euo pipefail
CHECK="$1" README="$2" LAYERS="$3"
planted="$(mktemp)"
trap 'rm -f "$planted"' EXIT
sed 's|^\(gui/ .*-> \)\(.*\)agent/base, |\1harness/, \2|' "$README" >"$planted"
if out="$(python3 "$CHECK" "$planted" "$LAYERS" 2>&1)"; then
  echo "FAIL: a wrong diagram passed: $out"
  exit 1
fi
grep -q 'gui/: may include agent/base/' <<<"$out" || { echo "FAIL: $out"; exit 1; }
grep -q 'gui/: the diagram lists harness/' <<<"$out" || { echo "FAIL: $out"; exit 1; }
echo "the diagram check catches a wrong row"
