#include "harness/spec/runner_builds.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "agent/protocol/runner_kinds.h"
#include "harness/run/bundle_maker.h"
#include "harness/spec/input_sets.h"  // CacheDir

namespace dfarm::harness {

namespace fs = std::filesystem;

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_regular_file(path, ec);
}

// The TensorFlow Lite library folder of an ABI under TfliteLibraryDir().
std::string TfliteArchDir(const std::string& abi) {
  return TfliteLibraryDir() + (abi == kArm64Abi ? "/linux_arm64" : "/linux_amd64");
}

// Sets runner->builds[abi] to a bundle of `exe` (plus `extra` libraries), or
// notes why there is none.
void AddBundle(RunnerSpec* runner, const std::string& abi, const std::string& exe,
               const std::vector<std::string>& extra) {
  BundleRequest req;
  req.exe = exe;
  req.extra_files = extra;
  auto bundle = CachedBundle(req, CacheDir("DFARM_BUNDLE_CACHE", "bundles"));
  if (!bundle) {
    runner->missing_builds[abi] = "cannot bundle '" + exe + "': " + bundle.message();
    return;
  }
  runner->builds[abi] = *bundle;
}

void FillDfarm(RunnerSpec* runner, const std::string& runner_path, std::string arm) {
  runner->builds[HostAbi()] = runner_path;
  if (HostAbi() == kArm64Abi) return;
  if (arm.empty()) arm = EnvOr("DFARM_ARM64_RUNNER", "");
  if (arm.empty() && !runner_path.empty()) arm = Arm64ProgramOf(runner_path);
  if (!IsFile(arm)) {
    runner->missing_builds[kArm64Abi] = "no arm64 dfarm-runner at '" + arm +
                                        "' (scripts/build.sh arm64, or set DFARM_ARM64_RUNNER)";
    return;
  }
  // A dynamically linked build (XNNPACK) travels as a bundle with its
  // libraries and loader; a static one as it is.
  auto dynamic = IsDynamicElf(arm);
  if (dynamic && *dynamic) {
    AddBundle(runner, kArm64Abi, arm, {});
  } else {
    runner->builds[kArm64Abi] = arm;
  }
}

void FillTflite(RunnerSpec* runner, const std::string& runner_path) {
  const std::string host_exe =
      (fs::path(runner_path).parent_path() / "dfarm-tflite-runner").string();
  std::vector<std::pair<std::string, std::string>> abis = {{HostAbi(), host_exe}};
  if (HostAbi() != kArm64Abi) abis.emplace_back(kArm64Abi, Arm64ProgramOf(host_exe));
  for (const auto& [abi, exe] : abis) {
    const std::string lib = TfliteArchDir(abi) + "/libtensorflowlite_c.so";
    if (!IsFile(exe)) {
      runner->missing_builds[abi] = "no dfarm-tflite-runner for " + abi + " at '" + exe +
                                    "' (scripts/build.sh" + (abi == kArm64Abi ? " arm64)" : ")");
    } else if (!IsFile(lib)) {
      runner->missing_builds[abi] = "TensorFlow Lite's library is not at '" + lib +
                                    "' (scripts/setup.sh fetches it; or set DFARM_TFLITE_DIR)";
    } else {
      AddBundle(runner, abi, exe, {lib});
    }
  }
}

}  // namespace

std::string Arm64ProgramOf(const std::string& host_program) {
  const std::string built = Arm64BuildOf(host_program);
  const fs::path p(host_program);
  const fs::path installed =
      p.parent_path().parent_path() / "share" / "dfarm" / "arm64" / "bin" / p.filename();
  std::error_code ec;
  if (!fs::exists(built, ec) && fs::exists(installed, ec)) return installed.string();
  return built;
}

std::string TfliteLibraryDir() { return EnvOr("DFARM_TFLITE_DIR", DFARM_DEFAULT_TFLITE_DIR); }

void FillDefaultBuilds(RunnerSpec* runner, const std::string& runner_path,
                       const std::string& arm64_runner_path) {
  if (runner->kind == agent::kRunnerKindDfarm) {
    FillDfarm(runner, runner_path, arm64_runner_path);
  } else if (runner->kind == agent::kRunnerKindTflite) {
    FillTflite(runner, runner_path);
  }
}

}  // namespace dfarm::harness
