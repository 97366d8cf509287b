#include "reports/eval/task_drop.h"

#include <vector>

#include "reports/eval/task_metrics.h"
#include "reports/gate/stats.h"

namespace dfarm::eval {

std::optional<TaskDrop> PairedTaskDrop(const store::TaskAccuracy& from,
                                       const store::TaskAccuracy& to, const std::string& metric,
                                       double confidence, int resamples, uint64_t seed) {
  if (metric.rfind("top", 0) != 0 || metric.size() < 4 ||
      metric.find_first_not_of("0123456789", 3) != std::string::npos) {
    return std::nullopt;
  }
  const size_t k = std::stoul(metric.substr(3));
  if (from.dataset != to.dataset || from.images != to.images) return std::nullopt;
  const std::vector<size_t> a = RanksFromJson(from.per_image), b = RanksFromJson(to.per_image);
  if (a.empty() || a.size() != b.size()) return std::nullopt;
  const auto drop = [&](const std::vector<size_t>& images) {
    return 100 * (TopKAccuracy(a, k, images) - TopKAccuracy(b, k, images));
  };
  const stats::Interval ci = stats::BootstrapOverItems(a.size(), drop, confidence, resamples, seed);
  return TaskDrop{drop(AllImages(a.size())), ci.low, ci.high};
}

}  // namespace dfarm::eval
