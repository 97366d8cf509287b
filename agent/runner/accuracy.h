// Accuracy of a delegate run: its outputs compared with a reference run's on
// the same inputs (the inference_diff figures of TFLite's evaluation tools,
// plus NaN/Inf counts and top-k agreement for class scores).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tensor.h"

namespace dfarm::runner {

struct OutputAccuracy {
  size_t index = 0;
  // Elements where both sides are finite; the error figures cover only these.
  int64_t compared = 0;
  // Absolute error |delegate - reference| in real units (quantized tensors
  // dequantized with their own scale and zero point).
  double mean_abs_error = 0;
  double std_abs_error = 0;  // population standard deviation of the absolute error
  double max_abs_error = 0;
  double rmse = 0;
  int64_t nan_count = 0;            // NaNs in the delegate's output
  int64_t inf_count = 0;            // +-Inf in the delegate's output
  int64_t reference_nan_count = 0;  // NaNs in the reference's output
  int64_t reference_inf_count = 0;
  // Set when both tensors are int8/uint8 with the same per-tensor scale: the
  // largest difference in quantized steps (LSB), over the compared elements.
  std::optional<int64_t> max_abs_error_lsb;
  // Set for outputs that look like class scores (shape [1, N], N >= 2):
  // top1_agree: both argmaxes are the same class; top5_agree: the reference's
  // top-1 class is among the delegate's top min(5, N).
  std::optional<bool> top1_agree;
  std::optional<bool> top5_agree;
};

// Compares `got` with `reference`, which must have the same dtype and shape
// (the same model's output in two interpreters); reads both, keeps nothing.
OutputAccuracy CompareOutput(size_t index, const runtime::Tensor& got,
                             const runtime::Tensor& reference);

// The tensor's values as doubles, dequantized when it is quantized.
std::vector<double> TensorValues(const runtime::Tensor& tensor);

}  // namespace dfarm::runner
