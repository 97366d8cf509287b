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
bad=()
while IFS= read -r f; do
  [ -f "$f" ] || continue
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h')
if [ "${#bad[@]}" -gt 0 ]; then
  printf 'check-format: clang-format would change %d file(s):\n' "${#bad[@]}" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: every C++ file is clang-format clean"
