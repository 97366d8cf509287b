#include "reports/gate/verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace dfarm::gate {
namespace {

using ::testing::HasSubstr;

TEST(VerdictTest, EveryNameRoundTrips) {
  std::set<std::string> names;
  for (Verdict v : AllVerdicts()) {
    const std::string name = VerdictName(v);
    EXPECT_TRUE(names.insert(name).second) << "two verdicts named '" << name << "'";
    auto parsed = ParseVerdict(name);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    EXPECT_EQ(*parsed, v) << name;
  }
  EXPECT_EQ(AllVerdicts().size(), 7u);
}

// The names are a contract (docs/CONTRACTS.md): outputs and stored documents carry them.
TEST(VerdictTest, NamesAreTheContractsWords) {
  EXPECT_STREQ(VerdictName(Verdict::kPass), "pass");
  EXPECT_STREQ(VerdictName(Verdict::kImproved), "improved");
  EXPECT_STREQ(VerdictName(Verdict::kRegressed), "regressed");
  EXPECT_STREQ(VerdictName(Verdict::kUnknown), "unknown");
  EXPECT_STREQ(VerdictName(Verdict::kFail), "fail");
  EXPECT_STREQ(VerdictName(Verdict::kNew), "new");
  EXPECT_STREQ(VerdictName(Verdict::kMissing), "missing");
}

TEST(VerdictTest, AnUnknownNameIsAnErrorListingTheNames) {
  auto bad = ParseVerdict("passed");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(bad.message(), HasSubstr("'passed'"));
  for (Verdict v : AllVerdicts()) EXPECT_THAT(bad.message(), HasSubstr(VerdictName(v)));
  EXPECT_FALSE(ParseVerdict("").ok());
  EXPECT_FALSE(ParseVerdict("Pass").ok());
}

TEST(VerdictTest, OnlyFailAndRegressedFailTheGate) {
  for (Verdict v : AllVerdicts()) {
    EXPECT_EQ(FailsGate(v), v == Verdict::kFail || v == Verdict::kRegressed) << VerdictName(v);
  }
}

}  // namespace
}  // namespace dfarm::gate
