#include "reports/palette.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "reports/html_sections.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

using ::testing::HasSubstr;

bool IsHex(const char* colour) { return std::regex_match(colour, std::regex("#[0-9a-f]{6}")); }

// Every verdict has its own colours: none falls back to another's, or to a
// cell without a verdict.
TEST(PaletteTest, EveryVerdictHasItsOwnColours) {
  std::set<std::string> backgrounds{NoVerdictColours().background};
  EXPECT_TRUE(IsHex(NoVerdictColours().background));
  EXPECT_TRUE(IsHex(NoVerdictColours().foreground));
  for (gate::Verdict v : gate::AllVerdicts()) {
    const Colours c = VerdictColours(v);
    EXPECT_TRUE(IsHex(c.background)) << gate::VerdictName(v) << ": " << c.background;
    EXPECT_TRUE(IsHex(c.foreground)) << gate::VerdictName(v) << ": " << c.foreground;
    EXPECT_STRNE(c.background, c.foreground) << gate::VerdictName(v);
    EXPECT_TRUE(backgrounds.insert(c.background).second) << gate::VerdictName(v);
  }
}

TEST(PaletteTest, TheHtmlReportStylesEveryVerdictFromThePalette) {
  RunReport r;
  r.run.status = "finished";
  r.comparison = Comparison{};
  CellVerdict v;
  v.verdict = gate::Verdict::kImproved;
  r.comparison->cells = {v};
  const std::string html = RenderHtml(r);
  for (gate::Verdict verdict : gate::AllVerdicts()) {
    const Colours c = VerdictColours(verdict);
    EXPECT_THAT(html,
                HasSubstr(std::string(".v-") + gate::VerdictName(verdict) +
                          " { background: " + c.background + "; color: " + c.foreground + "; }"));
  }
  EXPECT_THAT(html, HasSubstr("<span class=\"badge v-improved\">improved</span>"));
}

}  // namespace
}  // namespace dfarm::reports

namespace dfarm::reports {
namespace {

// An expected `unsupported` is neutral, never the red of a crash; every
// failure class is red; ok is the passing verdict's green.
TEST(PaletteTest, UnsupportedIsNeutralAndFailuresAreRed) {
  const Colours unsupported = JobStatusColours("unsupported");
  const Colours crashed = JobStatusColours("crashed");
  EXPECT_STRNE(unsupported.background, crashed.background);
  EXPECT_STRNE(unsupported.foreground, crashed.foreground);
  EXPECT_FALSE(IsFailureStatus("unsupported"));
  for (const char* failure : {"model_error", "delegate_error", "crashed", "timeout", "infra"}) {
    EXPECT_TRUE(IsFailureStatus(failure)) << failure;
    EXPECT_STREQ(JobStatusColours(failure).background,
                 VerdictColours(gate::Verdict::kFail).background)
        << failure;
  }
  for (const char* pending : {"", "queued", "running", "cancelled", "not_run"}) {
    EXPECT_FALSE(IsFailureStatus(pending)) << pending;
  }
  EXPECT_STREQ(JobStatusColours("ok").background, VerdictColours(gate::Verdict::kPass).background);
  // The HTML report's status text follows the same rule.
  for (const char* grey : {"unsupported", "cancelled", "not_run", "queued", "running"}) {
    EXPECT_STREQ(HtmlStatusClass(grey), "st st-pending") << grey;
  }
  for (const char* red : {"crashed", "timeout", "model_error", "infra"}) {
    EXPECT_STREQ(HtmlStatusClass(red), "st st-fail") << red;
  }
  EXPECT_STREQ(HtmlStatusClass("ok"), "st st-ok");
}

}  // namespace
}  // namespace dfarm::reports
