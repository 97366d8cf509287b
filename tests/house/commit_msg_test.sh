#!/usr/bin/env bash
# scripts/git-hooks/commit-msg refuses a subject over 72 characters and a
# missing blank line after it, and accepts a good message (comments ignored).
set -euo pipefail
HOOK="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
printf '%073d\n\nbody\n' 0 >"$dir/long"
printf 'subject\nbody without a blank line\n' >"$dir/joined"
printf '# a comment line git adds\nstore: one child-rows helper\n\nWhy and what was measured.\n' >"$dir/good"
if bash "$HOOK" "$dir/long" 2>/dev/null; then echo "FAIL: a 73-character subject passed"; exit 1; fi
if bash "$HOOK" "$dir/joined" 2>/dev/null; then echo "FAIL: a subject without a blank line passed"; exit 1; fi
bash "$HOOK" "$dir/good" || { echo "FAIL: a good message was refused"; exit 1; }
echo "commit-msg hook checks subjects"
