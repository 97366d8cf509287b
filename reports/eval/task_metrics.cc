#include "reports/eval/task_metrics.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

namespace dfarm::eval {
namespace {

// COCO's IoU thresholds and recall points, as numpy's linspace computes them
// (i * step + start, the last point exactly the end), so that a box on a
// threshold is judged as pycocotools judges it.
double IouThreshold(int i) {
  if (i == 9) return 0.95;
  const double step = (0.95 - 0.5) / 9;
  return static_cast<double>(i) * step + 0.5;
}

double RecallPoint(int i) { return i == 100 ? 1.0 : static_cast<double>(i) * 0.01; }

// Indices of `scores` by descending score, stable (numpy's mergesort of -score).
std::vector<size_t> ByDescendingScore(const std::vector<double>& scores) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

}  // namespace

std::vector<size_t> AllImages(size_t n) {
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), size_t{0});
  return all;
}

size_t LabelRank(const float* scores, size_t count, size_t label) {
  if (label >= count || std::isnan(scores[label])) return count;
  const float mine = scores[label];
  size_t rank = 0;
  for (size_t i = 0; i < count; ++i) {
    if (scores[i] > mine || (i < label && scores[i] == mine)) ++rank;
  }
  return rank;
}

std::string RanksJson(const std::vector<size_t>& ranks) {
  return nlohmann::json{{"ranks", ranks}}.dump();
}

std::vector<size_t> RanksFromJson(const std::string& per_image) {
  const nlohmann::json doc = nlohmann::json::parse(per_image, nullptr, false);
  std::vector<size_t> ranks;
  if (!doc.is_object() || !doc.contains("ranks") || !doc["ranks"].is_array()) return ranks;
  for (const nlohmann::json& r : doc["ranks"]) {
    if (!r.is_number_unsigned()) return {};
    ranks.push_back(r.get<size_t>());
  }
  return ranks;
}

double TopKAccuracy(const std::vector<size_t>& ranks, size_t k, const std::vector<size_t>& images) {
  if (images.empty()) return kNaN;
  size_t hits = 0;
  for (size_t image : images) hits += image < ranks.size() && ranks[image] < k ? 1 : 0;
  return static_cast<double>(hits) / static_cast<double>(images.size());
}

double BoxIou(const Box& a, const Box& b) {
  const double iw = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  const double ih = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  const double inter = iw > 0 && ih > 0 ? iw * ih : 0.0;
  const double uni = (a.x1 - a.x0) * (a.y1 - a.y0) + (b.x1 - b.x0) * (b.y1 - b.y0) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

CocoEvaluator::CocoEvaluator(size_t images, const std::vector<TruthBox>& truth,
                             const std::vector<DetectedBox>& detections, size_t max_detections)
    : images_(images) {
  for (const TruthBox& t : truth) {
    if (t.image < images) categories_.push_back(t.category);
  }
  std::sort(categories_.begin(), categories_.end());
  categories_.erase(std::unique(categories_.begin(), categories_.end()), categories_.end());
  auto category_index = [&](int category) -> long {
    auto it = std::lower_bound(categories_.begin(), categories_.end(), category);
    return it != categories_.end() && *it == category ? it - categories_.begin() : -1;
  };
  std::vector<std::vector<std::vector<Box>>> gts(categories_.size(),
                                                 std::vector<std::vector<Box>>(images));
  std::vector<std::vector<std::vector<const DetectedBox*>>> dts(
      categories_.size(), std::vector<std::vector<const DetectedBox*>>(images));
  for (const TruthBox& t : truth) {
    if (t.image < images)
      gts[static_cast<size_t>(category_index(t.category))][t.image].push_back(t.box);
  }
  for (const DetectedBox& d : detections) {
    const long c = category_index(d.category);
    if (c >= 0 && d.image < images) dts[static_cast<size_t>(c)][d.image].push_back(&d);
  }
  matched_.assign(categories_.size(), std::vector<Matched>(images));
  for (size_t c = 0; c < categories_.size(); ++c) {
    for (size_t i = 0; i < images; ++i) {
      const std::vector<Box>& g = gts[c][i];
      std::vector<double> scores;
      for (const DetectedBox* d : dts[c][i]) scores.push_back(d->score);
      std::vector<size_t> order = ByDescendingScore(scores);
      if (order.size() > max_detections) order.resize(max_detections);
      Matched& m = matched_[c][i];
      m.truth = g.size();
      for (size_t d : order) m.scores.push_back(scores[d]);
      m.hit.assign(kThresholds, std::vector<bool>(order.size(), false));
      for (int t = 0; t < kThresholds; ++t) {
        std::vector<bool> taken(g.size(), false);
        for (size_t k = 0; k < order.size(); ++k) {
          double best = std::min(IouThreshold(t), 1 - 1e-10);
          long match = -1;
          for (size_t j = 0; j < g.size(); ++j) {
            if (taken[j]) continue;
            const double iou = BoxIou(dts[c][i][order[k]]->box, g[j]);
            if (iou < best) continue;
            best = iou;
            match = static_cast<long>(j);
          }
          if (match < 0) continue;
          taken[static_cast<size_t>(match)] = true;
          m.hit[static_cast<size_t>(t)][k] = true;
        }
      }
    }
  }
}

double CocoEvaluator::AveragePrecision(const std::vector<const Matched*>& per_image, int threshold,
                                       double* recall) const {
  size_t truth = 0;
  std::vector<double> scores;
  std::vector<bool> hits;
  for (const Matched* m : per_image) {
    truth += m->truth;
    scores.insert(scores.end(), m->scores.begin(), m->scores.end());
    const std::vector<bool>& h = m->hit[static_cast<size_t>(threshold)];
    hits.insert(hits.end(), h.begin(), h.end());
  }
  const std::vector<size_t> order = ByDescendingScore(scores);
  const size_t n = order.size();
  std::vector<double> rc(n), pr(n);
  double tp = 0, fp = 0;
  const double eps = 2.220446049250313e-16;  // numpy.spacing(1)
  for (size_t k = 0; k < n; ++k) {
    (hits[order[k]] ? tp : fp) += 1;
    rc[k] = tp / static_cast<double>(truth);
    pr[k] = tp / (fp + tp + eps);
  }
  *recall = n > 0 ? rc[n - 1] : 0.0;
  for (size_t k = n; k-- > 1;) pr[k - 1] = std::max(pr[k - 1], pr[k]);
  double sum = 0;
  for (int r = 0; r <= 100; ++r) {
    const size_t at =
        static_cast<size_t>(std::lower_bound(rc.begin(), rc.end(), RecallPoint(r)) - rc.begin());
    if (at < n) sum += pr[at];
  }
  return sum / 101;
}

DetectionMetrics CocoEvaluator::Evaluate(const std::vector<size_t>& images) const {
  DetectionMetrics out;
  std::vector<double> aps, aps50, aps75, recalls;
  for (size_t c = 0; c < categories_.size(); ++c) {
    std::vector<const Matched*> per_image;
    size_t truth = 0;
    for (size_t i : images) {
      if (i >= images_) continue;
      per_image.push_back(&matched_[c][i]);
      truth += matched_[c][i].truth;
    }
    if (truth == 0) continue;
    ++out.categories;
    for (int t = 0; t < kThresholds; ++t) {
      double recall = 0;
      const double ap = AveragePrecision(per_image, t, &recall);
      aps.push_back(ap);
      recalls.push_back(recall);
      if (t == 0) aps50.push_back(ap);
      if (t == 5) aps75.push_back(ap);
    }
  }
  out.map = Mean(aps);
  out.map50 = Mean(aps50);
  out.map75 = Mean(aps75);
  out.recall = Mean(recalls);
  return out;
}

SegmentationCounts::SegmentationCounts(int classes, int ignore_label)
    : classes_(std::max(classes, 0)), ignore_label_(ignore_label) {}

void SegmentationCounts::AddImage(const std::vector<int32_t>& truth,
                                  const std::vector<int32_t>& predicted) {
  const size_t classes = static_cast<size_t>(classes_);
  ImageCounts counts;
  counts.intersection.assign(classes, 0);
  counts.truth.assign(classes, 0);
  counts.predicted.assign(classes, 0);
  const size_t n = std::min(truth.size(), predicted.size());
  for (size_t p = 0; p < n; ++p) {
    const int32_t t = truth[p], q = predicted[p];
    if (ignore_label_ >= 0 && t == ignore_label_) continue;
    const bool t_in = t >= 0 && t < classes_, q_in = q >= 0 && q < classes_;
    ++counts.counted;
    if (t_in) ++counts.truth[static_cast<size_t>(t)];
    if (q_in) ++counts.predicted[static_cast<size_t>(q)];
    if (t_in && t == q) {
      ++counts.intersection[static_cast<size_t>(t)];
      ++counts.correct;
    }
  }
  per_image_.push_back(std::move(counts));
}

SegmentationMetrics SegmentationCounts::Evaluate(const std::vector<size_t>& images) const {
  SegmentationMetrics out;
  const size_t classes = static_cast<size_t>(classes_);
  std::vector<uint64_t> inter(classes, 0), uni(classes, 0);
  uint64_t correct = 0, counted = 0;
  for (size_t i : images) {
    if (i >= per_image_.size()) continue;
    const ImageCounts& c = per_image_[i];
    for (size_t k = 0; k < classes; ++k) {
      inter[k] += c.intersection[k];
      uni[k] += c.truth[k] + c.predicted[k] - c.intersection[k];
    }
    correct += c.correct;
    counted += c.counted;
  }
  std::vector<double> ious;
  for (size_t k = 0; k < classes; ++k) {
    if (uni[k] > 0) ious.push_back(static_cast<double>(inter[k]) / static_cast<double>(uni[k]));
  }
  out.mean_iou = Mean(ious);
  out.classes = ious.size();
  if (counted > 0) out.pixel_accuracy = static_cast<double>(correct) / static_cast<double>(counted);
  return out;
}

std::string DetectionJson(const DetectionSet& set) {
  nlohmann::json truth = nlohmann::json::array(), detections = nlohmann::json::array();
  for (const TruthBox& t : set.truth) {
    truth.push_back({t.image, t.category, t.box.x0, t.box.y0, t.box.x1, t.box.y1});
  }
  for (const DetectedBox& d : set.detections) {
    detections.push_back({d.image, d.category, d.box.x0, d.box.y0, d.box.x1, d.box.y1, d.score});
  }
  return nlohmann::json{{"images", set.images}, {"truth", truth}, {"detections", detections}}
      .dump();
}

namespace {

// [image, category, x0, y0, x1, y1(, score)] with `size` numbers.
bool BoxRow(const nlohmann::json& row, size_t size) {
  if (!row.is_array() || row.size() != size || !row[0].is_number_unsigned() ||
      !row[1].is_number_integer()) {
    return false;
  }
  for (size_t i = 2; i < size; ++i) {
    if (!row[i].is_number()) return false;
  }
  return true;
}

Box BoxOf(const nlohmann::json& row) {
  return {row[2].get<double>(), row[3].get<double>(), row[4].get<double>(), row[5].get<double>()};
}

}  // namespace

std::optional<DetectionSet> DetectionFromJson(const std::string& per_image) {
  const nlohmann::json doc = nlohmann::json::parse(per_image, nullptr, false);
  if (!doc.is_object() || !doc.contains("images") || !doc["images"].is_number_unsigned() ||
      !doc.contains("truth") || !doc["truth"].is_array() || !doc.contains("detections") ||
      !doc["detections"].is_array()) {
    return std::nullopt;
  }
  DetectionSet set;
  set.images = doc["images"].get<size_t>();
  for (const nlohmann::json& t : doc["truth"]) {
    if (!BoxRow(t, 6)) return std::nullopt;
    set.truth.push_back({t[0].get<size_t>(), t[1].get<int>(), BoxOf(t)});
  }
  for (const nlohmann::json& d : doc["detections"]) {
    if (!BoxRow(d, 7)) return std::nullopt;
    set.detections.push_back({d[0].get<size_t>(), d[1].get<int>(), BoxOf(d), d[6].get<double>()});
  }
  return set;
}

std::string SegmentationCounts::ToJson() const {
  nlohmann::json counts = nlohmann::json::array();
  for (const ImageCounts& c : per_image_) {
    std::vector<uint64_t> row = {c.correct, c.counted};
    for (size_t k = 0; k < c.truth.size(); ++k) {
      row.insert(row.end(), {c.intersection[k], c.truth[k], c.predicted[k]});
    }
    counts.push_back(std::move(row));
  }
  return nlohmann::json{{"classes", classes_}, {"ignore", ignore_label_}, {"counts", counts}}
      .dump();
}

std::optional<SegmentationCounts> SegmentationCounts::FromJson(const std::string& per_image) {
  const nlohmann::json doc = nlohmann::json::parse(per_image, nullptr, false);
  if (!doc.is_object() || !doc.contains("classes") || !doc["classes"].is_number_unsigned() ||
      !doc.contains("counts") || !doc["counts"].is_array() || !doc.contains("ignore") ||
      !doc["ignore"].is_number_integer()) {
    return std::nullopt;
  }
  SegmentationCounts out(doc["classes"].get<int>(), doc["ignore"].get<int>());
  const size_t classes = static_cast<size_t>(out.classes_);
  for (const nlohmann::json& row : doc["counts"]) {
    if (!row.is_array() || row.size() != 2 + 3 * classes) return std::nullopt;
    for (const nlohmann::json& v : row) {
      if (!v.is_number_unsigned()) return std::nullopt;
    }
    ImageCounts c;
    c.correct = row[0].get<uint64_t>();
    c.counted = row[1].get<uint64_t>();
    for (size_t k = 0; k < classes; ++k) {
      c.intersection.push_back(row[2 + 3 * k].get<uint64_t>());
      c.truth.push_back(row[3 + 3 * k].get<uint64_t>());
      c.predicted.push_back(row[4 + 3 * k].get<uint64_t>());
    }
    out.per_image_.push_back(std::move(c));
  }
  return out;
}

}  // namespace dfarm::eval
