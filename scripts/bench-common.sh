# shellcheck shell=bash disable=SC2034
# Sourced by scripts/bench-rss.sh and scripts/bench-speed.sh (not run alone), with the
# script's own arguments: sets BIN (DFARM_BUILD_DIR/bin, default build/bin), TFLITE_LIB
# (DFARM_TFLITE_LIB, default TensorFlow Lite's C library that scripts/setup.sh fetches) and
# MODELS (the arguments, else every models/*.tflite), and exits 2 naming what is missing
# when dfarm-runner or dfarm-tflite-runner is not built. Needs ROOT and BENCH_NAME set.
BIN="${DFARM_BUILD_DIR:-$ROOT/build}/bin"
case "$(uname -m)" in
  aarch64 | arm64) ARCH=arm64 ;;
  *) ARCH=amd64 ;;
esac
TFLITE_LIB="${DFARM_TFLITE_LIB:-$ROOT/.cache/tflite/linux_$ARCH/libtensorflowlite_c.so}"
if [ "$#" -gt 0 ]; then
  MODELS=("$@")
else
  MODELS=("$ROOT"/models/*.tflite)
fi
for exe in dfarm-runner dfarm-tflite-runner; do
  if [ ! -x "$BIN/$exe" ]; then
    echo "$BENCH_NAME: $BIN/$exe is missing; build it first (scripts/build.sh $exe)" >&2
    exit 2
  fi
done
