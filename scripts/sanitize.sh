#!/usr/bin/env bash
# The suite under sanitizers, built with clang (Debian 12: clang 14) in its own
# folder with DFARM_SANITIZE (CMakeLists.txt).
#   scripts/sanitize.sh            ASan + UBSan: build-asan, everything, the
#                                  whole CTest suite (any report fails its test)
#   scripts/sanitize.sh thread     TSan: build-tsan, the scheduler, agent and
#                                  thread pool tests only (their threads and
#                                  processes)
# Extra arguments go to ctest (e.g. -R SupervisorTest). DFARM_JOBS: build jobs.
# Without extra arguments, ASan + UBSan mode ends with the fuzz smoke (build-fz,
# CTest label fuzz; DFARM_FUZZ_SMOKE=0 skips it).
# Tests that expect an instrumented process to die of SIGSEGV (dfarm-runner
# with a crashing delegate plugin) run with the sanitizer's SEGV handler off,
# so the signal still kills it (with it on, ASan reports and exits 1): those
# whose names match the regex DFARM_SIGNAL_TESTS (default: CrashingPlugin).
# Tests labelled `house` (format, layers, function size: they read the source,
# not what was built) are left to the main suite. Each stage's time is printed
# at the end (`sanitize.sh: build N s, suite N s, fuzz N s, total N s`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE="address"
if [ "${1:-}" = thread ] || [ "${1:-}" = address ]; then
  MODE="$1"
  shift
fi
JOBS="${DFARM_JOBS:-$(nproc)}"
# Tests whose runner must die of SIGSEGV (a crashing plugin): run apart with
# handle_segv=0, else ASan turns the signal into exit 1 (model_error, not crashed).
SIGNAL_TESTS="${DFARM_SIGNAL_TESTS:-CrashingPlugin|CiExampleScriptWorksAsWritten}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
# The tests' precompiled header (cmake/testing.cmake) is cacheable only so.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"

if ! command -v clang++ >/dev/null 2>&1; then
  echo "sanitize.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
if ! echo 'int main() { return 0; }' |
  clang++ -fsanitize="$([ "$MODE" = thread ] && echo thread || echo address,undefined)" \
    -x c++ - -o /dev/null 2>/dev/null; then
  echo "sanitize.sh: clang++ cannot link a sanitized program (apt-get install libclang-rt-14-dev)" >&2
  exit 1
fi

if [ "$MODE" = thread ]; then
  BUILD="${DFARM_SANITIZE_DIR:-$ROOT/build-tsan}"
  SANITIZE="thread"
  # The scheduler's and the agent's tests, and the runtime's thread pool
  # with the kernels that split across it: the code with threads of its own.
  # PROGRAM:REGEX takes only that program's tests whose names match.
  TESTS=(dfarm_scheduler_test "dfarm_e2e_test:^(SchedulerE2eTest|SweepE2eTest)[.]"
    "runtime_kernels_test:^(ThreadPoolTest|ParallelForTest|GemmTest|DepthwiseConvFloatTest|ConvHwc3FloatTest)[.]"
    "runtime_test:^InterpreterTest[.]Fuses"
    dfarm_harness_core_test dfarm_runner_test
    dfarm_agent_test dfarm_agent_e2e_test dfarm_agent_faults_test)
  TARGETS=(dfarm-agent dfarm-runner "${TESTS[@]%%:*}")
else
  BUILD="${DFARM_SANITIZE_DIR:-$ROOT/build-asan}"
  SANITIZE="address;undefined"
  TARGETS=()
  TESTS=()
fi

t0=$SECONDS
if [ ! -f "$BUILD/build.ninja" ]; then
  # -O1 and line tables: fast to build, readable stacks. NDEBUG as in build/.
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG -gline-tables-only" \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG -gline-tables-only" \
    "-DDFARM_SANITIZE=$SANITIZE" -DDFARM_BUILD_BENCHMARKS=OFF >/dev/null
fi
if [ "${#TARGETS[@]}" -gt 0 ]; then
  cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"
else
  cmake --build "$BUILD" -j "$JOBS"
fi

# Any report ends the process with an error; leaks are reported at exit.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1}"
# Leaks inside third-party libraries only (pocl's compiler: scripts/lsan.supp).
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/scripts/tsan.supp}"

t_build=$((SECONDS - t0))
ctest_args=(--test-dir "$BUILD" --output-on-failure -j "$(nproc)" -LE house)
only=()
signal_only=(-R "$SIGNAL_TESTS")
if [ "${#TESTS[@]}" -gt 0 ]; then
  # Only the tests of the executables in TESTS, named in one regex (and those
  # of them that expect SIGSEGV in a second).
  mapfile -t regexes < <(ctest --test-dir "$BUILD" --show-only=json-v1 | python3 -c '
import json, os, re, sys
signal = re.compile(sys.argv[1])
want = dict((a.split(":", 1) + [""])[:2] for a in sys.argv[2:])
names = [t["name"] for t in json.load(sys.stdin)["tests"]
         if t.get("command") and os.path.basename(t["command"][0]) in want
         and re.search(want[os.path.basename(t["command"][0])], t["name"])]
one = lambda ns: "^(" + "|".join(re.escape(n) for n in ns) + ")$" if ns else "^$"
print(one(names))
print(one([n for n in names if signal.search(n)]))' "$SIGNAL_TESTS" "${TESTS[@]}")
  only=(-R "${regexes[0]}")
  signal_only=(-R "${regexes[1]}")
fi
status=0
ctest "${ctest_args[@]}" "${only[@]}" -E "$SIGNAL_TESTS" "$@" || status=$?
# The tests that expect SIGSEGV: the sanitizer must not catch it.
ASAN_OPTIONS="$ASAN_OPTIONS:handle_segv=0" TSAN_OPTIONS="$TSAN_OPTIONS:handle_segv=0" \
  ctest "${ctest_args[@]}" "${signal_only[@]}" "$@" || status=$?

t_suite=$((SECONDS - t0 - t_build))

# The fuzz smoke (ASan + UBSan, no ctest arguments given, DFARM_FUZZ_SMOKE not
# 0): every libFuzzer target over its seeds plus a short fuzz, CTest label
# `fuzz`, in build-fz/ (the folder scripts/fuzz.sh uses for long runs).
if [ "$MODE" = address ] && [ "$#" -eq 0 ] && [ "${DFARM_FUZZ_SMOKE:-1}" != 0 ]; then
  FZ="${DFARM_FUZZ_BUILD_DIR:-$ROOT/build-fz}"
  if [ ! -f "$FZ/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "$FZ" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG -gline-tables-only" \
      "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG -gline-tables-only" \
      -DDFARM_BUILD_FUZZERS=ON -DDFARM_BUILD_GUI=OFF -DDFARM_BUILD_BENCHMARKS=OFF >/dev/null
  fi
  cmake --build "$FZ" -j "$JOBS" --target dfarm_spec_fuzzer dfarm_runner_json_fuzzer \
    dfarm_frame_fuzzer dfarm_session_fuzzer dfarm_model_fuzzer dfarm_model_options_fuzzer \
    dfarm_frame_fuzzer_seeds dfarm_model_fuzzer_seeds
  ctest --test-dir "$FZ" -L fuzz --output-on-failure -j "$(nproc)" || status=$?
fi
t_total=$((SECONDS - t0))
echo "sanitize.sh: build ${t_build} s, suite ${t_suite} s, fuzz $((t_total - t_build - t_suite)) s, total ${t_total} s" >&2
exit "$status"
