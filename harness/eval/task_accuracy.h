// Task accuracy of one job: the runner's task_outputs (each image's best
// classes, detections or class map; dfarm-runner --task-outputs) scored against the labels of the
// model's "eval" set (harness/eval/eval_spec.h), with seeded bootstrap
// intervals over the images (reports/eval, reports/gate/stats.h).
#pragma once

#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/runner/runner_json.h"  // runner::TaskOutputs
#include "harness/eval/eval_spec.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// Resamples of the bootstrap interval and its confidence.
inline constexpr int kTaskBootstrapResamples = 1000;
inline constexpr double kTaskConfidence = 0.95;

// The eval's metrics as fractions with 95% intervals, and the per-image
// data a paired comparison needs (store::TaskAccuracy::per_image):
// classification "top1" and "top<K>" (K the eval's top_k, when above 1)
// from the ranks; detection "map", "map50", "map75", "recall" (COCO's
// rules, boxes in the COCO image's pixels) from the truth boxes and the
// detections whose class maps to a category; segmentation "miou",
// "pixel_accuracy" from each image's class map against its mask resized by
// nearest neighbour to the output's H x W. A metric undefined on the set is
// left out. An error (naming what disagrees) when the outputs do not fit
// the eval: another kind, output or K, or a set count other than the
// images'.
Result<store::TaskAccuracy> ScoreTaskOutputs(const EvalSpec& eval,
                                             const runner::TaskOutputs& outputs);

}  // namespace dfarm::harness
