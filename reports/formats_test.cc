#include "reports/formats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "reports/gate/gate.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

using ::testing::HasSubstr;

constexpr FormatUse kUses[] = {FormatUse::kReport, FormatUse::kGate};

TEST(FormatsTest, EveryNameParsesBackToItsRow) {
  for (const FormatInfo& f : Formats()) {
    EXPECT_EQ(&FormatOf(f.format), &f) << f.name;
    for (FormatUse use : kUses) {
      if (!f.UsableBy(use)) continue;
      for (const char* name : {f.name, f.alias}) {
        if (*name == '\0') continue;
        auto parsed = ParseFormat(name, use);
        ASSERT_TRUE(parsed.ok()) << parsed.message();
        EXPECT_EQ(*parsed, f.format) << name;
      }
    }
  }
}

TEST(FormatsTest, NamesAreUniqueAndEveryRowHasARenderer) {
  std::set<std::string> names;
  for (const FormatInfo& f : Formats()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    if (*f.alias != '\0') EXPECT_TRUE(names.insert(f.alias).second) << f.alias;
    EXPECT_NE(*f.help, '\0') << f.name;
    EXPECT_TRUE(f.UsableBy(FormatUse::kReport) || f.UsableBy(FormatUse::kGate)) << f.name;
    // `dfarm report` writing the gate's result needs the gate's renderer.
    if (f.report_renders_gate) EXPECT_NE(f.render_gate, nullptr) << f.name;
    if (f.report_renders_gate) EXPECT_EQ(f.render_run, nullptr) << f.name;
  }
}

// The names each command took before the table, and the order its error listed them in.
TEST(FormatsTest, EachCommandTakesItsNames) {
  EXPECT_EQ(FormatNames(FormatUse::kReport), "html, md, junit, json, csv");
  EXPECT_EQ(FormatNames(FormatUse::kGate), "text, md, junit, json");
  for (const char* name : {"html", "md", "markdown", "junit", "json", "csv"}) {
    EXPECT_TRUE(ParseFormat(name, FormatUse::kReport).ok()) << name;
  }
  for (const char* name : {"text", "md", "markdown", "junit", "json"}) {
    EXPECT_TRUE(ParseFormat(name, FormatUse::kGate).ok()) << name;
  }
  EXPECT_FALSE(ParseFormat("text", FormatUse::kReport).ok());
  EXPECT_FALSE(ParseFormat("html", FormatUse::kGate).ok());
  EXPECT_FALSE(ParseFormat("csv", FormatUse::kGate).ok());
  EXPECT_FALSE(ParseFormat("", FormatUse::kReport).ok());  // an empty alias is no name
  EXPECT_FALSE(ParseFormat("HTML", FormatUse::kReport).ok());
  EXPECT_EQ(*ParseFormat("markdown"), Format::kMarkdown);
  EXPECT_TRUE(FormatOf(Format::kJunit).report_renders_gate);
}

TEST(FormatsTest, TheErrorListsEveryFormatOfTheCommand) {
  for (FormatUse use : kUses) {
    auto bad = ParseFormat("pdf", use);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().kind, ErrorKind::kInvalidInput);
    EXPECT_THAT(bad.message(), HasSubstr("unknown report format 'pdf' (known: "));
    const std::string help = FormatHelp(use);
    for (const FormatInfo& f : Formats()) {
      if (!f.UsableBy(use)) continue;
      EXPECT_THAT(bad.message(), HasSubstr(f.name));
      EXPECT_THAT(help, HasSubstr(std::string(f.name) + " (" + f.help + ")"));
    }
  }
}

TEST(FormatsTest, RenderUsesTheRowsRenderers) {
  RunReport r;
  r.run.id = 3;
  r.run.name = "nightly";
  r.run.status = "finished";
  EXPECT_EQ(Render(r, Format::kHtml), RenderHtml(r));
  EXPECT_EQ(Render(r, Format::kMarkdown), RenderMarkdown(r));
  EXPECT_EQ(Render(r, Format::kJson), RenderJson(r));
  EXPECT_EQ(Render(r, Format::kCsv), RenderCsv(r));
  gate::GateResult g;
  g.candidate_run = 3;
  g.passed = true;
  EXPECT_EQ(Render(g, Format::kText), gate::RenderGateText(g));
  EXPECT_EQ(Render(g, Format::kMarkdown), gate::RenderGateMarkdown(g));
  EXPECT_EQ(Render(g, Format::kJunit), gate::RenderGateJunit(g));
  EXPECT_EQ(Render(g, Format::kJson), gate::RenderGateJson(g));
}

TEST(FormatsDeathTest, RenderingWithoutTheRenderIsAProgrammerError) {
  EXPECT_DEATH(Render(RunReport{}, Format::kJunit), "format 'junit' has no run renderer");
  EXPECT_DEATH(Render(gate::GateResult{}, Format::kCsv), "format 'csv' has no gate renderer");
}

}  // namespace
}  // namespace dfarm::reports
