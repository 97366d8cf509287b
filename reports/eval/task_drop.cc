#include "reports/eval/task_drop.h"

#include <memory>
#include <vector>

#include "reports/eval/task_metrics.h"
#include "reports/gate/stats.h"

namespace dfarm::eval {
namespace {

std::optional<ImageMetric> TopK(const store::TaskAccuracy& task, const std::string& name) {
  if (name.size() < 4 || name.find_first_not_of("0123456789", 3) != std::string::npos) {
    return std::nullopt;
  }
  const size_t k = std::stoul(name.substr(3));
  auto ranks = std::make_shared<const std::vector<size_t>>(RanksFromJson(task.per_image));
  if (ranks->empty() || ranks->size() != static_cast<size_t>(task.images)) return std::nullopt;
  return [ranks, k](const std::vector<size_t>& images) { return TopKAccuracy(*ranks, k, images); };
}

std::optional<ImageMetric> Detection(const store::TaskAccuracy& task, const std::string& name) {
  std::optional<DetectionSet> set = DetectionFromJson(task.per_image);
  if (!set || set->images != static_cast<size_t>(task.images) || set->images == 0) {
    return std::nullopt;
  }
  auto coco = std::make_shared<const CocoEvaluator>(set->images, set->truth, set->detections);
  double DetectionMetrics::*field = name == "map"     ? &DetectionMetrics::map
                                    : name == "map50" ? &DetectionMetrics::map50
                                    : name == "map75" ? &DetectionMetrics::map75
                                                      : &DetectionMetrics::recall;
  return [coco, field](const std::vector<size_t>& images) { return coco->Evaluate(images).*field; };
}

std::optional<ImageMetric> Segmentation(const store::TaskAccuracy& task, const std::string& name) {
  std::optional<SegmentationCounts> counts = SegmentationCounts::FromJson(task.per_image);
  if (!counts || counts->images() != static_cast<size_t>(task.images) || counts->images() == 0) {
    return std::nullopt;
  }
  auto shared = std::make_shared<const SegmentationCounts>(std::move(*counts));
  const bool miou = name == "miou";
  return [shared, miou](const std::vector<size_t>& images) {
    const SegmentationMetrics m = shared->Evaluate(images);
    return miou ? m.mean_iou : m.pixel_accuracy;
  };
}

}  // namespace

std::optional<ImageMetric> TaskMetricOverImages(const store::TaskAccuracy& task,
                                                const std::string& name) {
  if (name.rfind("top", 0) == 0) return TopK(task, name);
  if (name == "map" || name == "map50" || name == "map75" || name == "recall") {
    return Detection(task, name);
  }
  if (name == "miou" || name == "pixel_accuracy") return Segmentation(task, name);
  return std::nullopt;
}

std::optional<TaskDrop> PairedTaskDrop(const store::TaskAccuracy& from,
                                       const store::TaskAccuracy& to, const std::string& metric,
                                       double confidence, int resamples, uint64_t seed) {
  if (from.dataset != to.dataset || from.images != to.images || from.images <= 0) {
    return std::nullopt;
  }
  const std::optional<ImageMetric> a = TaskMetricOverImages(from, metric);
  const std::optional<ImageMetric> b = TaskMetricOverImages(to, metric);
  if (!a || !b) return std::nullopt;
  const auto drop = [&](const std::vector<size_t>& images) {
    return 100 * ((*a)(images) - (*b)(images));
  };
  const size_t n = static_cast<size_t>(from.images);
  const stats::Interval ci = stats::BootstrapOverItems(n, drop, confidence, resamples, seed);
  return TaskDrop{drop(AllImages(n)), ci.low, ci.high};
}

}  // namespace dfarm::eval
