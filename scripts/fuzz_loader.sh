#!/usr/bin/env bash
# Configures (once) a clang build in build-fz/ with the fuzzers, builds the
# .tflite loader fuzzer (runtime/fuzz/) and runs it for DURATION seconds.
# Usage: [DURATION=600] [DFARM_FUZZ_BUILD_DIR=build-fz] scripts/fuzz_loader.sh
# A crash fails the script and leaves crash-* in BUILD/runtime/fuzz/; replay
# one with BUILD/bin/dfarm_model_fuzzer FILE.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${DFARM_FUZZ_BUILD_DIR:-$ROOT/build-fz}"
DURATION="${DURATION:-600}"
JOBS="${DFARM_JOBS:-$(nproc)}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDFARM_BUILD_FUZZERS=ON -DDFARM_BUILD_GUI=OFF -DDFARM_BUILD_BENCHMARKS=OFF
fi
cmake -S "$ROOT" -B "$BUILD" -DDFARM_FUZZ_MODEL_SECONDS="$DURATION" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target fuzz-model
