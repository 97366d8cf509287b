// The page table (gui/views/pages.inc): names, what `--view` accepts and
// lists, the subjects navigation needs, and a view made from every row.
#include "gui/views/pages.h"

#include <gtest/gtest.h>

#include <QSet>
#include <QStringList>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gui/views/location.h"
#include "gui/views/view.h"

namespace dfarm::gui {
namespace {

std::vector<Page> AllPages() {
  std::vector<Page> pages;
  for (int i = 0; i < kPageCount; ++i) pages.push_back(static_cast<Page>(i));
  return pages;
}

TEST(PagesTest, EveryNameParsesBackToItsPageAndIsListed) {
  QSet<QString> names;
  QStringList listed;
  for (Page page : AllPages()) {
    const QString name = pageName(page);
    EXPECT_FALSE(name.isEmpty());
    EXPECT_EQ(name, name.toLower()) << qPrintable(name);
    EXPECT_FALSE(names.contains(name)) << "two pages named " << qPrintable(name);
    names.insert(name);
    listed << name;
    Page parsed = kFirstPage;
    ASSERT_TRUE(parsePage(name, &parsed)) << qPrintable(name);
    EXPECT_EQ(parsed, page) << qPrintable(name);
    EXPECT_EQ(pageInfo(page).page, page) << qPrintable(name);
  }
  EXPECT_EQ(pageChoices(), listed.join('|'));
  EXPECT_TRUE(pageChoices().startsWith("runs|matrix|trend|compare|job|devices"));
}

TEST(PagesTest, AnUnknownNameIsRefused) {
  Page page = Page::Job;
  EXPECT_FALSE(parsePage("graphs", &page));
  EXPECT_FALSE(parsePage("", &page));
  EXPECT_FALSE(parsePage("Runs", &page));
  EXPECT_EQ(page, Page::Job);
}

TEST(PagesTest, TheFirstPageNeedsNoIdAndEverySubjectHasAPage) {
  EXPECT_EQ(pageInfo(kFirstPage).subject, Subject::Database);
  EXPECT_TRUE(Location().valid());
  // The views' signals (openRun, compareRuns, openJob, openCell) go there.
  for (Subject subject : {Subject::Run, Subject::RunPair, Subject::Job, Subject::Cell}) {
    const PageInfo* info = pageShowing(subject);
    ASSERT_NE(info, nullptr) << static_cast<int>(subject);
    EXPECT_EQ(info->subject, subject);
  }
  EXPECT_EQ(pageShowing(Subject::Run)->page, Page::Matrix);
  EXPECT_EQ(pageShowing(Subject::RunPair)->page, Page::Compare);
  EXPECT_EQ(pageShowing(Subject::Job)->page, Page::Job);
  EXPECT_EQ(pageShowing(Subject::Cell)->page, Page::Trend);
}

TEST(PagesTest, ALocationIsValidOnceItNamesItsPagesSubject) {
  Location where;
  where.page = Page::Compare;
  EXPECT_FALSE(where.valid());
  where.runId = 2;
  EXPECT_FALSE(where.valid());
  where.baselineId = 1;
  EXPECT_TRUE(where.valid());
  where.page = Page::Trend;
  EXPECT_FALSE(where.valid());
  where.cell.model = "face.tflite";
  EXPECT_TRUE(where.valid());
  where.page = Page::Devices;
  EXPECT_TRUE(where.valid());
  EXPECT_TRUE(Location().names(Subject::Database));
  EXPECT_FALSE(Location().names(Subject::Job));
}

TEST(PagesTest, EveryRowMakesAViewOwnedByItsParent) {
  QWidget parent;
  for (Page page : AllPages()) {
    View* view = pageInfo(page).make(&parent);
    ASSERT_NE(view, nullptr) << qPrintable(pageName(page));
    EXPECT_EQ(view->parent(), &parent) << qPrintable(pageName(page));
    EXPECT_FALSE(view->isReady()) << qPrintable(pageName(page));
  }
}

// docs/CONTRACTS.md's `--view` list is the table's, in tab order.
TEST(PagesTest, TheContractsViewListIsTheTables) {
  std::ifstream in(std::string(DFARM_SOURCE_DIR) + "/docs/CONTRACTS.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string want = "[--view " + pageChoices().toStdString() + "]";
  EXPECT_NE(doc.find(want), std::string::npos) << "docs/CONTRACTS.md lacks " << want;
}

TEST(PagesTest, HelpTextsComeFromTheTable) {
  const QString shown = pagesShown();
  EXPECT_TRUE(shown.startsWith("runs, a run's matrix, a cell's trend, two runs compared, a job"))
      << qPrintable(shown);
  EXPECT_TRUE(shown.endsWith(
      QStringLiteral(" and %1").arg(pageInfo(static_cast<Page>(kPageCount - 1)).shows)))
      << qPrintable(shown);
  const QString defaults = pageDefaults();
  EXPECT_TRUE(defaults.startsWith("matrix opens the newest run, trend ")) << qPrintable(defaults);
  QStringList opened, needId;
  for (const QString& entry : defaults.split(", ")) opened << entry.section(' ', 0, 0);
  for (Page page : AllPages()) {
    if (pageInfo(page).subject != Subject::Database) needId << pageName(page);
  }
  EXPECT_EQ(opened, needId) << qPrintable(defaults);
}

}  // namespace
}  // namespace dfarm::gui
