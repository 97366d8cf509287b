#include "reports/eval/task_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "reports/eval/task_drop.h"
#include "reports/gate/stats.h"

namespace dfarm::eval {
namespace {

using nlohmann::json;

// --- classification ---------------------------------------------------------

TEST(LabelRankTest, CountsHigherScoresAndEarlierTies) {
  const std::vector<float> scores = {0.1f, 0.5f, 0.2f, 0.5f, 0.7f};
  EXPECT_EQ(LabelRank(scores.data(), scores.size(), 4), 0u);
  EXPECT_EQ(LabelRank(scores.data(), scores.size(), 1), 1u);  // the tie at 3 comes after
  EXPECT_EQ(LabelRank(scores.data(), scores.size(), 3), 2u);  // the tie at 1 comes first
  EXPECT_EQ(LabelRank(scores.data(), scores.size(), 0), 4u);
  EXPECT_EQ(LabelRank(scores.data(), scores.size(), 9), 5u);  // no such class: last
}

TEST(RanksJsonTest, RoundTripsAndRejectsOtherText) {
  EXPECT_EQ(RanksJson({0, 3, 5}), R"({"ranks":[0,3,5]})");
  EXPECT_EQ(RanksFromJson(RanksJson({0, 3, 5})), (std::vector<size_t>{0, 3, 5}));
  EXPECT_TRUE(RanksFromJson("").empty());
  EXPECT_TRUE(RanksFromJson(R"({"ranks":[1,-2]})").empty());
  EXPECT_TRUE(RanksFromJson(R"({"other":[1]})").empty());
}

TEST(TopKAccuracyTest, FractionOfImagesBelowK) {
  const std::vector<size_t> ranks = {0, 3, 0, 7};
  EXPECT_DOUBLE_EQ(TopKAccuracy(ranks, 1, AllImages(4)), 0.5);
  EXPECT_DOUBLE_EQ(TopKAccuracy(ranks, 5, AllImages(4)), 0.75);
  EXPECT_DOUBLE_EQ(TopKAccuracy(ranks, 1, {0, 0, 1}), 2.0 / 3);  // a multiset of images
  EXPECT_TRUE(std::isnan(TopKAccuracy(ranks, 1, {})));
}

// --- detection, cases worked by hand ----------------------------------------

DetectionMetrics Coco(size_t images, const std::vector<TruthBox>& truth,
                      const std::vector<DetectedBox>& dets, size_t max_det = 100) {
  return CocoEvaluator(images, truth, dets, max_det).Evaluate(AllImages(images));
}

TEST(CocoEvaluatorTest, PerfectDetectionsScoreOne) {
  const std::vector<TruthBox> truth = {
      {0, 1, {0, 0, 10, 10}}, {1, 1, {5, 5, 20, 30}}, {1, 2, {0, 0, 4, 4}}};
  const std::vector<DetectedBox> dets = {
      {0, 1, {0, 0, 10, 10}, 0.3}, {1, 1, {5, 5, 20, 30}, 0.9}, {1, 2, {0, 0, 4, 4}, 0.5}};
  const DetectionMetrics m = Coco(2, truth, dets);
  EXPECT_DOUBLE_EQ(m.map, 1);
  EXPECT_DOUBLE_EQ(m.map50, 1);
  EXPECT_DOUBLE_EQ(m.map75, 1);
  EXPECT_DOUBLE_EQ(m.recall, 1);
  EXPECT_EQ(m.categories, 2u);
}

TEST(CocoEvaluatorTest, ShiftedBoxMatchesOnlyTheLowThresholds) {
  // IoU 80/120 = 0.667: a match at .50, .55, .60 and .65, none above.
  const DetectionMetrics m = Coco(1, {{0, 1, {0, 0, 10, 10}}}, {{0, 1, {2, 0, 12, 10}, 0.8}});
  EXPECT_DOUBLE_EQ(m.map, 0.4);
  EXPECT_DOUBLE_EQ(m.map50, 1);
  EXPECT_DOUBLE_EQ(m.map75, 0);
  EXPECT_DOUBLE_EQ(m.recall, 0.4);
}

TEST(CocoEvaluatorTest, BoxOnTheThresholdMatchesIt) {
  // IoU exactly 0.5 (50/100): COCO matches at IoU >= threshold.
  const DetectionMetrics m = Coco(1, {{0, 1, {0, 0, 10, 10}}}, {{0, 1, {0, 0, 10, 5}, 0.8}});
  EXPECT_DOUBLE_EQ(m.map50, 1);
  EXPECT_DOUBLE_EQ(m.map, 0.1);
}

TEST(CocoEvaluatorTest, MissedBoxHalvesRecall) {
  // Two truths, one found: precision 1 up to recall .5, so 51 of 101 points.
  const DetectionMetrics m =
      Coco(1, {{0, 1, {0, 0, 10, 10}}, {0, 1, {20, 20, 30, 30}}}, {{0, 1, {0, 0, 10, 10}, 0.9}});
  EXPECT_DOUBLE_EQ(m.map, 51.0 / 101);
  EXPECT_DOUBLE_EQ(m.recall, 0.5);
}

TEST(CocoEvaluatorTest, DuplicateBelowTheMatchCostsNothing) {
  // The second box on the same truth is a false positive after recall 1.
  const DetectionMetrics m =
      Coco(1, {{0, 1, {0, 0, 10, 10}}}, {{0, 1, {0, 0, 10, 10}, 0.9}, {0, 1, {0, 0, 10, 10}, 0.8}});
  EXPECT_DOUBLE_EQ(m.map, 1);
}

TEST(CocoEvaluatorTest, FalsePositiveAboveTheMatchHalvesPrecision) {
  const DetectionMetrics m = Coco(1, {{0, 1, {0, 0, 10, 10}}},
                                  {{0, 1, {50, 50, 60, 60}, 0.9}, {0, 1, {0, 0, 10, 10}, 0.8}});
  EXPECT_DOUBLE_EQ(m.map, 0.5);
  EXPECT_DOUBLE_EQ(m.recall, 1);
}

TEST(CocoEvaluatorTest, EachTruthMatchesOnceTheBestFreeBox) {
  // Two overlapping truths; the high-score box takes the one it overlaps
  // most, the second box the other one.
  const std::vector<TruthBox> truth = {{0, 1, {0, 0, 10, 10}}, {0, 1, {2, 0, 12, 10}}};
  const std::vector<DetectedBox> dets = {{0, 1, {2, 0, 12, 10}, 0.9}, {0, 1, {0, 0, 10, 10}, 0.8}};
  EXPECT_DOUBLE_EQ(Coco(1, truth, dets).map, 1);
}

TEST(CocoEvaluatorTest, CategoriesWithoutTruthAreLeftOut) {
  // Category 2 has truth and no detection (AP 0); category 3 only a
  // detection (left out, and not a false positive of category 1).
  const std::vector<TruthBox> truth = {{0, 1, {0, 0, 10, 10}}, {0, 2, {0, 0, 10, 10}}};
  const std::vector<DetectedBox> dets = {{0, 1, {0, 0, 10, 10}, 0.9}, {0, 3, {0, 0, 10, 10}, 0.95}};
  const DetectionMetrics m = Coco(1, truth, dets);
  EXPECT_EQ(m.categories, 2u);
  EXPECT_DOUBLE_EQ(m.map, 0.5);
}

TEST(CocoEvaluatorTest, KeepsTheTopDetectionsPerImageAndCategory) {
  const std::vector<TruthBox> truth = {{0, 1, {0, 0, 10, 10}}};
  const std::vector<DetectedBox> dets = {{0, 1, {50, 50, 60, 60}, 0.9},
                                         {0, 1, {0, 0, 10, 10}, 0.8}};
  EXPECT_DOUBLE_EQ(Coco(1, truth, dets, 1).map, 0);
  EXPECT_DOUBLE_EQ(Coco(1, truth, dets, 2).map, 0.5);
}

TEST(CocoEvaluatorTest, AnImageDrawnTwiceCountsTwice) {
  const std::vector<TruthBox> truth = {{0, 1, {0, 0, 10, 10}}, {1, 1, {0, 0, 10, 10}}};
  const std::vector<DetectedBox> dets = {{0, 1, {0, 0, 10, 10}, 0.9}};
  const CocoEvaluator coco(2, truth, dets);
  EXPECT_DOUBLE_EQ(coco.Evaluate({0, 1}).recall, 0.5);
  EXPECT_DOUBLE_EQ(coco.Evaluate({0, 0, 1}).recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(coco.Evaluate({1}).map, 0);
  EXPECT_TRUE(std::isnan(coco.Evaluate({}).map));
}

// --- segmentation -------------------------------------------------------------

TEST(SegmentationCountsTest, WorkedExample) {
  SegmentationCounts counts(3);
  counts.AddImage({0, 0, 1, 1}, {0, 1, 1, 1});
  const SegmentationMetrics m = counts.Evaluate(AllImages(1));
  // class 0: 1 / 2, class 1: 2 / 3, class 2 absent.
  EXPECT_DOUBLE_EQ(m.mean_iou, (0.5 + 2.0 / 3) / 2);
  EXPECT_DOUBLE_EQ(m.pixel_accuracy, 0.75);
  EXPECT_EQ(m.classes, 2u);
}

TEST(SegmentationCountsTest, IgnoredLabelIsNotCounted) {
  SegmentationCounts counts(2, 255);
  counts.AddImage({0, 255, 1}, {0, 0, 0});
  const SegmentationMetrics m = counts.Evaluate(AllImages(1));
  EXPECT_DOUBLE_EQ(m.pixel_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(m.mean_iou, (0.5 + 0.0) / 2);
}

TEST(SegmentationCountsTest, IouIsSummedOverImagesNotAveraged) {
  SegmentationCounts counts(2);
  counts.AddImage({1, 1, 1, 1}, {1, 1, 1, 1});  // class 1: 4 / 4
  counts.AddImage({1, 0}, {0, 0});              // class 1: 0 / 1, class 0: 1 / 2
  const SegmentationMetrics m = counts.Evaluate(AllImages(2));
  EXPECT_DOUBLE_EQ(m.mean_iou, (4.0 / 5 + 1.0 / 2) / 2);
  EXPECT_DOUBLE_EQ(m.pixel_accuracy, 5.0 / 6);
}

// --- against the numpy implementation ---------------------------------------

struct RandomSet {
  size_t images = 0;
  std::vector<TruthBox> truth;
  std::vector<DetectedBox> dets;
  std::vector<std::vector<int32_t>> seg_truth, seg_pred;
};

Box RandomBox(std::mt19937& rng) {
  std::uniform_real_distribution<double> pos(0, 80), size(4, 30);
  const double x = pos(rng), y = pos(rng);
  return {x, y, x + size(rng), y + size(rng)};
}

// Truth boxes, detections near them (jittered, some duplicated, some
// missing), false alarms and scores with ties; segmentation maps with noise.
RandomSet MakeRandomSet(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> count(0, 4), coin(0, 3);
  std::normal_distribution<double> jitter(0, 2.5);
  std::uniform_int_distribution<int> score_step(0, 20);
  RandomSet s;
  s.images = 12;
  for (size_t img = 0; img < s.images; ++img) {
    for (int cat = 1; cat <= 3; ++cat) {
      for (int n = count(rng); n > 0; --n) {
        const Box b = RandomBox(rng);
        s.truth.push_back({img, cat, b});
        for (int copies = coin(rng) == 0 ? 2 : coin(rng) == 0 ? 0 : 1; copies > 0; --copies) {
          Box d{b.x0 + jitter(rng), b.y0 + jitter(rng), b.x1 + jitter(rng), b.y1 + jitter(rng)};
          s.dets.push_back({img, cat, d, score_step(rng) / 20.0});
        }
      }
      for (int n = coin(rng); n > 1; --n) {
        s.dets.push_back({img, cat, RandomBox(rng), score_step(rng) / 20.0});
      }
    }
    std::vector<int32_t> truth(64), pred(64);
    for (size_t p = 0; p < truth.size(); ++p) {
      truth[p] = static_cast<int32_t>((p / 8 + img) % 4);
      pred[p] = coin(rng) == 0 ? static_cast<int32_t>(rng() % 4) : truth[p];
    }
    s.seg_truth.push_back(truth);
    s.seg_pred.push_back(pred);
  }
  return s;
}

json ReferenceMetrics(const RandomSet& s) {
  json req = {{"images", s.images}, {"truth", json::array()}, {"detections", json::array()}};
  for (const TruthBox& t : s.truth) {
    req["truth"].push_back({t.image, t.category, t.box.x0, t.box.y0, t.box.x1, t.box.y1});
  }
  for (const DetectedBox& d : s.dets) {
    req["detections"].push_back(
        {d.image, d.category, d.box.x0, d.box.y0, d.box.x1, d.box.y1, d.score});
  }
  req["segmentation"] = {{"classes", 4}, {"truth", s.seg_truth}, {"predicted", s.seg_pred}};
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string in = (dir / ("dfarm_eval_req_" + std::to_string(getpid()) + ".json")).string();
  const std::string out = in + ".out";
  std::ofstream(in) << req.dump();
  const std::string script =
      std::string(DFARM_SOURCE_DIR) + "/reports/eval/testing/task_metrics_reference.py";
  const std::string cmd = "/usr/bin/python3 " + script + " < " + in + " > " + out;
  const int rc = std::system(cmd.c_str());
  json result;
  if (rc == 0) result = json::parse(std::ifstream(out), nullptr, false);
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  return result;
}

TEST(TaskMetricsReferenceTest, MatchesNumpyOnRandomSets) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
    GTEST_FAIL() << "python3-numpy is not installed (scripts/setup.sh installs it)";
  }
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const RandomSet s = MakeRandomSet(seed);
    const json ref = ReferenceMetrics(s);
    ASSERT_TRUE(ref.is_object()) << "the numpy reference failed";
    const DetectionMetrics m =
        CocoEvaluator(s.images, s.truth, s.dets).Evaluate(AllImages(s.images));
    EXPECT_NEAR(m.map, ref["map"].get<double>(), 1e-6);
    EXPECT_NEAR(m.map50, ref["map50"].get<double>(), 1e-6);
    EXPECT_NEAR(m.map75, ref["map75"].get<double>(), 1e-6);
    EXPECT_NEAR(m.recall, ref["recall"].get<double>(), 1e-6);
    EXPECT_GT(m.map, 0.05);  // the sets are neither empty nor perfect
    EXPECT_LT(m.map, 0.95);
    SegmentationCounts seg(4);
    for (size_t i = 0; i < s.images; ++i) seg.AddImage(s.seg_truth[i], s.seg_pred[i]);
    const SegmentationMetrics sm = seg.Evaluate(AllImages(s.images));
    EXPECT_NEAR(sm.mean_iou, ref["mean_iou"].get<double>(), 1e-6);
    EXPECT_NEAR(sm.pixel_accuracy, ref["pixel_accuracy"].get<double>(), 1e-6);
  }
}

// --- confidence intervals over images ----------------------------------------

TEST(TaskMetricsBootstrapTest, IntervalOverImagesHoldsThePointAndIsSeeded) {
  std::vector<size_t> ranks;
  for (size_t i = 0; i < 200; ++i) ranks.push_back(i % 4 == 0 ? 3 : 0);  // top-1 0.75
  auto top1 = [&](const std::vector<size_t>& images) { return TopKAccuracy(ranks, 1, images); };
  const stats::Interval a = stats::BootstrapOverItems(ranks.size(), top1, 0.95, 1000, 7);
  const stats::Interval b = stats::BootstrapOverItems(ranks.size(), top1, 0.95, 1000, 7);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  EXPECT_LT(a.low, 0.75);
  EXPECT_GT(a.high, 0.75);
  EXPECT_GT(a.low, 0.6);  // about +-0.06 for 200 images
  EXPECT_LT(a.high, 0.9);
}

TEST(TaskMetricsBootstrapTest, PairedDropOfTheSameOutputsIsZero) {
  std::vector<size_t> base, cand;
  for (size_t i = 0; i < 100; ++i) {
    base.push_back(i % 3 == 0 ? 2 : 0);
    cand.push_back(i % 3 == 0 || i % 10 == 1 ? 2 : 0);  // loses 7 of the 67 base hits
  }
  auto drop_of = [](const std::vector<size_t>& b, const std::vector<size_t>& c) {
    return [&b, &c](const std::vector<size_t>& images) {
      return TopKAccuracy(b, 1, images) - TopKAccuracy(c, 1, images);
    };
  };
  const stats::Interval same = stats::BootstrapOverItems(100, drop_of(base, base), 0.95, 500, 3);
  EXPECT_EQ(same.low, 0);
  EXPECT_EQ(same.high, 0);
  const stats::Interval drop = stats::BootstrapOverItems(100, drop_of(base, cand), 0.95, 500, 3);
  EXPECT_GT(drop.low, 0);  // a paired drop of 7 points is seen on 100 images
  EXPECT_LT(drop.low, 0.07);
  EXPECT_GT(drop.high, 0.07);
}

store::TaskAccuracy WithRanks(const std::vector<size_t>& ranks, const std::string& set = "s@1") {
  store::TaskAccuracy t;
  t.task = "classification";
  t.dataset = set;
  t.images = static_cast<int64_t>(ranks.size());
  t.per_image = RanksJson(ranks);
  return t;
}

TEST(PairedTaskDropTest, PointsOfTheSameImagesWithAnInterval) {
  std::vector<size_t> base(100, 0), cand(100, 0);
  for (size_t i = 0; i < 100; i += 10) cand[i] = 3;  // 10 images lost at top-1, kept at top-5
  const auto drop = PairedTaskDrop(WithRanks(base), WithRanks(cand), "top1");
  ASSERT_TRUE(drop.has_value());
  EXPECT_DOUBLE_EQ(drop->points, 10);
  EXPECT_GT(drop->low, 0);
  EXPECT_LT(drop->low, 10);
  EXPECT_GT(drop->high, 10);
  const auto top5 = PairedTaskDrop(WithRanks(base), WithRanks(cand), "top5");
  ASSERT_TRUE(top5.has_value());
  EXPECT_DOUBLE_EQ(top5->points, 0);
  EXPECT_DOUBLE_EQ(top5->high, 0);
  // Another set, another size, no ranks, not a top-k name: not compared.
  EXPECT_FALSE(PairedTaskDrop(WithRanks(base), WithRanks(cand, "t@2"), "top1"));
  EXPECT_FALSE(PairedTaskDrop(WithRanks(base), WithRanks({0, 1}), "top1"));
  store::TaskAccuracy none = WithRanks(base);
  none.per_image = "{}";
  EXPECT_FALSE(PairedTaskDrop(none, WithRanks(cand), "top1"));
  EXPECT_FALSE(PairedTaskDrop(WithRanks(base), WithRanks(cand), "map"));
}

// Detections and pixel counts stored per job read back whole, and two jobs'
// mAP / mIoU compare paired over the same images.
TEST(PairedTaskDropTest, MapAndMiouFromTheStoredPerImageData) {
  DetectionSet base{2, {{0, 1, {0, 0, 10, 10}}, {1, 1, {0, 0, 10, 10}}}, {}};
  base.detections = {{0, 1, {0, 0, 10, 10}, 0.9}, {1, 1, {0, 0, 10, 10}, 0.8}};
  DetectionSet cand = base;
  cand.detections[1].box = {20, 20, 30, 30};  // image 1's box missed
  const std::optional<DetectionSet> back = DetectionFromJson(DetectionJson(cand));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->images, 2u);
  ASSERT_EQ(back->detections.size(), 2u);
  EXPECT_EQ(back->detections[1].box.x0, 20);
  EXPECT_EQ(back->detections[1].score, 0.8);
  EXPECT_FALSE(DetectionFromJson(RanksJson({0, 1})));
  store::TaskAccuracy a{"detection", "coco@1", 2, {}, DetectionJson(base)};
  store::TaskAccuracy b{"detection", "coco@1", 2, {}, DetectionJson(cand)};
  const auto map = PairedTaskDrop(a, b, "map");
  ASSERT_TRUE(map.has_value());
  // base: AP 1 at every threshold; cand: the top detection finds one of two
  // truths (precision 1 up to recall .5: 51 of the 101 recall points).
  EXPECT_DOUBLE_EQ(map->points, 100 * (1 - 51.0 / 101));
  EXPECT_GT(map->points, 0);
  EXPECT_FALSE(PairedTaskDrop(a, b, "miou"));

  SegmentationCounts s1(2), s2(2);
  s1.AddImage({0, 1, 1, 0}, {0, 1, 1, 0});
  s1.AddImage({1, 1, 0, 0}, {1, 1, 0, 0});
  s2.AddImage({0, 1, 1, 0}, {0, 1, 1, 0});
  s2.AddImage({1, 1, 0, 0}, {0, 0, 0, 0});
  const std::optional<SegmentationCounts> again = SegmentationCounts::FromJson(s2.ToJson());
  ASSERT_TRUE(again.has_value());
  EXPECT_DOUBLE_EQ(again->Evaluate(AllImages(2)).mean_iou, s2.Evaluate(AllImages(2)).mean_iou);
  EXPECT_FALSE(SegmentationCounts::FromJson(RanksJson({0})));
  store::TaskAccuracy sa{"segmentation", "seg@1", 2, {}, s1.ToJson()};
  store::TaskAccuracy sb{"segmentation", "seg@1", 2, {}, s2.ToJson()};
  const auto miou = PairedTaskDrop(sa, sb, "miou");
  ASSERT_TRUE(miou.has_value());
  // s2: class 0 4/6, class 1 2/4: mIoU 7/12 against 1.
  EXPECT_NEAR(miou->points, 100 * (1 - 7.0 / 12), 1e-9);
  const auto pixels = PairedTaskDrop(sa, sb, "pixel_accuracy");
  ASSERT_TRUE(pixels.has_value());
  EXPECT_DOUBLE_EQ(pixels->points, 25);
  EXPECT_FALSE(PairedTaskDrop(sa, sb, "map"));
}

}  // namespace
}  // namespace dfarm::eval
