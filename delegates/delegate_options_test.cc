#include "delegates/delegate_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dfarm::delegates {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(DelegateOptionsTest, ParsesEntriesInOrderAndKeepsColonsInValues) {
  std::string error;
  auto options = ParseDelegateOptions("threads:2;path:/a:b/lib.so;;fp16:true", "x", &error);
  ASSERT_TRUE(options) << error;
  EXPECT_THAT(*options,
              ElementsAre(Pair("threads", "2"), Pair("path", "/a:b/lib.so"), Pair("fp16", "true")));
}

TEST(DelegateOptionsTest, EmptyTextIsNoOptions) {
  auto options = ParseDelegateOptions("", "x", nullptr);
  ASSERT_TRUE(options);
  EXPECT_TRUE(options->empty());
}

TEST(DelegateOptionsTest, BadEntryNamesTheInputAndTheEntry) {
  std::string error;
  EXPECT_FALSE(ParseDelegateOptions("threads:2;fp16", "--delegate-options", &error));
  EXPECT_EQ(error, "bad --delegate-options entry 'fp16' (expected 'key:value')");
  EXPECT_FALSE(ParseDelegateOptions(":2", "x", &error));
  EXPECT_EQ(error, "bad x entry ':2' (expected 'key:value')");
}

TEST(DelegateOptionsTest, FormatRoundTrips) {
  DelegateOptions options = {{"threads", "4"}, {"path", "/x:y/lib.so"}, {"b", ""}};
  std::string text = FormatDelegateOptions(options);
  EXPECT_EQ(text, "threads:4;path:/x:y/lib.so;b:");
  auto back = ParseDelegateOptions(text, "x", nullptr);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, options);
  EXPECT_EQ(FormatDelegateOptions({}), "");
}

TEST(DelegateOptionsTest, WritableOptionsExcludeSeparatorsAndControls) {
  EXPECT_TRUE(IsWritableOption("threads", "2"));
  EXPECT_TRUE(IsWritableOption("path", "/a:b"));
  EXPECT_FALSE(IsWritableOption("", "2"));
  EXPECT_FALSE(IsWritableOption("a:b", "2"));
  EXPECT_FALSE(IsWritableOption("a", "x;y"));
  EXPECT_FALSE(IsWritableOption("a", "x\ny"));
}

TEST(DelegateOptionKeysTest, ReadsKeysAsTheRunnerSplits) {
  EXPECT_THAT(DelegateOptionKeys("a:1;path;;b:x:y"), ElementsAre("a", "path", "b"));
  EXPECT_TRUE(DelegateOptionKeys("").empty());
}

}  // namespace
}  // namespace dfarm::delegates
