#include "harness/analysis/cell_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/analysis/cell_history_test.h"

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    planted_ = FillHistory(dir_);
    auto store = store::OpenSqliteStore(planted_.db);
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
  }

  CellQuery CellA() const {
    CellQuery q;
    q.model = "a.tflite";
    q.delegate = "xnnpack";
    q.delegate_options = "fp16:false";
    return q;
  }

  TempDir dir_;
  PlantedHistory planted_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(HistoryTest, FindsThePlantedLatencyStepAtItsRun) {
  auto h = LoadCellHistory(*store_, CellA(), HistoryMetric::kP50);
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->cell.model, "a.tflite");
  EXPECT_EQ(h->cell.model_sha256, planted_.sha_a);
  EXPECT_EQ(h->cell.delegate_options, "fp16:false");
  ASSERT_EQ(h->points.size(), PlantedHistory::kRuns);
  for (size_t i = 0; i < h->points.size(); ++i) {
    EXPECT_EQ(h->points[i].run_id, planted_.runs[i]);
    // Trial 1 crashed in every third run: 2 ok trials there, else 3.
    EXPECT_EQ(h->points[i].trials, i % 3 == 0 ? 2 : 3) << i;
  }
  ASSERT_EQ(h->changes.size(), 1u);
  const HistoryChange& c = h->changes[0];
  EXPECT_EQ(c.index, PlantedHistory::kLatencyStepAt);
  EXPECT_EQ(c.run_id, planted_.runs[PlantedHistory::kLatencyStepAt]);
  EXPECT_TRUE(c.regression);
  EXPECT_NEAR(c.before, 1000, 15);
  EXPECT_NEAR(c.after, 1100, 15);
  EXPECT_NEAR(c.change_pct, 10, 2);
}

TEST_F(HistoryTest, FlatCellsHaveNoChangeAndMemoryStepsAreImprovements) {
  CellQuery b = CellA();
  b.delegate_options = "fp16:true";
  auto flat = LoadCellHistory(*store_, b, HistoryMetric::kP50);
  ASSERT_TRUE(flat.ok()) << flat.error().message;
  EXPECT_TRUE(flat->changes.empty());

  CellQuery c;
  c.model = planted_.sha_b.substr(0, 12);  // a sha256 prefix
  c.delegate = "cpu";
  auto rss = LoadCellHistory(*store_, c, HistoryMetric::kPeakRss);
  ASSERT_TRUE(rss.ok()) << rss.error().message;
  ASSERT_EQ(rss->changes.size(), 1u);
  EXPECT_EQ(rss->changes[0].index, PlantedHistory::kRssStepAt);
  EXPECT_FALSE(rss->changes[0].regression);
  EXPECT_NEAR(rss->changes[0].change_pct, -20, 0.1);
}

TEST_F(HistoryTest, ModelByPathMatchesItsSha256) {
  CellQuery q = CellA();
  q.model = planted_.model_a_path;
  auto h = LoadCellHistory(*store_, q, HistoryMetric::kMaxAbsError);
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_EQ(h->points.size(), PlantedHistory::kRuns);
  EXPECT_DOUBLE_EQ(h->points[0].value, 1e-6);
  EXPECT_TRUE(h->changes.empty());
}

TEST_F(HistoryTest, AmbiguousAndMissingCellsNameWhatThereIs) {
  CellQuery q = CellA();
  q.delegate_options.reset();
  auto ambiguous = LoadCellHistory(*store_, q, HistoryMetric::kP50);
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(ambiguous.error().message, HasSubstr("2 cells match --model a.tflite"));
  EXPECT_THAT(ambiguous.error().message, HasSubstr("xnnpack[fp16:false] x1 @local (30 runs)"));
  EXPECT_THAT(ambiguous.error().message, HasSubstr("xnnpack[fp16:true] x1 @local (30 runs)"));

  q = CellA();
  q.device = "pixel7";
  auto no_cell = LoadCellHistory(*store_, q, HistoryMetric::kP50);
  ASSERT_FALSE(no_cell.ok());
  EXPECT_THAT(no_cell.error().message, HasSubstr("no cell matches"));
  EXPECT_THAT(no_cell.error().message, HasSubstr("--device pixel7"));
  EXPECT_THAT(no_cell.error().message, HasSubstr("a.tflite (" + planted_.sha_a.substr(0, 8)));

  q.model = "nope.tflite";
  auto no_model = LoadCellHistory(*store_, q, HistoryMetric::kP50);
  ASSERT_FALSE(no_model.ok());
  EXPECT_THAT(no_model.error().message, HasSubstr("no job in the database has the model"));
  EXPECT_THAT(no_model.error().message, HasSubstr("b.tflite (bbbbbbbbbbbb)"));

  q = CellA();
  q.delegate_options = "fp16";
  auto bad = LoadCellHistory(*store_, q, HistoryMetric::kP50);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("--options"));
  EXPECT_FALSE(ParseHistoryMetric("p99").ok());
  EXPECT_EQ(*ParseHistoryMetric("peak_rss"), HistoryMetric::kPeakRss);
}

TEST_F(HistoryTest, StepChangesAcrossCellsNewestFirst) {
  auto p50 = FindStepChanges(*store_, "", HistoryMetric::kP50);
  ASSERT_TRUE(p50.ok()) << p50.error().message;
  ASSERT_EQ(p50->size(), 1u);
  EXPECT_EQ((*p50)[0].cell.delegate_options, "fp16:false");

  auto rss = FindStepChanges(*store_, "", HistoryMetric::kPeakRss);
  ASSERT_TRUE(rss.ok());
  ASSERT_EQ(rss->size(), 1u);
  EXPECT_EQ((*rss)[0].cell.model, "b.tflite");

  // Two cells, two changes: the newer run first.
  std::vector<CellHistory> both = *p50;
  both.push_back((*rss)[0]);
  const std::vector<CellChange> flat = FlattenChanges(both);
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0].change->run_id, planted_.runs[PlantedHistory::kLatencyStepAt]);
  EXPECT_EQ(flat[1].change->run_id, planted_.runs[PlantedHistory::kRssStepAt]);

  auto none = FindStepChanges(*store_, "2999-01-01", HistoryMetric::kP50);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto all = FindStepChanges(*store_, "2000-01-01", HistoryMetric::kP50);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
}

}  // namespace
}  // namespace dfarm::harness
