#!/usr/bin/env bash
# The format check itself must catch an unformatted file: a tiny git tree with
# one badly formatted file and one clean file fails naming only the bad one,
# and passes once the bad one is formatted.
set -euo pipefail
CHECK="$1"
STYLE="$2"  # the project's .clang-format
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
cp "$STYLE" "$tree/.clang-format"
mkdir -p "$tree/a"
printf 'int  f( int x ){return x;}\n' >"$tree/a/bad.cc"
printf 'int g(int x) { return x; }\n' >"$tree/a/good.cc"
git -C "$tree" init -q
git -C "$tree" add -A
if out="$(bash "$CHECK" "$tree" 2>&1)"; then
  echo "FAIL: an unformatted file was not caught: $out"
  exit 1
fi
grep -q '^  a/bad.cc$' <<<"$out" || { echo "FAIL: bad.cc not named: $out"; exit 1; }
if grep -q 'good.cc' <<<"$out"; then echo "FAIL: flagged a clean file: $out"; exit 1; fi
clang-format -i "$tree/a/bad.cc"
bash "$CHECK" "$tree" >/dev/null || { echo "FAIL: a clean tree was refused"; exit 1; }
echo "check-format catches an unformatted file"
