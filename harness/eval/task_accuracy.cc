#include "harness/eval/task_accuracy.h"

#include <algorithm>
#include <cmath>

#include "reports/eval/task_drop.h"
#include "reports/eval/task_metrics.h"
#include "reports/gate/stats.h"

namespace dfarm::harness {
namespace {

// `names` of t (its per_image set) with their bootstrap intervals; a metric
// undefined on the set (no truth box, say) is left out.
void AddMetrics(const std::vector<std::string>& names, store::TaskAccuracy& t) {
  for (const std::string& name : names) {
    const std::optional<eval::ImageMetric> metric = eval::TaskMetricOverImages(t, name);
    if (!metric) continue;
    const size_t n = static_cast<size_t>(t.images);
    const double value = (*metric)(eval::AllImages(n));
    if (!std::isfinite(value)) continue;
    const stats::Interval ci =
        stats::BootstrapOverItems(n, *metric, kTaskConfidence, kTaskBootstrapResamples, /*seed=*/1);
    t.metrics.push_back({name, value, ci.low, ci.high});
  }
}

Result<store::TaskAccuracy> ScoreTopK(const EvalSpec& eval, const runner::TaskOutputs& outputs) {
  if (outputs.kind != "topk" || outputs.output != static_cast<int64_t>(eval.output) ||
      outputs.k != static_cast<int64_t>(eval.top_k)) {
    return MakeError("the runner listed the top " + std::to_string(outputs.k) + " of output " +
                     std::to_string(outputs.output) + ", the eval asked for the top " +
                     std::to_string(eval.top_k) + " of output " + std::to_string(eval.output));
  }
  if (outputs.sets.size() != eval.labels.size()) {
    return MakeError("the runner listed " + std::to_string(outputs.sets.size()) +
                     " input sets for " + std::to_string(eval.labels.size()) + " images");
  }
  std::vector<size_t> ranks;
  for (size_t i = 0; i < outputs.sets.size(); ++i) {
    const std::vector<int64_t>& top = outputs.sets[i];
    const int64_t want = int64_t{eval.labels[i]} + eval.offset;
    const auto at = std::find(top.begin(), top.end(), want);
    ranks.push_back(static_cast<size_t>(at - top.begin()));
  }
  store::TaskAccuracy t;
  t.task = eval.task;
  t.dataset = eval.dataset_id;
  t.images = static_cast<int64_t>(ranks.size());
  t.per_image = eval::RanksJson(ranks);
  std::vector<std::string> names = {"top1"};
  if (eval.top_k > 1) names.push_back("top" + std::to_string(eval.top_k));
  AddMetrics(names, t);
  return t;
}

// One detection in pixels of its image, or unset when its class maps to no
// category.
std::optional<eval::DetectedBox> Detected(const EvalSpec& eval, size_t image,
                                          const runner::TaskDetection& d) {
  const int64_t cls = d.class_index - eval.offset;
  if (cls < 0 || cls >= static_cast<int64_t>(eval.category_ids.size())) return std::nullopt;
  const int64_t category = eval.category_ids[static_cast<size_t>(cls)];
  if (category < 0) return std::nullopt;
  // yxyx: ymin, xmin, ymax, xmax (as TaskDetection names them); xyxy swaps.
  const bool yx = eval.box_order == "yxyx";
  const double w = eval.widths[image], h = eval.heights[image];
  const double x0 = (yx ? d.xmin : d.ymin) * w, y0 = (yx ? d.ymin : d.xmin) * h;
  const double x1 = (yx ? d.xmax : d.ymax) * w, y1 = (yx ? d.ymax : d.xmax) * h;
  eval::Box box{std::min(x0, x1), std::min(y0, y1), std::max(x0, x1), std::max(y0, y1)};
  return eval::DetectedBox{image, static_cast<int>(category), box, d.score};
}

// Each image's candidates decoded against the eval's anchors (decoder
// "ssd_anchors"); an error when the runner listed other outputs, another
// score rule or a box output of another anchor count.
Result<std::vector<std::vector<runner::TaskDetection>>> DecodedSets(
    const EvalSpec& eval, const runner::TaskOutputs& outputs) {
  const SsdAnchorDecoder& d = *eval.anchor_decoder;
  const size_t anchors = d.anchors ? d.anchors->size() : 0;
  if (outputs.activation != d.score || outputs.class_offset != eval.offset ||
      outputs.threshold != d.score_threshold) {
    return MakeError("the runner listed candidates of " + outputs.activation +
                     " scores from class " + std::to_string(outputs.class_offset) +
                     ", the eval asked for " + d.score + " scores from class " +
                     std::to_string(eval.offset));
  }
  if (outputs.anchors >= 0 && static_cast<size_t>(outputs.anchors) != anchors &&
      !outputs.detections.empty()) {
    return MakeError("the model's box output has " + std::to_string(outputs.anchors) +
                     " anchors but the decoder's anchors are " + std::to_string(anchors) +
                     ": check decoder.anchors (or anchors_file) against the model");
  }
  std::vector<std::vector<runner::TaskDetection>> sets;
  for (const std::vector<runner::TaskDetection>& rows : outputs.detections) {
    auto decoded = DecodeAnchorRows(d, rows, eval.max_detections);
    if (!decoded) return decoded.error();
    sets.push_back(std::move(*decoded));
  }
  return sets;
}

Result<store::TaskAccuracy> ScoreBoxes(const EvalSpec& eval, const runner::TaskOutputs& outputs) {
  std::vector<int64_t> want(eval.box_outputs.begin(), eval.box_outputs.end());
  const std::string kind = eval.anchor_decoder ? "anchors" : "boxes";
  if (outputs.kind != kind || outputs.box_outputs != want) {
    return MakeError("the runner listed task outputs of kind '" + outputs.kind + "', the eval " +
                     (eval.anchor_decoder ? "asked for the candidates of raw boxes and scores"
                                          : "asked for the boxes of the post-process's outputs"));
  }
  if (outputs.detections.size() != eval.images.size()) {
    return MakeError("the runner listed " + std::to_string(outputs.detections.size()) +
                     " input sets for " + std::to_string(eval.images.size()) + " images");
  }
  std::vector<std::vector<runner::TaskDetection>> decoded;
  if (eval.anchor_decoder) {
    auto sets = DecodedSets(eval, outputs);
    if (!sets) return sets.error();
    decoded = std::move(*sets);
  }
  const auto& per_image = eval.anchor_decoder ? decoded : outputs.detections;
  eval::DetectionSet set;
  set.images = eval.images.size();
  for (const EvalTruthBox& t : eval.truth) {
    set.truth.push_back({t.image, static_cast<int>(t.category), {t.x, t.y, t.x + t.w, t.y + t.h}});
  }
  for (size_t i = 0; i < per_image.size(); ++i) {
    for (const runner::TaskDetection& d : per_image[i]) {
      if (auto box = Detected(eval, i, d)) set.detections.push_back(*box);
    }
  }
  store::TaskAccuracy t;
  t.task = eval.task;
  t.dataset = eval.dataset_id;
  t.images = static_cast<int64_t>(set.images);
  t.per_image = eval::DetectionJson(set);
  AddMetrics({"map", "map50", "map75", "recall"}, t);
  return t;
}

// The class map's pixels; an error when its runs do not cover H x W.
Result<std::vector<int32_t>> Pixels(const runner::TaskClassMap& m, size_t image) {
  std::vector<int32_t> out;
  const uint64_t want = static_cast<uint64_t>(m.height) * static_cast<uint64_t>(m.width);
  for (size_t r = 0; r + 1 < m.rle.size(); r += 2) {
    if (out.size() + static_cast<uint64_t>(m.rle[r + 1]) > want) break;
    out.insert(out.end(), static_cast<size_t>(m.rle[r + 1]),
               static_cast<int32_t>(std::min<int64_t>(m.rle[r], INT32_MAX)));
  }
  if (out.size() != want || want == 0) {
    return MakeError("the runner's class map of image " + std::to_string(image) +
                     " does not cover its " + std::to_string(m.height) + "x" +
                     std::to_string(m.width) + " pixels");
  }
  return out;
}

// `mask` resized to height x width by nearest neighbour with half-pixel
// centres: pixel (y, x) is the mask's (floor((y + .5) * H / height),
// floor((x + .5) * W / width)).
std::vector<int32_t> ResizeNearest(const EvalMask& mask, size_t height, size_t width) {
  std::vector<int32_t> out;
  out.reserve(height * width);
  for (size_t y = 0; y < height; ++y) {
    const size_t sy = std::min<size_t>(mask.height - 1, (2 * y + 1) * mask.height / (2 * height));
    for (size_t x = 0; x < width; ++x) {
      const size_t sx = std::min<size_t>(mask.width - 1, (2 * x + 1) * mask.width / (2 * width));
      out.push_back(mask.values[sy * mask.width + sx]);
    }
  }
  return out;
}

Result<store::TaskAccuracy> ScoreClassMaps(const EvalSpec& eval,
                                           const runner::TaskOutputs& outputs) {
  if (outputs.kind != "classmap" || outputs.output != static_cast<int64_t>(eval.output) ||
      outputs.activation != eval.activation) {
    return MakeError("the runner listed task outputs of kind '" + outputs.kind + "' of output " +
                     std::to_string(outputs.output) + ", the eval asked for the class map of " +
                     eval.activation + " output " + std::to_string(eval.output));
  }
  if (!eval.masks || outputs.maps.size() != eval.masks->size()) {
    return MakeError("the runner listed " + std::to_string(outputs.maps.size()) +
                     " input sets for " + std::to_string(eval.images.size()) + " images");
  }
  eval::SegmentationCounts counts(static_cast<int>(eval.classes.size()), eval.ignore_label);
  for (size_t i = 0; i < outputs.maps.size(); ++i) {
    const runner::TaskClassMap& m = outputs.maps[i];
    auto predicted = Pixels(m, i);
    if (!predicted) return predicted.error();
    counts.AddImage(ResizeNearest((*eval.masks)[i], static_cast<size_t>(m.height),
                                  static_cast<size_t>(m.width)),
                    *predicted);
  }
  store::TaskAccuracy t;
  t.task = eval.task;
  t.dataset = eval.dataset_id;
  t.images = static_cast<int64_t>(counts.images());
  t.per_image = counts.ToJson();
  AddMetrics({"miou", "pixel_accuracy"}, t);
  return t;
}

}  // namespace

Result<store::TaskAccuracy> ScoreTaskOutputs(const EvalSpec& eval,
                                             const runner::TaskOutputs& outputs) {
  if (eval.task == "detection") return ScoreBoxes(eval, outputs);
  if (eval.task == "segmentation") return ScoreClassMaps(eval, outputs);
  return ScoreTopK(eval, outputs);
}

}  // namespace dfarm::harness
