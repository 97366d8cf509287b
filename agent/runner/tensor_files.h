// Runner inputs and outputs: seeded random inputs, input files and output
// dumps in the formats of docs/CONTRACTS.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "runtime/interpreter.h"

namespace dfarm::runner {

// Fills every model input from one std::mt19937 seeded with `seed`, inputs
// in order, elements in order: float32/float16 uniform in [-1, 1); quantized
// int8/uint8 (per-tensor scale > 0) a gaussian in real units centred on the
// middle of the tensor's representable range with a sixth of that range as
// standard deviation, quantized with the tensor's scale and zero point
// (round half away from zero, saturated); other int8 and uint8 over their
// whole range; int16/int32/int64 in [-100, 100]; bool 0/1.
void FillRandomInputs(runtime::Interpreter& interpreter, uint32_t seed);

// Reads DIR/input_<i>.bin into input i; a missing or wrongly sized file is an
// error naming the file and the expected size in bytes.
Result<void> LoadInputs(runtime::Interpreter& interpreter, const std::string& dir);

// Writes DIR/output_<i>.bin per output and DIR/outputs.json; creates DIR.
Result<void> DumpOutputs(const runtime::Interpreter& interpreter, const std::string& dir);

// The same on a model's input (output) tensors in order, for a runtime other
// than ours (dfarm-tflite-runner's views of TensorFlow Lite's tensors), so that
// both runtimes see the same inputs: each Tensor's dtype, shape, bytes,
// quantization and data must be set. The interpreter forms call these.
void FillRandomInputs(const std::vector<runtime::Tensor*>& inputs, uint32_t seed);
Result<void> LoadInputs(const std::vector<runtime::Tensor*>& inputs, const std::string& dir);
Result<void> DumpOutputs(const std::vector<runtime::Tensor*>& outputs, const std::string& dir);

}  // namespace dfarm::runner
