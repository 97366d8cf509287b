#!/usr/bin/env bash
# Fails (exit 1) when clang-format (.clang-format: Google style, column 100)
# would change a tracked C++ file; lists those files. CI runs it as the CTest
# test FormatTest.ClangFormatIsClean. Fix with:
#   git ls-files '*.cc' '*.h' | xargs clang-format -i
# Usage: scripts/check-format.sh [REPO_ROOT]
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT"
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check-format: clang-format not found (apt-get install clang-format, or scripts/setup.sh)" >&2
  exit 2
fi
# One clang-format per batch of files (a process per file took a minute):
# each change it would make is a "FILE:LINE:COL: error: ..." line on stderr.
list_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard -- '*.cc' '*.h'
  else
    find . \( -name '*.cc' -o -name '*.h' \) -print0
  fi
}
mapfile -t bad < <(
  list_files |
    xargs -0 -r -n 100 clang-format --dry-run --Werror 2>&1 >/dev/null |
    sed -nE 's/^(.+):[0-9]+:[0-9]+: (error|warning): .*/\1/p' | sort -u || true)
if [ "${#bad[@]}" -gt 0 ]; then
  printf 'check-format: clang-format would change %d file(s):\n' "${#bad[@]}" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: every C++ file is clang-format clean"
