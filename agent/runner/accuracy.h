// Accuracy of a delegate run: its outputs compared with a reference run's on
// the same inputs (the inference_diff figures of TFLite's evaluation tools,
// plus NaN/Inf counts and top-k agreement for class scores).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "agent/runner/runner_values.h"
#include "runtime/tensor.h"

namespace dfarm::runner {

// Compares `got` with `reference`, which must have the same dtype and shape
// (the same model's output in two interpreters): the entry of output `index`,
// named after `got`. Reads both, keeps nothing.
OutputAccuracy CompareOutput(size_t index, const runtime::Tensor& got,
                             const runtime::Tensor& reference);

// One output's comparisons over several input sets (the same output of the
// same model, one entry per set, at least one) as one entry: max_abs_error
// (and max_abs_error_lsb, when every set has it) the largest; mean_abs_error,
// std_abs_error and rmse over all compared elements of all sets; the counts
// summed; top1_agree/top5_agree true when every set agreed, with
// top1_agreement/top5_agreement the fraction of sets that did; snr_db and
// psnr_db from the sums of all sets (reference^2, error^2, the range).
OutputAccuracy AggregateOutputAccuracy(const std::vector<OutputAccuracy>& per_set);

// The indices of the k highest `values`, highest first; equal values in
// index order; NaN ranks last.
std::vector<size_t> Ranking(const std::vector<double>& values, size_t k);

// The tensor's values as doubles, dequantized when it is quantized.
std::vector<double> TensorValues(const runtime::Tensor& tensor);

}  // namespace dfarm::runner
