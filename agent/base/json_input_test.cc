#include "agent/base/json_input.h"

#include <string>

#include "gtest/gtest.h"

namespace dfarm {
namespace {

TEST(JsonInputTest, NestingUpToTheLimitPasses) {
  std::string text = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(CheckJsonNesting(text, "doc").ok());
  EXPECT_TRUE(CheckJsonNesting(R"({"a":[{"b":[1,2]},{}],"c":"[[[["})", "doc", 4).ok());
}

TEST(JsonInputTest, DeeperNestingIsAnInvalidInputNamingTheDocument) {
  std::string text(100000, '[');
  auto r = CheckJsonNesting(text, "policy 'p.json'");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
  EXPECT_EQ(r.message(), "policy 'p.json': nested deeper than 64 levels");
  EXPECT_FALSE(CheckJsonNesting(R"({"a":{"b":{"c":{}}}})", "doc", 3).ok());
}

TEST(JsonInputTest, BracketsInsideStringsDoNotCount) {
  EXPECT_TRUE(CheckJsonNesting(R"(["[[[[\"[[[[", "\\", "{{{{"])", "doc", 1).ok());
}

TEST(JsonInputTest, AbbreviatedCutsLongTextAtACharacterBoundary) {
  EXPECT_EQ(Abbreviated("short"), "short");
  EXPECT_EQ(Abbreviated(std::string(80, 'x')), std::string(80, 'x'));
  EXPECT_EQ(Abbreviated(std::string(60000, '[')), std::string(80, '[') + "\u2026");
  // "é" is two bytes; a cut inside it backs off to before it.
  EXPECT_EQ(Abbreviated("ab\u00e9", 3), "ab\u2026");
}

}  // namespace
}  // namespace dfarm
