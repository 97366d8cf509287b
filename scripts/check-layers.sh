#!/usr/bin/env bash
# Checks that no include runs from a lower layer to a higher one (README.md,
# "Layers"). Each production file may include only the folders its layer
# lists; tests (*_test.cc, *_benchmark.cc, testing/, fuzz/, bench/, tests/, and
# delegates/conformance/, the op conformance tool built only with the tests on
# tests/model_builder) may include anything. Prints each violation as FILE:LINE: include "X" (LAYER may use: ...)
# and exits 1 when there is one.
# Usage: scripts/check-layers.sh [REPO_ROOT]
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT"

# LAYER (a folder prefix; the longest match wins) -> what it may include
# (folder prefixes, or single headers). Lowest layers first.
declare -A ALLOWED=(
  [runtime/]="runtime/"
  [delegates/]="runtime/ delegates/"
  [agent/base/]="agent/base/"
  [agent/protocol/]="agent/base/ agent/protocol/"
  [agent/runner/]="runtime/ delegates/ agent/base/ agent/protocol/ agent/runner/"
  [agent/daemon/]="delegates/delegate_options.h delegates/gpu/opencl_api.h agent/base/ agent/protocol/ agent/runner/runner_json.h agent/daemon/"
  [agent/client/]="agent/base/ agent/protocol/ agent/client/"
  [reports/store/]="agent/base/ agent/protocol/ agent/runner/runner_values.h reports/store/"
  [reports/]="agent/base/ agent/protocol/ reports/"
  [harness/]="delegates/delegate_names.h delegates/delegate_options.h agent/base/ agent/protocol/ agent/client/ agent/runner/runner_json.h reports/ harness/"
  [gui/]="agent/base/ agent/protocol/ reports/ gui/"
)

layer_of() {
  local file="$1" best="" l
  for l in "${!ALLOWED[@]}"; do
    if [[ "$file" == "$l"* && ${#l} -gt ${#best} ]]; then best="$l"; fi
  done
  printf '%s' "$best"
}

is_test() {
  case "$1" in
    tests/* | */testing/* | */fuzz/* | */bench/* | delegates/conformance/* | *_test.cc | *_test.h | *_benchmark.cc | *_test_main.cc) return 0 ;;
  esac
  return 1
}

list_files() {
  git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' '*.inc' 2>/dev/null ||
    find . -name '*.h' -o -name '*.cc' -o -name '*.inc' | sed 's#^\./##'
}

# The layered production files and their layers.
declare -A LAYER_OF=()
while IFS= read -r file; do
  is_test "$file" && continue
  layer="$(layer_of "$file")"
  [ -n "$layer" ] && LAYER_OF[$file]="$layer"
done < <(list_files)

violations=0
# Every include line of those files, read by one grep: FILE:LINE:TEXT.
while IFS= read -r hit; do
  file="${hit%%:*}"
  rest="${hit#*:}"
  line="${rest%%:*}"
  [[ "${rest#*:}" =~ \"([^\"]+)\" ]] || continue
  target="${BASH_REMATCH[1]}"
  # Only our own folders are layered (not generated or third-party paths).
  case "$target" in runtime/* | delegates/* | agent/* | reports/* | harness/* | gui/* | tests/*) ;; *) continue ;; esac
  layer="${LAYER_OF[$file]}"
  ok=0
  for a in ${ALLOWED[$layer]}; do
    if [[ "$target" == "$a"* ]]; then ok=1; break; fi
  done
  if [ "$ok" = 0 ]; then
    echo "$file:$line: include \"$target\" ($layer may use: ${ALLOWED[$layer]})"
    violations=$((violations + 1))
  fi
done < <(printf '%s\0' "${!LAYER_OF[@]}" |
  xargs -0 -r grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' || true)
checked=${#LAYER_OF[@]}

if [ "$violations" -gt 0 ]; then
  echo "check-layers: $violations include(s) run against the layers (README.md, Layers)" >&2
  exit 1
fi
echo "check-layers: $checked files, no include runs upward"
