#include "agent/protocol/input_set.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dfarm::agent {
namespace {

TEST(InputSetTest, PacksAndUnpacksFiles) {
  const std::vector<std::string> files = {std::string("\x01\x02\x03", 3), "", "abcd"};
  auto packed = PackInputSet(files);
  ASSERT_TRUE(packed) << packed.message();
  EXPECT_EQ(packed->substr(0, 8), "DFINSET1");
  EXPECT_EQ(packed->size(), 8u + 4u + 3 * 8u + 7u);
  auto back = UnpackInputSet(*packed);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, files);
}

TEST(InputSetTest, RefusesMalformedBlobs) {
  EXPECT_FALSE(PackInputSet({}));
  EXPECT_FALSE(UnpackInputSet("DFINSET"));
  EXPECT_FALSE(UnpackInputSet("XXINSET1\x01\x00\x00\x00"));
  auto packed = PackInputSet({"abcd", "ef"});
  ASSERT_TRUE(packed);
  std::string truncated = packed->substr(0, packed->size() - 1);
  auto cut = UnpackInputSet(truncated);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.message().find("input_1.bin runs past the end"), std::string::npos)
      << cut.message();
  auto extra = UnpackInputSet(*packed + "z");
  ASSERT_FALSE(extra);
  EXPECT_NE(extra.message().find("1 bytes after the last file"), std::string::npos);
  std::string zero(*packed);
  zero[8] = 0;
  EXPECT_FALSE(UnpackInputSet(zero));
}

TEST(InputSetTest, UnpacksAFileIntoAFolder) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("dfarm_input_set_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto packed = PackInputSet({"0123", "xy"});
  ASSERT_TRUE(packed);
  {
    std::ofstream out(dir / "set", std::ios::binary);
    out << *packed;
  }
  auto r = UnpackInputSetFile((dir / "set").string(), (dir / "unpacked").string());
  ASSERT_TRUE(r) << r.message();
  for (auto [name, want] : {std::pair{"input_0.bin", "0123"}, std::pair{"input_1.bin", "xy"}}) {
    std::ifstream in(dir / "unpacked" / name, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    EXPECT_EQ(s.str(), want) << name;
  }
  EXPECT_FALSE(fs::exists(dir / "unpacked" / "input_2.bin"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dfarm::agent
