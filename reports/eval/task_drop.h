// The paired comparison of two jobs' task accuracy on the same labelled set
// (store::TaskAccuracy's per-image ranks): the drop of a top-k metric and
// its bootstrap interval over the images, which the gate judges and the
// reports print.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "reports/store/store.h"

namespace dfarm::eval {

// from - to, in percentage points (positive: `to` lost accuracy), with the
// percentile interval of a seeded bootstrap over the images (both sides see
// the same draw).
struct TaskDrop {
  double points = 0;
  double low = 0;
  double high = 0;
};

// For metric "top1", "top5", ... ("top<K>"): unset when either side lacks
// per-image ranks, or the two are not on the same set (dataset or image
// count differ), or the name is not top<K>.
std::optional<TaskDrop> PairedTaskDrop(const store::TaskAccuracy& from,
                                       const store::TaskAccuracy& to, const std::string& metric,
                                       double confidence = 0.95, int resamples = 2000,
                                       uint64_t seed = 1);

}  // namespace dfarm::eval
