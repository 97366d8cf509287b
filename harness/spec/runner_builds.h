// The default builds of a runner kind (docs/CONTRACTS.md, "Runner kinds"):
// what a spec runner entry without "builds" runs, and the default runner of
// a spec without "runners".
//   dfarm   dfarm-runner beside dfarm for this host's ABI; for arm64-v8a
//           $DFARM_ARM64_RUNNER, else the cross build (B/arm64/bin/dfarm-runner, or
//           an installed PREFIX/share/dfarm/arm64/bin/dfarm-runner: Arm64ProgramOf),
//           bundled with its libraries and loader when it is dynamically linked
//           (the arm64 build links Debian's arm64 XNNPACK).
//   tflite  dfarm-tflite-runner (beside dfarm; the cross build for arm64-v8a)
//           bundled with TensorFlow Lite's libtensorflowlite_c.so from
//           TfliteLibraryDir()/<linux_amd64|linux_arm64>/ and the loader.
// Tool kinds (benchmark_model, inference_diff) have no default: the user
// brings the binary. Bundles are made on demand into
// CacheDir("DFARM_BUNDLE_CACHE", "bundles"), once per content.
#pragma once

#include <string>

#include "harness/spec/spec.h"

namespace dfarm::harness {

// Where TensorFlow Lite's prebuilt C libraries are: $DFARM_TFLITE_DIR, else
// the checkout's .cache/tflite (scripts/setup.sh fetches them there).
std::string TfliteLibraryDir();

// The arm64 device build of a host program PREFIX/bin/NAME: the cross build
// Arm64BuildOf(host_program) (a build folder), else, when only that exists,
// PREFIX/share/dfarm/arm64/bin/NAME (an installed tree, cmake/DfarmInstall.cmake).
// Returns the cross build's path when neither exists.
std::string Arm64ProgramOf(const std::string& host_program);

// Fills runner->builds with the defaults of runner->kind for this host's ABI
// and arm64-v8a; an ABI without a default build gets a line in
// runner->missing_builds saying why (what to build or set up). runner_path
// is the host's dfarm-runner; arm64_runner_path the arm64 one ("" to look
// for it).
void FillDefaultBuilds(RunnerSpec* runner, const std::string& runner_path,
                       const std::string& arm64_runner_path);

}  // namespace dfarm::harness
