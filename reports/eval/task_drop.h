// The paired comparison of two jobs' task accuracy on the same labelled set
// (store::TaskAccuracy's per_image): the drop of a metric and its bootstrap
// interval over the images, which the gate judges and the reports print.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reports/store/store.h"

namespace dfarm::eval {

// A task metric of one job over a multiset of its set's images (indices,
// repeats allowed), as a fraction.
using ImageMetric = std::function<double(const std::vector<size_t>& images)>;

// The metric `name` of `task` from its per_image: "top<K>" from the ranks
// (classification); "map", "map50", "map75", "recall" from the truth boxes
// and detections (detection, COCO's rules); "miou", "pixel_accuracy" from
// the pixel counts (segmentation). Unset when the name is none of these or
// per_image does not hold what it needs.
std::optional<ImageMetric> TaskMetricOverImages(const store::TaskAccuracy& task,
                                                const std::string& name);

// from - to, in percentage points (positive: `to` lost accuracy), with the
// percentile interval of a seeded bootstrap over the images (both sides see
// the same draw).
struct TaskDrop {
  double points = 0;
  double low = 0;
  double high = 0;
};

// For a metric TaskMetricOverImages knows: unset when either side lacks
// what it needs, or the two are not on the same set (dataset or image count
// differ).
std::optional<TaskDrop> PairedTaskDrop(const store::TaskAccuracy& from,
                                       const store::TaskAccuracy& to, const std::string& metric,
                                       double confidence = 0.95, int resamples = 2000,
                                       uint64_t seed = 1);

}  // namespace dfarm::eval
