#include "harness/eval/task_accuracy.h"

#include <algorithm>

#include "reports/eval/task_metrics.h"
#include "reports/gate/stats.h"

namespace dfarm::harness {

Result<store::TaskAccuracy> ScoreTaskOutputs(const EvalSpec& eval,
                                             const runner::TaskOutputs& outputs) {
  if (outputs.output != static_cast<int64_t>(eval.output) ||
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
  std::vector<size_t> ks = {1};
  if (eval.top_k > 1) ks.push_back(eval.top_k);
  for (size_t k : ks) {
    const auto metric = [&](const std::vector<size_t>& images) {
      return eval::TopKAccuracy(ranks, k, images);
    };
    const stats::Interval ci = stats::BootstrapOverItems(ranks.size(), metric, kTaskConfidence,
                                                         kTaskBootstrapResamples, /*seed=*/1);
    t.metrics.push_back(
        {"top" + std::to_string(k), metric(eval::AllImages(ranks.size())), ci.low, ci.high});
  }
  return t;
}

}  // namespace dfarm::harness
