#!/usr/bin/env bash
# Installs every Debian 12 package DelegateFarm needs and fetches the real
# models (by npm package name) into models/, checking each file's sha256
# against scripts/models.sha256, and TensorFlow Lite's C library for the
# cross-check (scripts/tflite.sha256, optional). Idempotent: a second run
# changes nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${DFARM_MODELS_DIR:-$ROOT/models}"

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates clang-format python3
  flatbuffers-compiler libflatbuffers-dev
  nlohmann-json3-dev libcli11-dev
  libsqlite3-dev sqlite3 libssl-dev libpng-dev libjpeg62-turbo-dev
  postgresql-15 libpq-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev
  libxnnpack-dev libpthreadpool-dev libeigen3-dev
  pocl-opencl-icd ocl-icd-libopencl1 opencl-c-headers clinfo
  libarmnn-dev libarmnntfliteparser-dev libarmnn-cpuref-backend22
  libusb-1.0-0-dev adb
  qemu-user g++-aarch64-linux-gnu
  clang libclang-rt-14-dev
  chromium python3-junitparser python3-numpy python3-sklearn
  help2man
)

log() { printf 'setup: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing_packages() {
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
      printf '%s\n' "$p"
    fi
  done
}

install_packages() {
  local missing
  missing="$(missing_packages "${PACKAGES[@]}")"
  # npm ships with Debian's nodejs/npm packages; a machine that already has
  # node and npm from elsewhere keeps them.
  if ! command -v npm >/dev/null 2>&1; then
    missing="$missing"$'\n'"nodejs"$'\n'"npm"
  fi
  missing="$(printf '%s\n' "$missing" | sed '/^$/d' | tr '\n' ' ')"
  if [ -z "$missing" ]; then
    log "all Debian packages present"
    return
  fi
  log "installing: $missing"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

fetch_models() {
  mkdir -p "$MODELS_DIR"
  local list="$ROOT/scripts/models.sha256" pkg file sum
  local -A want_pkg=()
  while read -r pkg file sum; do
    case "$pkg" in ''|\#*) continue ;; esac
    if [ -f "$MODELS_DIR/$file" ] && [ "$(sha256_of "$MODELS_DIR/$file")" = "$sum" ]; then
      continue
    fi
    want_pkg["$pkg"]=1
  done <"$list"
  if [ "${#want_pkg[@]}" -eq 0 ]; then
    log "all models present in $MODELS_DIR"
    return
  fi
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  for pkg in "${!want_pkg[@]}"; do
    log "fetching $pkg (npm pack)"
    (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  done
  for tgz in "$tmp"/*.tgz; do
    mkdir -p "$tmp/x" && tar -xzf "$tgz" -C "$tmp/x" --wildcards 'package/*.tflite'
  done
  local bad=0
  while read -r pkg file sum; do
    case "$pkg" in ''|\#*) continue ;; esac
    [ -n "${want_pkg[$pkg]:-}" ] || continue
    local src="$tmp/x/package/$file"
    if [ ! -f "$src" ]; then
      log "error: $pkg does not contain $file"; bad=1; continue
    fi
    local got
    got="$(sha256_of "$src")"
    if [ "$got" != "$sum" ]; then
      log "error: $pkg $file: sha256 $got, expected $sum"; bad=1; continue
    fi
    install -m 0644 "$src" "$MODELS_DIR/$file"
    log "model $file ok"
  done <"$list"
  return $bad
}

# The qemu-arm64 device's programs are cross-built (scripts/build.sh) against
# arm64 OpenSSL from Debian's multiarch archive. Set DFARM_ARM64=0 to skip.
ARM64_PACKAGES=(libssl-dev:arm64)

install_arm64_packages() {
  if [ "${DFARM_ARM64:-auto}" = 0 ]; then
    log "DFARM_ARM64=0: no arm64 libraries (the qemu-arm64 device is unavailable)"
    return
  fi
  if [ -z "$(missing_packages "${ARM64_PACKAGES[@]}")" ]; then
    log "arm64 libraries present"
    return
  fi
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    log "enabling the arm64 architecture (dpkg multiarch)"
    as_root dpkg --add-architecture arm64
  fi
  log "installing: ${ARM64_PACKAGES[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${ARM64_PACKAGES[@]}"
}

# XNNPACK for the arm64 runner. Debian's libxnnpack0, libpthreadpool0 and
# their -dev packages are not co-installable across architectures (no
# Multi-Arch: same): installing the :arm64 ones removes the host's. So they
# are unpacked (apt-get download, dpkg-deb -x) into .cache/arm64-sysroot,
# which cmake/toolchain-aarch64.cmake searches; nothing is installed.
ARM64_UNPACKED=(libxnnpack0 libxnnpack-dev libpthreadpool0 libpthreadpool-dev libcpuinfo0)
ARM64_SYSROOT="$ROOT/.cache/arm64-sysroot"

unpack_arm64_packages() {
  if [ "${DFARM_ARM64:-auto}" = 0 ]; then return; fi
  local stamp="$ARM64_SYSROOT/.packages" want
  want="$(printf '%s:arm64\n' "${ARM64_UNPACKED[@]}")"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    log "arm64 XNNPACK present in $ARM64_SYSROOT"
    return
  fi
  local tmp deb
  tmp="$(mktemp -d)"
  chmod 755 "$tmp"  # apt-get download writes as _apt
  trap 'rm -rf "$tmp"' RETURN
  log "unpacking into $ARM64_SYSROOT: ${ARM64_UNPACKED[*]} (arm64)"
  # shellcheck disable=SC2046
  if ! (cd "$tmp" && apt-get download -qq $(printf '%s:arm64 ' "${ARM64_UNPACKED[@]}")); then
    log "warning: could not download arm64 XNNPACK; the arm64 runner is built without it"
    return 0
  fi
  rm -rf "$ARM64_SYSROOT"
  mkdir -p "$ARM64_SYSROOT"
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$ARM64_SYSROOT"; done
  printf '%s\n' "$want" >"$stamp"
}

# TensorFlow Lite's prebuilt C library (npm tfjs-tflite-node ships it) for the
# cross-check in tests/tflite: into .cache/tflite/<arch>/, checked against
# scripts/tflite.sha256. Optional: a failure only warns (the cross-check then
# skips); DFARM_TFLITE=0 skips it.
TFLITE_DIR="$ROOT/.cache/tflite"

fetch_tflite() {
  if [ "${DFARM_TFLITE:-auto}" = 0 ]; then
    log "DFARM_TFLITE=0: no TensorFlow Lite library (the TFLite cross-check skips)"
    return 0
  fi
  local list="$ROOT/scripts/tflite.sha256" pkg file sum want=""
  while read -r pkg file sum; do
    case "$pkg" in ''|\#*) continue ;; esac
    local arch
    arch="$(basename "$(dirname "$file")")"
    if [ ! -f "$TFLITE_DIR/$arch/$(basename "$file")" ] ||
       [ "$(sha256_of "$TFLITE_DIR/$arch/$(basename "$file")")" != "$sum" ]; then
      want="$pkg"
    fi
  done <"$list"
  if [ -z "$want" ]; then
    log "TensorFlow Lite library present in $TFLITE_DIR"
    return 0
  fi
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  log "fetching $want (npm pack) for the TensorFlow Lite cross-check"
  if ! (cd "$tmp" && npm pack --silent "$want" >/dev/null 2>&1) ||
     ! tar -xzf "$tmp"/*.tgz -C "$tmp" --wildcards 'package/cc_deps/linux_*/libtensorflowlite_c.so'; then
    log "warning: could not fetch $want; the TensorFlow Lite cross-check will skip"
    return 0
  fi
  while read -r pkg file sum; do
    case "$pkg" in ''|\#*) continue ;; esac
    local src="$tmp/package/$file" arch got
    arch="$(basename "$(dirname "$file")")"
    if [ ! -f "$src" ]; then
      log "warning: $pkg has no $file"; continue
    fi
    got="$(sha256_of "$src")"
    if [ "$got" != "$sum" ]; then
      log "warning: $pkg $file: sha256 $got, expected $sum; not installed"; continue
    fi
    mkdir -p "$TFLITE_DIR/$arch"
    install -m 0644 "$src" "$TFLITE_DIR/$arch/$(basename "$file")"
    log "TensorFlow Lite $arch library ok"
  done <"$list"
  return 0
}

install_packages
install_arm64_packages
unpack_arm64_packages
fetch_models
fetch_tflite
log "done (models in $MODELS_DIR)"
