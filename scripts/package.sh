#!/usr/bin/env bash
# Builds DelegateFarm's Debian packages (debian/: dfarm, dfarm-agent,
# dfarm-dashboard, dfarm-plugin-dev) with Debian's own tools and checks them
# with lintian. Installs what it needs with apt-get (dpkg-dev, debhelper,
# lintian and debian/control's Build-Depends), through sudo when not root.
#
# The packages are built from a clean export of the committed tree (git
# archive HEAD, or DFARM_PACKAGE_REF) in a temporary folder, so the checkout
# and its build/ are left alone; the .deb files, the .changes and lintian's
# report go to out/deb/ (DFARM_PACKAGE_OUT). The test suite is not run (see
# scripts/test.sh). DFARM_JOBS: parallel jobs (default: nproc).
# Exit status: dpkg-buildpackage's, else 1 when lintian reports an error.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${DFARM_PACKAGE_OUT:-$ROOT/out/deb}"
REF="${DFARM_PACKAGE_REF:-HEAD}"
JOBS="${DFARM_JOBS:-$(nproc)}"

log() { printf 'package: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_tools() {
  local p missing=()
  for p in dpkg-dev debhelper lintian git; do
    dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}"
  fi
  if ! (cd "$1" && dpkg-checkbuilddeps >/dev/null 2>&1); then
    log "installing the Build-Depends of debian/control"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq --no-install-recommends "$1"
  fi
}

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SRC="$WORK/dfarm"
mkdir -p "$SRC"
git -C "$ROOT" archive "$REF" | tar -x -C "$SRC"
install_tools "$SRC"

log "dpkg-buildpackage -b -us -uc -j$JOBS ($REF, in $SRC)"
start=$(date +%s)
(cd "$SRC" && dpkg-buildpackage -b -us -uc "-j$JOBS")
log "built in $(( $(date +%s) - start )) s"

mkdir -p "$OUT"
rm -f "$OUT"/*.deb "$OUT"/*.changes "$OUT"/*.buildinfo
cp "$WORK"/*.deb "$WORK"/*.changes "$WORK"/*.buildinfo "$OUT"/
changes="$(ls "$OUT"/*.changes)"
status=0
lintian --info --display-info "$changes" >"$OUT/lintian.txt" 2>&1 || true
if grep -q '^E: ' "$OUT/lintian.txt"; then status=1; fi
log "lintian: $(grep -c '^E: ' "$OUT/lintian.txt" || true) error(s), $(grep -c '^W: ' "$OUT/lintian.txt" || true) warning(s) ($OUT/lintian.txt)"
grep -E '^(E|W): ' "$OUT/lintian.txt" >&2 || true
ls -l "$OUT"/*.deb >&2
exit "$status"
