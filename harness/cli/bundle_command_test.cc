// `dfarm bundle` over the built dfarm-runner and example plugin; the bundle
// read back with the agent's codec (agent/protocol/bundle.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "agent/base/sha256.h"
#include "agent/protocol/bundle.h"
#include "harness/cli/cli_test_util.h"
#include "harness/test_util.h"

namespace dfarm::cli {
namespace {

using test_util::Call;
using test_util::Outcome;
using ::testing::HasSubstr;

const std::string kRunner = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner";
const std::string kPlugin = std::string(DFARM_BINARY_DIR) + "/lib/libdfarm_example_delegate.so";

TEST(BundleCommandTest, JsonNamesEveryFileAndTheBundlesSha256) {
  harness::TempDir dir;
  const std::string out = (dir.path() / "r.bundle").string();
  Outcome o = Call({"bundle", kRunner, "--lib", kPlugin, "-o", out, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["path"], out);
  EXPECT_EQ(doc["sha256"], *agent::Sha256File(out));
  EXPECT_EQ(doc["machine"], "x86-64");
  EXPECT_EQ(doc["loader"], "lib/ld-linux-x86-64.so.2");
  auto index = agent::ReadBundleIndex(out);
  ASSERT_TRUE(index.ok()) << index.message();
  ASSERT_EQ(doc["files"].size(), index->names.size());
  for (size_t i = 0; i < index->names.size(); ++i) {
    EXPECT_EQ(doc["files"][i]["name"], index->names[i]);
    EXPECT_EQ(doc["files"][i]["size"].get<uint64_t>(), index->sizes[i]);
  }
  EXPECT_THAT(index->names, ::testing::Contains("lib/libdfarm_example_delegate.so"));
  EXPECT_THAT(index->names, ::testing::Contains("bin/dfarm-runner"));
}

TEST(BundleCommandTest, TextListsFilesAndNoLoaderLeavesItOut) {
  harness::TempDir dir;
  const std::string out = (dir.path() / "r.bundle").string();
  Outcome o = Call({"bundle", kRunner, "--no-loader", "-o", out});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("loader none"));
  EXPECT_THAT(o.out, HasSubstr("  bin/dfarm-runner  "));
  EXPECT_THAT(o.out, HasSubstr("  lib/libc.so.6  "));
  EXPECT_THAT(o.out, HasSubstr("sha256 " + *agent::Sha256File(out)));
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("lib/ld-linux")));
  auto index = agent::ReadBundleIndex(out);
  ASSERT_TRUE(index.ok()) << index.message();
  EXPECT_EQ(index->layout.loader, "");
}

TEST(BundleCommandTest, ExitCodesNameTheFile) {
  harness::TempDir dir;
  const std::string text = dir.Write("notes.txt", "not a program");
  const std::string out = (dir.path() / "x.bundle").string();
  Outcome not_elf = Call({"bundle", text, "-o", out});
  EXPECT_EQ(not_elf.code, 2);
  EXPECT_THAT(not_elf.err, HasSubstr("'" + text + "' is not an ELF file"));
  Outcome no_out = Call({"bundle", kRunner});
  EXPECT_EQ(no_out.code, 2);
  EXPECT_THAT(no_out.err, HasSubstr("--output"));
  const std::string empty = (dir.path() / "empty").string();
  std::filesystem::create_directories(empty);
  Outcome missing = Call({"bundle", kRunner, "--search", empty, "-o", out});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("needed by dfarm-runner"));
  EXPECT_THAT(missing.err, HasSubstr(empty));
  EXPECT_FALSE(std::filesystem::exists(out));
  Outcome help = Call({"bundle", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_THAT(help.out, HasSubstr("Exit codes: 0 written, 1"));
}

}  // namespace
}  // namespace dfarm::cli
