// Runner bundles through the supervisor (agent/protocol/bundle.h): the host's
// own dfarm-runner packed with its libraries and dynamic loader runs through
// that loader; a bundle without a loader gets LD_LIBRARY_PATH; a malformed
// bundle is infra; bundles whose artifact left the store are pruned.
#include "agent/daemon/runner_bundles.h"

#include <stdio.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <regex>

#include "agent/daemon/supervisor.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;

constexpr char kRunner[] = DFARM_BINARY_DIR "/bin/dfarm-runner";

// The shared libraries `ldd` lists for `program` ("name" -> host path) and
// its loader's host path.
struct Linkage {
  std::vector<std::pair<std::string, std::string>> libs;
  std::string loader;
};

// `list_command` prints ldd's lines (ldd, or a loader's --list); a path
// found under `sysroot` is taken from there (as qemu-user's -L does).
Linkage LddOf(const std::string& list_command, const std::string& sysroot = "") {
  Linkage out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(list_command.c_str(), "r"), ::pclose);
  if (!p) return out;
  static const std::regex kLib(R"(^\s*(\S+) => (/\S+) \(0x)");
  static const std::regex kLoader(R"(^\s*(/\S*ld-linux\S*) \(0x)");
  char line[1024];
  while (fgets(line, sizeof line, p.get())) {
    std::cmatch m;
    if (std::regex_search(line, m, kLib)) {
      std::string host = m[2];
      if (!sysroot.empty() && fs::exists(sysroot + host)) host = sysroot + host;
      if (std::string(m[1]).find("ld-linux") == std::string::npos) {
        out.libs.emplace_back(m[1], host);
      } else {
        out.loader = host;
      }
    } else if (std::regex_search(line, m, kLoader)) {
      out.loader = m[1];
    }
  }
  return out;
}

class RunnerBundlesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ArtifactStore::Open(dir_.path() + "/store");
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(*store);
  }

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  // Packs `files` into a bundle and stores it; returns its sha256.
  std::string PutBundle(const BundleLayout& layout, const std::vector<BundleFile>& files) {
    const std::string path = Path("runner.bundle");
    auto packed = PackBundleFile(layout, files, path);
    EXPECT_TRUE(packed) << packed.message();
    return PutFile(path);
  }
  std::string PutFile(const std::string& path) { return Put(testing::ReadFile(path)); }
  std::string Put(const std::string& bytes) {
    const std::string sha = testing::HashOf(bytes);
    auto r = store_->Put(sha, bytes);
    EXPECT_TRUE(r.ok()) << r.message();
    return sha;
  }
  std::string Script(const std::string& name, const std::string& text) {
    const std::string path = Path(name);
    testing::WriteFile(path, text);
    EXPECT_EQ(::chmod(path.c_str(), 0755), 0);
    return path;
  }
  std::string AddModel() {
    dfarm::testing::ModelBuilder b;
    using dfarm::testing::tfl::TensorType;
    int a = b.AddTensor(TensorType::FLOAT32, {1, 4}, "a");
    int c = b.AddTensor(TensorType::FLOAT32, {1, 4}, "b");
    int sum = b.AddTensor(TensorType::FLOAT32, {1, 4}, "out");
    b.AddAdd(a, c, sum);
    b.SetInputs({a, c});
    b.SetOutputs({sum});
    EXPECT_TRUE(b.WriteFile(Path("add.tflite")));
    return PutFile(Path("add.tflite"));
  }
  // A bundle of `program`: bin/dfarm-runner, lib/<loader>, lib/<each library>.
  std::string PutRunnerBundle(const std::string& program, const Linkage& linkage) {
    std::vector<BundleFile> files = {{"bin/dfarm-runner", 0755, program}};
    const std::string loader = "lib/" + fs::path(linkage.loader).filename().string();
    files.push_back({loader, 0755, linkage.loader});
    for (const auto& [name, host] : linkage.libs) files.push_back({"lib/" + name, 0644, host});
    return PutBundle({"bin/dfarm-runner", loader, "lib"}, files);
  }
  std::string BundleDir(const std::string& sha) const { return store_->root() + "/bundles/" + sha; }

  TempDir dir_;
  std::unique_ptr<ArtifactStore> store_;
};

TEST_F(RunnerBundlesTest, RealRunnerRunsThroughItsBundledLoader) {
  Linkage linkage = LddOf(std::string("ldd ") + kRunner);
  if (linkage.loader.empty()) GTEST_SKIP() << "ldd names no ld-linux loader for " << kRunner;
  const std::string loader = "lib/" + fs::path(linkage.loader).filename().string();
  JobSpec job;
  job.runner_sha256 = PutRunnerBundle(kRunner, linkage);
  job.model_sha256 = AddModel();
  job.num_runs = 3;
  job.timeout_ms = 60000;
  // The prefix records its argv, then runs it: it shows the loader comes first.
  const std::string prefix =
      Script("prefix.sh", "#!/bin/sh\necho \"$@\" > " + Path("prefix.args") + "\nexec \"$@\"\n");
  SupervisorOptions options;
  options.record_device_state = false;
  options.runner_prefix = {"/no/such/runner-prefix"};  // bundle_prefix wins
  options.bundle_prefix = {prefix};
  Supervisor sup(store_.get(), options);
  JobResult r = sup.Run(job);
  ASSERT_EQ(r.status, "ok") << r.error << "\n" << r.stderr_tail;
  EXPECT_THAT(r.runner_json, HasSubstr("\"metrics\""));
  const std::string dir = BundleDir(job.runner_sha256);
  EXPECT_THAT(testing::ReadFile(Path("prefix.args")),
              StartsWith(dir + "/" + loader + " --library-path " + dir + "/lib " + dir +
                         "/bin/dfarm-runner --model "));
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/bin/dfarm-runner").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);

  // Unpacked once: a second job reuses the folder (a marker planted in it stays).
  testing::WriteFile(dir + "/marker", "x");
  options.bundle_prefix.clear();
  options.runner_prefix.clear();
  Supervisor direct(store_.get(), options);
  JobResult again = direct.Run(job);
  EXPECT_EQ(again.status, "ok") << again.error << "\n" << again.stderr_tail;
  EXPECT_TRUE(fs::exists(dir + "/marker"));
}

// The qemu-arm64 device's case: an aarch64 runner bundle under
// `--bundle-prefix qemu-aarch64` runs on its own loader and libc, with no
// -L sysroot. Skipped without the cross build or qemu.
TEST_F(RunnerBundlesTest, Arm64BundleRunsUnderQemuWithoutASysroot) {
  const std::string runner = DFARM_BINARY_DIR "/arm64/bin/dfarm-runner";
  const std::string qemu = "/usr/bin/qemu-aarch64", sysroot = "/usr/aarch64-linux-gnu";
  const std::string sys_loader = sysroot + "/lib/ld-linux-aarch64.so.1";
  for (const std::string& p : {runner, qemu, sys_loader}) {
    if (!fs::exists(p)) GTEST_SKIP() << p << " is absent";
  }
  Linkage linkage =
      LddOf(qemu + " -L " + sysroot + " " + sys_loader + " --list " + runner, sysroot);
  ASSERT_FALSE(linkage.libs.empty());
  if (linkage.loader.empty()) linkage.loader = sys_loader;
  JobSpec job;
  job.runner_sha256 = PutRunnerBundle(runner, linkage);
  job.model_sha256 = AddModel();
  job.num_runs = 2;
  job.timeout_ms = 120000;
  SupervisorOptions options;
  options.record_device_state = false;
  options.runner_prefix = {qemu, "-L", "/no/such/sysroot"};  // would fail: bundle_prefix wins
  options.bundle_prefix = {qemu};
  Supervisor sup(store_.get(), options);
  JobResult r = sup.Run(job);
  ASSERT_EQ(r.status, "ok") << r.error << "\n" << r.stderr_tail;
  EXPECT_THAT(r.runner_json, HasSubstr("\"metrics\""));
}

TEST_F(RunnerBundlesTest, WithoutALoaderTheProgramGetsLdLibraryPath) {
  const std::string tool = Script("tool.sh",
                                  "#!/bin/sh\n"
                                  "echo \"LD_LIBRARY_PATH=$LD_LIBRARY_PATH\" >&2\n"
                                  "echo \"args: $*\"\n");
  testing::WriteFile(Path("libfoo.so"), "not really a library");
  JobSpec job;
  job.runner_sha256 =
      PutBundle({"bin/benchmark_model", "", "lib"},
                {{"bin/benchmark_model", 0755, tool}, {"lib/libfoo.so", 0644, Path("libfoo.so")}});
  job.model_sha256 = Put("model bytes");
  job.runner_kind = "benchmark_model";
  ::setenv("LD_LIBRARY_PATH", "/agent/own/libs", 1);
  SupervisorOptions options;
  options.record_device_state = false;
  Supervisor sup(store_.get(), options);
  JobResult r = sup.Run(job);
  ::unsetenv("LD_LIBRARY_PATH");
  ASSERT_EQ(r.status, "ok") << r.error;
  const std::string dir = BundleDir(job.runner_sha256);
  EXPECT_THAT(r.runner_json, HasSubstr("LD_LIBRARY_PATH=" + dir + "/lib:/agent/own/libs\n"));
  EXPECT_THAT(r.runner_json, HasSubstr("args: --graph=" + *store_->PathOf(job.model_sha256)));
}

TEST_F(RunnerBundlesTest, AMalformedBundleIsInfraAndLeavesNothing) {
  JobSpec job;
  job.runner_sha256 = Put(std::string("DFBUNDL1\x03\x00", 10) + "abc");
  job.model_sha256 = Put("model bytes");
  SupervisorOptions options;
  options.record_device_state = false;
  Supervisor sup(store_.get(), options);
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("runner bundle " + job.runner_sha256.substr(0, 12) + ": "));
  EXPECT_THAT(r.error, HasSubstr("truncated header"));
  EXPECT_FALSE(fs::exists(BundleDir(job.runner_sha256)));
  EXPECT_FALSE(fs::exists(BundleDir(job.runner_sha256) + ".unpacking"));
}

TEST_F(RunnerBundlesTest, PruneRemovesBundlesWhoseArtifactIsGone) {
  const std::string tool = Script("tool.sh", "#!/bin/sh\necho hi\n");
  const std::string kept = PutBundle({"bin/t", "", "lib"}, {{"bin/t", 0755, tool}});
  RunnerBundles bundles(store_->root());
  auto unpacked = bundles.Unpack(kept, *store_->PathOf(kept));
  ASSERT_TRUE(unpacked) << unpacked.message();
  const std::string gone(64, 'a');
  fs::create_directories(BundleDir(gone) + "/bin");
  fs::create_directories(BundleDir(kept) + ".unpacking");
  fs::create_directories(store_->root() + "/bundles/not-a-sha");

  SupervisorOptions options;
  options.record_device_state = false;
  Supervisor sup(store_.get(), options);
  std::vector<std::string> log = sup.PruneBundles();
  EXPECT_EQ(log.size(), 2u);
  EXPECT_FALSE(fs::exists(BundleDir(gone)));
  EXPECT_FALSE(fs::exists(BundleDir(kept) + ".unpacking"));
  EXPECT_TRUE(fs::exists(BundleDir(kept) + "/bin/t"));
  EXPECT_TRUE(fs::exists(store_->root() + "/bundles/not-a-sha"));

  // An artifact the store finds corrupt is deleted, and then its bundle too.
  testing::WriteFile(store_->root() + "/artifacts/" + kept, "DFBUNDL1 changed on disk");
  log = sup.PruneBundles();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_THAT(log[0], HasSubstr(kept.substr(0, 12)));
  EXPECT_FALSE(fs::exists(BundleDir(kept)));
}

}  // namespace
}  // namespace dfarm::agent
