// reports/history.h over a real SQLite store: one point per run (the median of
// its ok trials with a value), the trial values and run tags with it, the
// change points with run ids, and the metric names.
#include "reports/history.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace dfarm::reports {
namespace {

namespace fs = std::filesystem;

class HistorySeriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dfarm_history_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto store = store::OpenSqliteStore((dir_ / "h.db").string());
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  // A run with the cell's trials: p50 of each, -1 for a crashed trial.
  void AddRun(const std::vector<double>& p50s, int64_t peak_rss = 0, double top1 = -1,
              const std::string& task = "classification", const std::string& metric = "top1") {
    auto run = store_->CreateRun("r", "{}");
    ASSERT_TRUE(run.ok());
    runs_.push_back(*run);
    for (size_t t = 0; t < p50s.size(); ++t) {
      store::JobRow j;
      j.model = "m.tflite";
      j.model_sha256 = std::string(64, 'c');
      j.delegate = "cpu";
      j.device = "local";
      j.num_threads = 2;
      j.trial = static_cast<int64_t>(t);
      auto id = store_->AddJob(*run, j);
      ASSERT_TRUE(id.ok());
      store::JobOutcome o;
      o.status = p50s[t] < 0 ? "crashed" : "ok";
      if (p50s[t] >= 0) {
        o.metrics = store::JobMetrics{};
        o.metrics->p50_us = p50s[t];
        o.metrics->peak_rss_bytes = peak_rss;
        if (top1 >= 0) {
          o.task = store::TaskAccuracy{task, "set@1", 100, {{metric, top1, 0, 1}}, "{}"};
        }
      }
      ASSERT_TRUE(store_->RecordJobResult(*id, o).ok());
    }
  }

  store::Cell Cell() const { return {std::string(64, 'c'), "cpu", "", 2, "", "local", "m.tflite"}; }

  fs::path dir_;
  std::unique_ptr<store::Store> store_;
  std::vector<int64_t> runs_;
};

TEST_F(HistorySeriesTest, OnePointPerRunWithTrialsTagsAndTheStep) {
  for (int r = 0; r < 12; ++r) {
    const double base = r < 6 ? 1000 : 1200;
    AddRun({base + r % 3, -1, base - r % 2, base});
  }
  AddRun({-1, -1});  // no ok trial: no point
  ASSERT_TRUE(store_->TagRun(runs_[2], "baseline", false).ok());
  auto runs = LoadRunsById(*store_);
  ASSERT_TRUE(runs.ok());
  auto s = LoadCellSeries(*store_, Cell(), *runs, HistoryMetric::kP50);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->model, "m.tflite");
  EXPECT_EQ(s->jobs, 12 * 4 + 2);
  ASSERT_EQ(s->points.size(), 12u);
  EXPECT_EQ(s->points[1].run_id, runs_[1]);
  EXPECT_EQ(s->points[1].trials, 3);
  EXPECT_EQ(s->points[1].trial_values, (std::vector<double>{1001, 999, 1000}));
  EXPECT_EQ(s->points[1].value, 1000);
  EXPECT_EQ(s->points[2].tags, std::vector<std::string>{"baseline"});
  EXPECT_FALSE(s->points[2].created_at.empty());
  ASSERT_EQ(s->changes.size(), 1u);
  EXPECT_EQ(s->changes[0].index, 6u);
  EXPECT_EQ(s->changes[0].run_id, runs_[6]);
  EXPECT_TRUE(s->changes[0].regression);
  EXPECT_NEAR(s->changes[0].change_pct, 20, 0.5);

  // peak_rss: 0 bytes is "not measured", so no point at all.
  auto rss = LoadCellSeries(*store_, Cell(), *runs, HistoryMetric::kPeakRss);
  ASSERT_TRUE(rss.ok());
  EXPECT_TRUE(rss->points.empty());
  EXPECT_EQ(rss->jobs, 12 * 4 + 2);
  auto none = LoadCellSeries(*store_, {std::string(64, 'd'), "cpu", "", 2, "", "local", ""}, *runs,
                             HistoryMetric::kP50);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->jobs, 0);
}

// top1 in percent; a drop is the regression, a rise the improvement.
TEST_F(HistorySeriesTest, TopOneDropIsARegression) {
  for (int r = 0; r < 12; ++r) AddRun({1000, 1000}, 0, r < 6 ? 0.95 + 0.001 * (r % 2) : 0.80);
  auto runs = LoadRunsById(*store_);
  ASSERT_TRUE(runs.ok());
  auto s = LoadCellSeries(*store_, Cell(), *runs, HistoryMetric::kTop1);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(s->points.size(), 12u);
  EXPECT_DOUBLE_EQ(s->points[0].value, 95);
  ASSERT_EQ(s->changes.size(), 1u);
  EXPECT_TRUE(s->changes[0].regression);
  EXPECT_LT(s->changes[0].change_pct, -10);
  EXPECT_TRUE(HigherIsBetter(HistoryMetric::kTop5));
  EXPECT_FALSE(HigherIsBetter(HistoryMetric::kP50));
}

// map and miou like top1: percent, a drop is the regression; a job without
// the metric (another task) has no point.
TEST_F(HistorySeriesTest, MapAndMiouDropsAreRegressions) {
  for (int r = 0; r < 12; ++r) {
    AddRun({1000, 1000}, 0, r < 6 ? 0.45 + 0.001 * (r % 2) : 0.30, "detection", "map");
  }
  auto runs = LoadRunsById(*store_);
  ASSERT_TRUE(runs.ok());
  auto s = LoadCellSeries(*store_, Cell(), *runs, HistoryMetric::kMap);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(s->points.size(), 12u);
  EXPECT_DOUBLE_EQ(s->points[0].value, 45);
  ASSERT_EQ(s->changes.size(), 1u);
  EXPECT_TRUE(s->changes[0].regression);
  auto miou = LoadCellSeries(*store_, Cell(), *runs, HistoryMetric::kMiou);
  ASSERT_TRUE(miou.ok()) << miou.message();
  EXPECT_TRUE(miou->points.empty());
  EXPECT_TRUE(HigherIsBetter(HistoryMetric::kMiou));
  auto parsed = ParseHistoryMetric("miou");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, HistoryMetric::kMiou);
  EXPECT_NE(ParseHistoryMetric("mAP").message().find("map or miou"), std::string::npos);
}

// The overview reads trial values in one query (ListRecentCellValues); its
// series must be the one `dfarm history` builds from the cell's jobs.
TEST_F(HistorySeriesTest, SeriesOfTrialsIsTheSeriesOfTheCellsJobs) {
  for (int r = 0; r < 12; ++r) AddRun({r < 6 ? 1000.0 + r % 3 : 1300.0 - r % 2, -1, 1000});
  auto runs = LoadRunsById(*store_);
  ASSERT_TRUE(runs.ok());
  auto want = LoadCellSeries(*store_, Cell(), *runs, HistoryMetric::kP50);
  ASSERT_TRUE(want.ok()) << want.message();
  auto recent = store_->ListRecentCellValues(100);
  ASSERT_TRUE(recent.ok()) << recent.message();
  ASSERT_EQ(recent->size(), 1u);
  const CellSeries got = SeriesOfTrials(recent->front().p50_us, *runs);
  ASSERT_EQ(got.points.size(), want->points.size());
  for (size_t i = 0; i < got.points.size(); ++i) {
    EXPECT_EQ(got.points[i].run_id, want->points[i].run_id);
    EXPECT_EQ(got.points[i].value, want->points[i].value);
    EXPECT_EQ(got.points[i].trial_values, want->points[i].trial_values);
    EXPECT_EQ(got.points[i].created_at, want->points[i].created_at);
  }
  ASSERT_EQ(got.changes.size(), 1u);
  ASSERT_EQ(want->changes.size(), 1u);
  EXPECT_EQ(got.changes[0].run_id, want->changes[0].run_id);
  EXPECT_EQ(got.changes[0].change_pct, want->changes[0].change_pct);
}

TEST(HistoryMetricTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (HistoryMetric m :
       {HistoryMetric::kMean, HistoryMetric::kP50, HistoryMetric::kP90, HistoryMetric::kPeakRss,
        HistoryMetric::kMaxAbsError, HistoryMetric::kTop1, HistoryMetric::kTop5}) {
    auto parsed = ParseHistoryMetric(HistoryMetricName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  auto bad = ParseHistoryMetric("p99");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("max_abs_error"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace dfarm::reports
