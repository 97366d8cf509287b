// The bundle maker over the real built programs: the host's dfarm-runner and,
// when the cross build is there, the arm64 one (build/arm64). Bundles are read
// back with the agent's own codec and run from the unpacked folder.
#include "harness/run/bundle_maker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "agent/base/sha256.h"
#include "agent/protocol/bundle.h"
#include "harness/test_util.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kHostRunner = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner";
const std::string kArmRunner = std::string(DFARM_BINARY_DIR) + "/arm64/bin/dfarm-runner";
const std::string kArmAgent = std::string(DFARM_BINARY_DIR) + "/arm64/bin/dfarm-agent";
const std::string kPlugin = std::string(DFARM_BINARY_DIR) + "/lib/libdfarm_example_delegate.so";

// Runs a shell command; its stdout and exit status.
std::pair<std::string, int> Shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {"popen failed", -1};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return {out, ::pclose(p)};
}

// Unpacks `bundle` into `dir` and checks that every DT_NEEDED of every ELF
// file in it is a file of its library folder (or the loader itself).
void ExpectSelfContained(const std::string& bundle, const std::string& dir) {
  auto layout = agent::UnpackBundleFile(bundle, dir);
  ASSERT_TRUE(layout.ok()) << layout.message();
  auto index = agent::ReadBundleIndex(bundle);
  ASSERT_TRUE(index.ok()) << index.message();
  std::set<std::string> libs;
  for (const std::string& name : index->names) {
    if (name.rfind("lib/", 0) == 0) libs.insert(name.substr(4));
  }
  for (const std::string& name : index->names) {
    auto elf = ReadElfInfo(dir + "/" + name);
    ASSERT_TRUE(elf.ok()) << elf.message();
    for (const std::string& needed : elf->needed) {
      EXPECT_TRUE(libs.count(needed) != 0) << name << " needs " << needed << ", not in the bundle";
    }
  }
}

TEST(BundleMakerTest, ReadsTheHostRunnersHeaders) {
  auto elf = ReadElfInfo(kHostRunner);
  ASSERT_TRUE(elf.ok()) << elf.message();
  EXPECT_EQ(elf->machine, kElfMachineX86_64);
  EXPECT_EQ(elf->interpreter, "/lib64/ld-linux-x86-64.so.2");
  EXPECT_THAT(elf->needed, ::testing::Contains("libc.so.6"));
  EXPECT_THAT(elf->needed, ::testing::Contains("libstdc++.so.6"));
}

TEST(BundleMakerTest, HostRunnerBundleIsSelfContainedAndRuns) {
  TempDir tmp;
  const std::string out = (tmp.path() / "runner.bundle").string();
  auto report = MakeBundle({kHostRunner, {kPlugin}, {}, true, out});
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_EQ(report->machine, "x86-64");
  EXPECT_EQ(report->loader, "lib/ld-linux-x86-64.so.2");
  EXPECT_EQ(report->sha256, *agent::Sha256File(out));
  uint64_t total = 0;
  std::set<std::string> names;
  for (const BundledFile& f : report->files) {
    total += f.size;
    names.insert(f.name);
    EXPECT_EQ(f.mode, f.name.rfind("bin/", 0) == 0 || f.name == report->loader ? 0755u : 0644u)
        << f.name;
  }
  EXPECT_EQ(report->total_bytes, total);
  EXPECT_TRUE(names.count("bin/dfarm-runner"));
  EXPECT_TRUE(names.count("lib/libc.so.6"));
  EXPECT_TRUE(names.count("lib/libdfarm_example_delegate.so"));
  auto index = agent::ReadBundleIndex(out);
  ASSERT_TRUE(index.ok()) << index.message();
  EXPECT_EQ(index->layout.exec, "bin/dfarm-runner");
  EXPECT_EQ(index->layout.loader, "lib/ld-linux-x86-64.so.2");
  EXPECT_EQ(index->layout.library_dir, "lib");
  const std::string dir = (tmp.path() / "unpacked").string();
  ExpectSelfContained(out, dir);
  auto [text, status] = Shell(dir + "/lib/ld-linux-x86-64.so.2 --library-path " + dir + "/lib " +
                              dir + "/bin/dfarm-runner --version");
  EXPECT_EQ(status, 0) << text;
  EXPECT_THAT(text, HasSubstr("dfarm-runner"));
}

TEST(BundleMakerTest, SameInputsSameBytes) {
  TempDir tmp;
  auto a = MakeBundle({kHostRunner, {}, {}, true, (tmp.path() / "a").string()});
  auto b = MakeBundle({kHostRunner, {}, {}, true, (tmp.path() / "b").string()});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->sha256, b->sha256);
}

TEST(BundleMakerTest, AMissingLibraryIsNamedWithWhoNeedsItAndWhereItLooked) {
  TempDir tmp;
  const std::string empty = (tmp.path() / "nolibs").string();
  fs::create_directories(empty);
  auto elf = ReadElfInfo(kHostRunner);
  ASSERT_TRUE(elf.ok() && !elf->needed.empty());
  auto report = MakeBundle({kHostRunner, {}, {empty}, false, (tmp.path() / "x").string()});
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().kind, ErrorKind::kFailed);
  EXPECT_THAT(report.message(), HasSubstr(elf->needed.front() + ", needed by dfarm-runner"));
  EXPECT_THAT(report.message(), HasSubstr(empty));
  EXPECT_FALSE(fs::exists(tmp.path() / "x"));
  // With the loader, its own file is looked up first.
  auto loader = MakeBundle({kHostRunner, {}, {empty}, true, (tmp.path() / "x").string()});
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.message(), HasSubstr("ld-linux-x86-64.so.2, needed by dfarm-runner"));
}

TEST(BundleMakerTest, RefusesANonElfFileClearly) {
  TempDir tmp;
  const std::string text = tmp.Write("run.sh", "#!/bin/sh\necho hi\n");
  auto report = MakeBundle({text, {}, {}, true, (tmp.path() / "x").string()});
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(report.message(), HasSubstr("'" + text + "' is not an ELF file"));
  auto lib = MakeBundle({kHostRunner, {text}, {}, true, (tmp.path() / "x").string()});
  ASSERT_FALSE(lib.ok());
  EXPECT_THAT(lib.message(), HasSubstr("'" + text + "' is not an ELF file"));
  auto missing = MakeBundle({(tmp.path() / "nope").string(), {}, {}, true, "x"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("nope' is not a file"));
  auto truncated = ReadElfInfo(tmp.Write("short", std::string("\x7f"
                                                              "ELF\x02\x01",
                                                              6)));
  ASSERT_FALSE(truncated.ok());
  EXPECT_THAT(truncated.message(), HasSubstr("is not an ELF file"));
}

TEST(BundleMakerTest, LibrariesOfAnotherMachineArePassedOver) {
  if (!fs::exists("/usr/aarch64-linux-gnu/lib/libc.so.6")) GTEST_SKIP() << "no aarch64 libc";
  TempDir tmp;
  std::vector<std::string> dirs = {"/usr/aarch64-linux-gnu/lib"};
  for (const std::string& d : DefaultSearchDirs(kElfMachineX86_64)) dirs.push_back(d);
  auto report = MakeBundle({kHostRunner, {}, dirs, true, (tmp.path() / "b").string()});
  ASSERT_TRUE(report.ok()) << report.message();
  for (const BundledFile& f : report->files) {
    EXPECT_EQ(f.host_path.rfind("/usr/aarch64-linux-gnu", 0), std::string::npos) << f.host_path;
    EXPECT_EQ(ReadElfInfo(f.host_path)->machine, kElfMachineX86_64) << f.host_path;
  }
  auto mixed = MakeBundle({kHostRunner,
                           {"/usr/aarch64-linux-gnu/lib/libc.so.6"},
                           {},
                           true,
                           (tmp.path() / "c").string()});
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.message(), HasSubstr("is an aarch64 file, but"));
}

TEST(BundleMakerTest, CachedBundleIsMadeOnceAndNamedByItsInputs) {
  TempDir tmp;
  const std::string cache = (tmp.path() / "cache").string();
  auto first = CachedBundle({kHostRunner, {}, {}, true, ""}, cache);
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_THAT(*first, ::testing::MatchesRegex(".*/cache/dfarm-runner-[0-9a-f]{16}\\.bundle"));
  const auto written = fs::last_write_time(*first);
  auto again = CachedBundle({kHostRunner, {}, {}, true, ""}, cache);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(fs::last_write_time(*again), written);
  auto with_plugin = CachedBundle({kHostRunner, {kPlugin}, {}, true, ""}, cache);
  ASSERT_TRUE(with_plugin.ok()) << with_plugin.message();
  EXPECT_NE(*with_plugin, *first);
  auto index = agent::ReadBundleIndex(*with_plugin);
  ASSERT_TRUE(index.ok());
  EXPECT_THAT(index->names, ::testing::Contains("lib/libdfarm_example_delegate.so"));
}

TEST(BundleMakerTest, Arm64RunnerBundleRunsUnderQemuWithoutASysroot) {
  if (!fs::exists(kArmRunner)) GTEST_SKIP() << "no arm64 build (scripts/build.sh arm64)";
  TempDir tmp;
  const std::string out = (tmp.path() / "arm.bundle").string();
  auto report = MakeBundle({kArmRunner, {}, {}, true, out});
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_EQ(report->machine, "aarch64");
  EXPECT_EQ(report->loader, "lib/ld-linux-aarch64.so.1");
  const std::string dir = (tmp.path() / "unpacked").string();
  ExpectSelfContained(out, dir);
  if (Shell("command -v qemu-aarch64").second != 0) GTEST_SKIP() << "no qemu-aarch64";
  auto [text, status] = Shell("qemu-aarch64 " + dir + "/lib/ld-linux-aarch64.so.1 --library-path " +
                              dir + "/lib " + dir + "/bin/dfarm-runner --version");
  EXPECT_EQ(status, 0) << text;
  EXPECT_THAT(text, HasSubstr("dfarm-runner"));
}

TEST(BundleMakerTest, AStaticProgramHasNoLoader) {
  if (!fs::exists(kArmAgent)) GTEST_SKIP() << "no arm64 build (scripts/build.sh arm64)";
  auto elf = ReadElfInfo(kArmAgent);
  ASSERT_TRUE(elf.ok()) << elf.message();
  ASSERT_TRUE(elf->interpreter.empty() && elf->needed.empty()) << "dfarm-agent is not static";
  TempDir tmp;
  auto report = MakeBundle({kArmAgent, {}, {}, true, (tmp.path() / "a").string()});
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_EQ(report->loader, "");
  ASSERT_EQ(report->files.size(), 1u);
  EXPECT_EQ(report->files[0].name, "bin/dfarm-agent");
  auto index = agent::ReadBundleIndex(report->path);
  ASSERT_TRUE(index.ok()) << index.message();
  EXPECT_EQ(index->layout.loader, "");
}

}  // namespace
}  // namespace dfarm::harness
