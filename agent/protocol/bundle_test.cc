#include "agent/protocol/bundle.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dfarm::agent {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dfarm_bundle_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "src");
    WriteAll(dir_ / "src/runner", "#!/bin/sh\necho hi\n");
    WriteAll(dir_ / "src/ld.so", "loader bytes");
    WriteAll(dir_ / "src/libc.so.6", std::string(100000, 'c'));
    WriteAll(dir_ / "src/empty", "");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Src(const char* name) const { return (dir_ / "src" / name).string(); }
  std::string Path(const char* name) const { return (dir_ / name).string(); }

  BundleLayout Layout() const { return {"bin/runner", "lib/ld.so", "lib"}; }
  // Deliberately not in name order.
  std::vector<BundleFile> Files() const {
    return {{"lib/libc.so.6", 0644, Src("libc.so.6")},
            {"bin/runner", 0755, Src("runner")},
            {"lib/ld.so", 0755, Src("ld.so")},
            {"share/empty", 0644, Src("empty")}};
  }
  std::string Packed() {
    auto r = PackBundleFile(Layout(), Files(), Path("b.bundle"));
    EXPECT_TRUE(r) << r.message();
    return ReadAll(Path("b.bundle"));
  }
  // The error of unpacking `bytes` ("(unpacked)" if none); a failed unpack
  // must leave no folder.
  std::string UnpackError(const std::string& bytes) {
    WriteAll(Path("bad.bundle"), bytes);
    auto r = UnpackBundleFile(Path("bad.bundle"), Path("out"));
    if (r) {
      fs::remove_all(Path("out"));
      return "(unpacked)";
    }
    EXPECT_FALSE(fs::exists(Path("out"))) << r.message();
    return r.message();
  }

  fs::path dir_;
};

TEST_F(BundleTest, RoundTripsFilesModesAndLayout) {
  const std::string bytes = Packed();
  EXPECT_TRUE(IsBundleFile(Path("b.bundle")));
  EXPECT_TRUE(IsBundleHead(bytes));
  EXPECT_FALSE(IsBundleFile(Src("runner")));
  auto index = ReadBundleIndex(Path("b.bundle"));
  ASSERT_TRUE(index) << index.message();
  EXPECT_EQ(index->names,
            (std::vector<std::string>{"bin/runner", "lib/ld.so", "lib/libc.so.6", "share/empty"}));
  EXPECT_EQ(index->modes, (std::vector<uint32_t>{0755, 0755, 0644, 0644}));
  EXPECT_EQ(index->sizes, (std::vector<uint64_t>{18, 12, 100000, 0}));

  auto layout = UnpackBundleFile(Path("b.bundle"), Path("out"));
  ASSERT_TRUE(layout) << layout.message();
  EXPECT_EQ(layout->exec, "bin/runner");
  EXPECT_EQ(layout->loader, "lib/ld.so");
  EXPECT_EQ(layout->library_dir, "lib");
  for (const BundleFile& f : Files()) {
    const fs::path out = dir_ / "out" / f.name;
    EXPECT_EQ(ReadAll(out), ReadAll(f.host_path)) << f.name;
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0) << f.name;
    EXPECT_EQ(st.st_mode & 07777, f.mode) << f.name;
  }
  // The target must not exist yet.
  auto again = UnpackBundleFile(Path("b.bundle"), Path("out"));
  ASSERT_FALSE(again);
  EXPECT_NE(again.message().find("cannot create"), std::string::npos) << again.message();
}

TEST_F(BundleTest, PacksTheSameBytesTwice) {
  const std::string first = Packed();
  std::vector<BundleFile> reversed = Files();
  std::reverse(reversed.begin(), reversed.end());
  ASSERT_TRUE(PackBundleFile(Layout(), reversed, Path("c.bundle")));
  EXPECT_EQ(first, ReadAll(Path("c.bundle")));
  EXPECT_EQ(first.substr(0, 8), "DFBUNDL1");
}

TEST_F(BundleTest, PacksWithoutALoader) {
  BundleLayout layout{"bin/runner", "", "lib"};
  std::vector<BundleFile> files = {{"bin/runner", 0755, Src("runner")}};
  ASSERT_TRUE(PackBundleFile(layout, files, Path("b.bundle")));
  auto back = UnpackBundleFile(Path("b.bundle"), Path("out"));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->loader, "");
}

TEST_F(BundleTest, RefusesToPackBadInputs) {
  auto expect_error = [&](BundleLayout layout, std::vector<BundleFile> files, const char* want) {
    auto r = PackBundleFile(layout, files, Path("x.bundle"));
    ASSERT_FALSE(r) << want;
    EXPECT_NE(r.message().find(want), std::string::npos) << r.message();
    EXPECT_FALSE(fs::exists(Path("x.bundle")));
  };
  std::vector<BundleFile> files = Files();
  files.push_back({"bin/runner", 0644, Src("empty")});
  expect_error(Layout(), files, "duplicate file 'bin/runner'");
  expect_error(Layout(), {{"../evil", 0755, Src("runner")}}, "'..'");
  expect_error({"bin/runner", "", "lib"}, {{"lib/ld.so", 0755, Src("ld.so")}},
               "exec 'bin/runner' is not a file of the bundle");
  expect_error(Layout(), {{"bin/runner", 0755, Src("runner")}},
               "loader 'lib/ld.so' is not a file of the bundle");
  expect_error({"bin/runner", "", "lib"}, {{"bin/runner", 0644, Src("runner")}},
               "exec 'bin/runner' does not have mode 0755");
  expect_error({"bin/runner", "", "lib"}, {{"bin/runner", 0700, Src("runner")}}, "mode 0700");
  expect_error({"bin/runner", "", "lib"}, {{"bin/runner", 0755, Src("missing")}}, "cannot read");
  expect_error({"a", "", "lib"}, {{"a", 0755, Src("runner")}, {"a/b", 0644, Src("empty")}},
               "'a' is both a file and a folder");
  expect_error({"bin/runner", "", "lib"},
               {{"bin/runner", 0755, Src("runner")}, {"bin/x y", 0644, Src("empty")}},
               "character outside");
}

TEST_F(BundleTest, RefusesMalformedBundles) {
  const std::string good = Packed();
  EXPECT_NE(UnpackError(good.substr(0, 5)).find("not a bundle"), std::string::npos);
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_NE(UnpackError(magic).find("no \"DFBUNDL1\" header"), std::string::npos);
  EXPECT_NE(UnpackError(good.substr(0, 30)).find("truncated header"), std::string::npos);
  const std::string cut = UnpackError(good.substr(0, good.size() - 1));
  EXPECT_NE(cut.find("file 'lib/libc.so.6' runs past the end"), std::string::npos) << cut;
  const std::string extra = UnpackError(good + "zz");
  EXPECT_NE(extra.find("2 bytes after the last file"), std::string::npos) << extra;

  // Rename "bin/runner" in the header: to "../runner" (a '..' component),
  // then to "lib/ld.so" (a duplicate, and the exec is then missing).
  const size_t at = good.find("bin/runner", good.find("bin/runner") + 1);
  ASSERT_NE(at, std::string::npos);
  std::string dots = good;
  dots.replace(at, 10, "../runner_");
  EXPECT_NE(UnpackError(dots).find("'..' component"), std::string::npos) << UnpackError(dots);
  std::string dup = good;
  dup.replace(at, 10, "lib/ld.so_");
  std::string dup_error = UnpackError(dup);
  EXPECT_NE(dup_error.find("exec 'bin/runner' is not a file of the bundle"), std::string::npos)
      << dup_error;
  dup.replace(at, 10, "lib/ld.so/");
  EXPECT_NE(UnpackError(dup).find("empty component"), std::string::npos) << UnpackError(dup);

  std::string count = good;
  const size_t count_at = 8 + 2 + 10 + 2 + 9 + 2 + 3;
  count[count_at] = 0;
  EXPECT_NE(UnpackError(count).find("file count 0"), std::string::npos) << UnpackError(count);
  EXPECT_NE(UnpackError(good).find("(unpacked)"), std::string::npos);
}

TEST_F(BundleTest, RefusesADuplicateName) {
  // A hand-built bundle: two entries named "a", exec "a".
  std::string b = "DFBUNDL1";
  auto le = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto name = [&](const std::string& s) {
    le(s.size(), 2);
    b += s;
  };
  name("a");
  name("");
  name("lib");
  le(2, 4);
  for (int i = 0; i < 2; ++i) {
    name("a");
    le(0755, 4);
    le(1, 8);
  }
  b += "xy";
  EXPECT_NE(UnpackError(b).find("duplicate file 'a'"), std::string::npos) << UnpackError(b);
}

}  // namespace
}  // namespace dfarm::agent
