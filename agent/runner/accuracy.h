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

// The tensor's values as doubles, dequantized when it is quantized.
std::vector<double> TensorValues(const runtime::Tensor& tensor);

}  // namespace dfarm::runner
