#!/usr/bin/env bash
# Configures (once) and builds DelegateFarm in build/ (Release, ccache), and
# the device programs (dfarm-agent, dfarm-runner, the example plugin) for
# aarch64 in build/arm64 with cmake/toolchain-aarch64.cmake: the qemu-arm64
# device runs them under qemu-user. The cross build is skipped, with a note,
# when aarch64-linux-gnu-g++ or the arm64 libraries are missing.
# Usage: scripts/build.sh [TARGET...]   (no target: everything, arm64 included;
#        the pseudo-target `arm64` builds the cross build alone)
# DFARM_ARM64=0 skips the cross build, DFARM_ARM64=1 makes a failure an error.
# The benchmark programs (target `benchmarks`, outside `all`) come after the
# host build; DFARM_BENCHMARKS=0 skips them (the test command: no test needs them).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${DFARM_BUILD_DIR:-$ROOT/build}"
JOBS="${DFARM_JOBS:-$(nproc)}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Build folders under the checkout share cache hits (paths made relative).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
# The tests' precompiled header (cmake/testing.cmake) is cacheable only so.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"

build_arm64() {
  local dir="$BUILD/arm64"
  if ! command -v aarch64-linux-gnu-g++ >/dev/null 2>&1; then
    echo "build.sh: aarch64-linux-gnu-g++ not found (g++-aarch64-linux-gnu): skipping the arm64 build; the qemu-arm64 device is unavailable" >&2
    return 1
  fi
  if [ ! -f /usr/lib/aarch64-linux-gnu/libcrypto.a ]; then
    echo "build.sh: arm64 OpenSSL missing (libssl-dev:arm64, scripts/setup.sh): skipping the arm64 build; the qemu-arm64 device is unavailable" >&2
    return 1
  fi
  local reset=()
  # A build folder configured when every device program was static: linker
  # flags from today's toolchain (only the agent is static now).
  if grep -q '^CMAKE_EXE_LINKER_FLAGS:STRING=-static$' "$dir/CMakeCache.txt" 2>/dev/null; then
    reset=(-UCMAKE_EXE_LINKER_FLAGS)
  fi
  if [ ! -f "$dir/build.ninja" ] || [ "${#reset[@]}" -gt 0 ]; then
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${reset[@]}" \
      -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64.cmake" -DDFARM_DEVICE_ONLY=ON \
      >/dev/null || return 1
  fi
  local targets=(dfarm-agent dfarm-runner dfarm_example_delegate)
  # dfarm-tflite-runner (TensorFlow Lite's own runtime) when the tree has it.
  if cmake --build "$dir" --target help | grep -q '^dfarm-tflite-runner:'; then
    targets+=(dfarm-tflite-runner)
  fi
  cmake --build "$dir" -j "$JOBS" --target "${targets[@]}"
}

arm64() {
  case "${DFARM_ARM64:-auto}" in
    0) return 0 ;;
    1) build_arm64 ;;
    *) build_arm64 || echo "build.sh: arm64 build skipped or failed (see above)" >&2 ;;
  esac
}

if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
if [ "$#" -gt 0 ]; then
  targets=()
  want_arm64=0
  for t in "$@"; do
    if [ "$t" = arm64 ]; then want_arm64=1; else targets+=(--target "$t"); fi
  done
  if [ "${#targets[@]}" -gt 0 ]; then cmake --build "$BUILD" -j "$JOBS" "${targets[@]}"; fi
  if [ "$want_arm64" = 1 ]; then arm64; fi
else
  cmake --build "$BUILD" -j "$JOBS"
  if [ "${DFARM_BENCHMARKS:-1}" != 0 ] &&
    cmake --build "$BUILD" --target help | grep '^benchmarks:' >/dev/null; then
    cmake --build "$BUILD" -j "$JOBS" --target benchmarks
  fi
  arm64
fi
