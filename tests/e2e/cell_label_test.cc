// One cell, one label: a SQLite store with two runs of the same cell (delegate
// options, threads, a runner of the spec), read by every view that names the
// cell (the Markdown and HTML reports, the gate's text, Markdown and JSON,
// `dfarm compare`, `dfarm history`, and the dashboard's matrix tooltip), each
// of which must print the label store::Cell::Label() makes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/analysis/cell_history.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_test_util.h"
#include "harness/test_util.h"
#include "reports/store/cell.h"
#include "reports/store/store.h"
#ifdef DFARM_HAVE_GUI
#include "gui/views/matrix_view.h"
#endif

namespace dfarm {
namespace {

using ::testing::HasSubstr;

constexpr const char* kLabel = "face.tflite (3bc182eb) xnnpack[fp16:true] x2 @local (runner main)";

// What the Markdown renderers make of the label: [ and ] escaped.
std::string MarkdownOf(const std::string& label) {
  std::string out;
  for (char c : label) {
    if (c == '[' || c == ']') out += '\\';
    out += c;
  }
  return out;
}

class CellLabelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = (dir_.path() / "farm.db").string();
    auto store = store::OpenSqliteStore(db_);
    ASSERT_TRUE(store.ok()) << store.message();
    for (int r = 0; r < 2; ++r) AddRun(**store, r);
  }

  void AddRun(store::Store& s, int r) {
    auto run = s.CreateRun("run" + std::to_string(r), "{}");
    ASSERT_TRUE(run.ok()) << run.message();
    runs_.push_back(*run);
    for (int trial = 0; trial < 3; ++trial) {
      store::JobRow job;
      job.model = "face.tflite";
      job.model_path = "/models/face.tflite";
      job.model_sha256 = "3bc182eb" + std::string(56, 'a');
      job.delegate = "xnnpack";
      job.delegate_options = "fp16:true";
      job.device = "local";
      job.num_threads = 2;
      job.runner = "main";
      job.trial = trial;
      job.job_key = "face/xnnpack/" + std::to_string(trial);
      auto id = s.AddJob(*run, job);
      ASSERT_TRUE(id.ok()) << id.message();
      store::JobOutcome ok;
      ok.status = store::kJobOk;
      ok.exit_code = 0;
      ok.metrics = store::JobMetrics{};
      ok.metrics->p50_us = 1000 + trial;
      ok.metrics->mean_us = 1000 + trial;
      for (int k = 0; k < 20; ++k) ok.samples_us.push_back(1000 + trial + k % 5);
      ASSERT_TRUE(s.RecordJobResult(*id, ok).ok());
    }
    ASSERT_TRUE(s.FinishRun(*run, store::kRunFinished).ok());
  }

  cli::test_util::Outcome Dfarm(std::vector<std::string> args) {
    args.push_back("--db");
    args.push_back(db_);
    return cli::test_util::Call(std::move(args));
  }

  harness::TempDir dir_;
  std::string db_;
  std::vector<int64_t> runs_;
};

TEST_F(CellLabelTest, TheStoreListsTheCellUnderTheLabel) {
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok());
  auto cells = (*store)->ListCells({});
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 1u);
  EXPECT_EQ(cells->front().Label(), kLabel);
}

TEST_F(CellLabelTest, ReportsPrintTheLabel) {
  const std::string run = std::to_string(runs_[1]);
  auto md = Dfarm({"report", run, "--format", "md", "-o", "-"});
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_THAT(md.out, HasSubstr("| " + MarkdownOf(kLabel) + " |"));
  auto html = Dfarm({"report", run, "--format", "html", "-o", "-"});
  ASSERT_EQ(html.code, 0) << html.err;
  EXPECT_THAT(html.out, HasSubstr(kLabel));
}

TEST_F(CellLabelTest, TheGatePrintsTheLabel) {
  const std::string candidate = std::to_string(runs_[1]);
  const std::string baseline = std::to_string(runs_[0]);
  auto text = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "text", "-o", "-"});
  EXPECT_THAT(text.out, HasSubstr(kLabel)) << text.err;
  auto md = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "md", "-o", "-"});
  EXPECT_THAT(md.out, HasSubstr("| " + MarkdownOf(kLabel) + " |")) << md.err;
  auto json = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "json", "-o", "-"});
  const nlohmann::json doc = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << json.out << json.err;
  ASSERT_EQ(doc["cells"].size(), 1u);
  EXPECT_EQ(doc["cells"][0]["label"], kLabel);
  auto compare = Dfarm({"compare", baseline, candidate});
  ASSERT_EQ(compare.code, 0) << compare.err;
  EXPECT_THAT(compare.out, HasSubstr(kLabel));
}

TEST_F(CellLabelTest, HistoryPrintsTheLabel) {
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok());
  harness::CellQuery q;
  q.model = "face.tflite";
  q.delegate = "xnnpack";
  auto history = harness::LoadCellHistory(**store, q, harness::HistoryMetric::kP50);
  ASSERT_TRUE(history.ok()) << history.message();
  EXPECT_EQ(history->cell.Label(), kLabel);
  EXPECT_EQ(history->points.size(), 2u);
  auto cli = Dfarm({"history", "--model", "face.tflite", "--delegate", "xnnpack"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_THAT(cli.out, HasSubstr(std::string("cell: ") + kLabel + "\n"));
}

#ifdef DFARM_HAVE_GUI
TEST_F(CellLabelTest, TheDashboardsMatrixTooltipStartsWithTheLabel) {
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok());
  auto matrix = gui::ReadMatrix(**store, runs_[1]);
  ASSERT_TRUE(matrix.ok()) << matrix.message();
  gui::MatrixModel model;
  model.setMatrix(*matrix);
  ASSERT_EQ(model.rowCount(), 1);
  const QString tip =
      model.index(0, gui::MatrixModel::FirstDeviceColumn).data(Qt::ToolTipRole).toString();
  EXPECT_EQ(tip.split('\n').front().toStdString(), kLabel) << tip.toStdString();
  EXPECT_EQ(model.matrix().cells[0][0].cell.Label(), kLabel);  // what the trend view's title shows
}
#endif

}  // namespace
}  // namespace dfarm
