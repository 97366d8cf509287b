// A delegate cell is what it says: a SQLite store with a baseline and a
// candidate run of one model on cpu, on xnnpack taking the whole graph, on
// xnnpack taking none of it (min_nodes_per_partition above the graph) and on
// xnnpack taking part of it (last_delegate_node_index), the placements as the
// runner reports them. Every view that shows a cell's latency (`dfarm show`
// text and JSON, the HTML heatmap, the gate's text, Markdown and JSON, the
// dashboard's matrix) must print store::PartialDelegation's label beside it,
// and the gate must not judge the latency of the cell that took no node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "harness/cli/cli.h"
#include "harness/cli/cli_test_util.h"
#include "harness/test_util.h"
#include "reports/store/delegation.h"
#include "reports/store/store.h"
#ifdef DFARM_HAVE_GUI
#include <QApplication>
#include <QFontMetrics>
#include <QHeaderView>
#include <QTableView>
#include <QTest>
#include <cstdlib>

#include "gui/views/matrix_view.h"
#endif

namespace dfarm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The runtime's wording (runtime/partitioner.cc, runtime/delegate.cc).
constexpr const char* kTooSmall =
    "xnnpack: its partition has 6 nodes, fewer than min_nodes_per_partition 100000";
constexpr const char* kOutside =
    "xnnpack: outside first_delegate_node_index..last_delegate_node_index 0..2";
// What the views print of them (store::PartialDelegation::Label()).
constexpr const char* kNone =
    "xnnpack: 0 of 6 nodes (its partition has 6 nodes, fewer than min_nodes_per_partition...)";
constexpr const char* kSome =
    "xnnpack: 3 of 6 nodes (outside first_delegate_node_index..last_delegate_node_index 0..2)";

struct CellSpec {
  const char* options;
  int delegated;  // of the 6 nodes that run; 2 more are folded at load
  const char* reason;
};

// 8 nodes: 0 and 1 folded at load, 2..7 run; the first `delegated` of those
// on `delegate`, the others on cpu with `reason`.
store::JobPlacement Placement(const std::string& delegate, int delegated,
                              const std::string& reason) {
  store::JobPlacement p;
  p.partitions = delegated > 0 ? 1 : 0;
  for (int i = 0; i < 8; ++i) {
    store::PlacementNode n;
    n.index = i;
    n.op = i < 2 ? "DEQUANTIZE" : "CONV_2D";
    n.delegate = "cpu";
    if (i < 2) {
      n.folded = true;
    } else if (i - 2 < delegated) {
      n.delegate = delegate;
      n.partition = 0;
    } else {
      n.reason = reason;
    }
    p.nodes.push_back(n);
  }
  return p;
}

class PartialDelegationTest : public ::testing::Test {
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
    const std::vector<std::pair<std::string, CellSpec>> cells = {
        {"cpu", {"", 0, ""}},
        {"xnnpack", {"", 6, ""}},
        {"xnnpack", {"min_nodes_per_partition:100000", 0, kTooSmall}},
        {"xnnpack", {"last_delegate_node_index:2", 3, kOutside}}};
    for (const auto& [delegate, spec] : cells) {
      for (int trial = 0; trial < 3; ++trial) {
        store::JobRow job;
        job.model = "face.tflite";
        job.model_path = "/models/face.tflite";
        job.model_sha256 = "3bc182eb" + std::string(56, 'a');
        job.delegate = delegate;
        job.delegate_options = spec.options;
        job.device = "local";
        job.num_threads = 1;
        job.trial = trial;
        job.job_key = delegate + "/" + spec.options + "/" + std::to_string(trial);
        auto id = s.AddJob(*run, job);
        ASSERT_TRUE(id.ok()) << id.message();
        store::JobOutcome ok;
        ok.status = store::kJobOk;
        ok.exit_code = 0;
        ok.metrics = store::JobMetrics{};
        const double base = delegate == "cpu" || spec.delegated == 0 ? 4000 : 1000;
        ok.metrics->p50_us = base + trial;
        ok.metrics->mean_us = base + trial;
        for (int k = 0; k < 20; ++k) ok.samples_us.push_back(base + trial + k % 5);
        ok.placement = Placement(delegate, spec.delegated, spec.reason);
        ASSERT_TRUE(s.RecordJobResult(*id, ok).ok());
      }
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

// The wording the views print is the one function's.
TEST_F(PartialDelegationTest, TheLabelsAreDelegationsOwn) {
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->ListJobs(runs_[1]);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 12u);
  EXPECT_FALSE(store::PartialDelegationOf((*jobs)[0]).has_value());  // cpu
  EXPECT_FALSE(store::PartialDelegationOf((*jobs)[3]).has_value());  // the whole graph
  EXPECT_EQ(store::PartialDelegationOf((*jobs)[6])->Label(), kNone);
  EXPECT_EQ(store::PartialDelegationOf((*jobs)[9])->Label(), kSome);
}

TEST_F(PartialDelegationTest, ShowPrintsItBesideTheLatency) {
  const std::string run = std::to_string(runs_[1]);
  auto text = Dfarm({"show", run});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("\tok\t4.00 [" + std::string(kNone) + "]\t"));
  EXPECT_THAT(text.out, HasSubstr("\tok\t1.00 [" + std::string(kSome) + "]\t"));
  EXPECT_THAT(text.out, HasSubstr("\txnnpack\tlocal\tok\t1.00\t"));  // the whole graph: no note
  auto json = Dfarm({"show", run, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json doc = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << json.out;
  const nlohmann::json& jobs = doc["jobs"];
  ASSERT_EQ(jobs.size(), 12u);
  EXPECT_TRUE(jobs[0]["partial_delegation"].is_null());
  EXPECT_TRUE(jobs[3]["partial_delegation"].is_null());
  EXPECT_EQ(jobs[6]["partial_delegation"]["label"], kNone);
  EXPECT_EQ(jobs[6]["partial_delegation"]["delegated_nodes"], 0);
  EXPECT_EQ(jobs[6]["partial_delegation"]["nodes"], 6);
  EXPECT_EQ(jobs[9]["partial_delegation"]["label"], kSome);
  EXPECT_EQ(jobs[9]["placement"]["main_reason"], kOutside);
  EXPECT_EQ(jobs[9]["placement"]["delegated_nodes"], 3);  // the keys it had keep their values
  const std::string id = std::to_string(jobs[6]["id"].get<int64_t>());
  auto drill = Dfarm({"show", run, "--job", id});
  ASSERT_EQ(drill.code, 0) << drill.err;
  EXPECT_THAT(drill.out, HasSubstr("NOTE partly delegated: " + std::string(kNone) + "\n"));
}

TEST_F(PartialDelegationTest, TheHtmlHeatmapMarksTheCellsAndFootnotesThem) {
  auto html = Dfarm({"report", std::to_string(runs_[1]), "--format", "html", "-o", "-"});
  ASSERT_EQ(html.code, 0) << html.err;
  // The cell that took nothing is no speed-up of xnnpack's.
  EXPECT_THAT(html.out, HasSubstr("<b>not delegated</b><small>4.00 ms p50</small>"));
  EXPECT_THAT(html.out, HasSubstr("&#9888; xnnpack: 0 of 6 nodes<sup>"));
  EXPECT_THAT(html.out, HasSubstr("&#9888; xnnpack: 3 of 6 nodes<sup>"));
  // The whole graph's cell and the partial one keep their speed-up figure.
  EXPECT_THAT(html.out, HasSubstr("<b>3.99&times;</b><small>1.00 ms p50</small><small>3/3"));
  EXPECT_THAT(html.out, HasSubstr("<ol class=\"partial\">"));
  EXPECT_THAT(html.out, HasSubstr("xnnpack[min_nodes_per_partition:100000] x1 @local: " +
                                  std::string(kNone) + "</li>"));
  EXPECT_THAT(html.out, HasSubstr("x1 @local: xnnpack: 3 of 6 nodes (outside"));
  // The Markdown report's cell table, beside the speed-up.
  auto md = Dfarm({"report", std::to_string(runs_[1]), "--format", "md", "-o", "-"});
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_THAT(md.out, HasSubstr("| not delegated ⚠ xnnpack: 0 of 6 nodes (its partition has 6 "
                                "nodes, fewer than min\\_nodes\\_per\\_partition...) |"));
  EXPECT_THAT(md.out, HasSubstr("× ⚠ xnnpack: 3 of 6 nodes (outside"));
}

TEST_F(PartialDelegationTest, TheGateNotesThemAndJudgesNoLatencyOfACellThatTookNothing) {
  const std::string candidate = std::to_string(runs_[1]);
  const std::string baseline = std::to_string(runs_[0]);
  auto json = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "json", "-o", "-"});
  const nlohmann::json doc = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << json.out << json.err;
  ASSERT_EQ(doc["cells"].size(), 4u);
  std::map<std::string, nlohmann::json> by_options;
  for (const auto& c : doc["cells"]) {
    by_options[c["delegate"].get<std::string>() + "[" + c["delegate_options"].get<std::string>() +
               "]"] = c;
  }
  const nlohmann::json& none = by_options["xnnpack[min_nodes_per_partition:100000]"];
  EXPECT_EQ(none["delegation"], kNone);
  EXPECT_EQ(none["delegate_took_none"], true);
  EXPECT_EQ(none["latency"]["verdict"], "unknown");
  EXPECT_EQ(none["verdict"], "unknown");
  bool noted = false;
  for (const auto& f : none["findings"]) {
    if (f["metric"] != "placement.partial") continue;
    noted = true;
    EXPECT_EQ(f["fails"], false);
    EXPECT_EQ(f["value"], 0);
    EXPECT_EQ(f["threshold"], 6);
  }
  EXPECT_TRUE(noted) << none.dump();
  const nlohmann::json& some = by_options["xnnpack[last_delegate_node_index:2]"];
  EXPECT_EQ(some["delegation"], kSome);
  EXPECT_EQ(some["delegate_took_none"], false);
  // Part of the graph on xnnpack: judged like the whole graph's cell, with the note.
  EXPECT_EQ(some["latency"]["verdict"], by_options["xnnpack[]"]["latency"]["verdict"]);
  EXPECT_EQ(by_options["xnnpack[]"]["delegation"], "");
  EXPECT_EQ(by_options["cpu[]"]["delegation"], "");
  EXPECT_EQ(doc["passed"], true);

  auto text = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "text", "-o", "-"});
  EXPECT_THAT(text.out, HasSubstr("partly delegated (the latency is not the delegate's alone):\n"));
  EXPECT_THAT(text.out, HasSubstr("xnnpack[min_nodes_per_partition:100000] x1 @local: " +
                                  std::string(kNone) + " - latency not judged\n"));
  EXPECT_THAT(text.out,
              HasSubstr("xnnpack[last_delegate_node_index:2] x1 @local: " + std::string(kSome)));
  EXPECT_THAT(text.out, HasSubstr("1 cell(s) unknown because their delegate took no node"));
  EXPECT_THAT(text.out, Not(HasSubstr("rerun them with --rerun-unknown")));
  auto md = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "md", "-o", "-"});
  EXPECT_THAT(md.out, HasSubstr("### Partly delegated"));
  EXPECT_THAT(md.out, HasSubstr("- latency not judged: xnnpack: 0 of 6 nodes"));
  auto compare = Dfarm({"compare", baseline, candidate});
  ASSERT_EQ(compare.code, 0) << compare.err;
  EXPECT_THAT(compare.out, HasSubstr("partly delegated: face.tflite (3bc182eb) "
                                     "xnnpack[min_nodes_per_partition:100000] x1 @local: " +
                                     std::string(kNone) + " - latency not judged\n"));
  auto junit = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "junit", "-o", "-"});
  EXPECT_THAT(junit.out, HasSubstr("placement.partial: xnnpack: 0 of 6 nodes"));
}

#ifdef DFARM_HAVE_GUI
TEST_F(PartialDelegationTest, TheDashboardsMatrixShowsItUnclipped) {
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok());
  auto matrix = gui::ReadMatrix(**store, runs_[1]);
  ASSERT_TRUE(matrix.ok()) << matrix.message();
  gui::MatrixModel model;
  model.setMatrix(*matrix);
  ASSERT_EQ(model.rowCount(), 4);
  int none_row = -1, some_row = -1, whole_row = -1;
  for (int r = 0; r < model.rowCount(); ++r) {
    const std::string config =
        model.index(r, gui::MatrixModel::ConfigColumn).data().toString().toStdString();
    if (config.find("min_nodes") != std::string::npos) none_row = r;
    if (config.find("last_delegate") != std::string::npos) some_row = r;
    if (config == "xnnpack x1") whole_row = r;
  }
  ASSERT_GE(none_row, 0);
  ASSERT_GE(some_row, 0);
  ASSERT_GE(whole_row, 0);
  const int col = gui::MatrixModel::FirstDeviceColumn;
  const QModelIndex none = model.index(none_row, col), some = model.index(some_row, col);
  EXPECT_EQ(none.data().toString(), "not delegated");
  EXPECT_EQ(none.data(gui::MatrixModel::PartialRole).toString().toStdString(),
            "⚠ xnnpack: 0 of 6 nodes");
  EXPECT_EQ(some.data(gui::MatrixModel::PartialRole).toString().toStdString(),
            "⚠ xnnpack: 3 of 6 nodes");
  EXPECT_TRUE(model.index(whole_row, col).data(gui::MatrixModel::PartialRole).toString().isEmpty());
  EXPECT_THAT(none.data(Qt::ToolTipRole).toString().toStdString(), HasSubstr(kNone));
  EXPECT_THAT(some.data(Qt::ToolTipRole).toString().toStdString(), HasSubstr(kSome));

  // Painted as the dashboard lays it out: the third line fits its column and row.
  QTableView view;
  view.setModel(&model);
  view.setItemDelegate(new gui::MatrixDelegate(&view));
  view.resize(900, 400);
  view.show();
  view.resizeColumnsToContents();
  view.resizeRowsToContents();
  QFont small = view.font();
  small.setPointSizeF(view.font().pointSizeF() * 0.85);
  small.setBold(true);
  const QString partial = none.data(gui::MatrixModel::PartialRole).toString();
  EXPECT_GT(view.columnWidth(col), QFontMetrics(small).horizontalAdvance(partial));
  EXPECT_GE(view.rowHeight(none_row), 3 * QFontMetrics(view.font()).height());
  if (const char* dir = std::getenv("DFARM_PARTIAL_SHOT_DIR")) {
    QTest::qWait(50);
    EXPECT_TRUE(view.grab().save(QString(dir) + "/partial_matrix.png"));
  }
}
#endif

}  // namespace
}  // namespace dfarm

int main(int argc, char** argv) {
#ifdef DFARM_HAVE_GUI
  setenv("QT_QPA_PLATFORM", "offscreen", /*overwrite=*/0);
  QApplication app(argc, argv);
#endif
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
