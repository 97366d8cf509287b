// Quantized tensors on the gpu delegate, run as TensorFlow Lite's GPU delegate
// runs quantized models (quantized_models_allowed, default true): a partition
// computes in float. Quantized constants (int8/uint8 weights per tensor or per
// channel, int32 biases) are dequantized once in Prepare(); quantized run-time
// inputs are dequantized on the host as they are copied in and quantized
// outputs quantized on the host as they are copied out; every quantized
// tensor a node writes is rounded to its grid on the device (the fake_quant
// launch gpu_nodes.h appends), so values follow the integer kernels' within
// a step or two.
#pragma once

#include <vector>

#include "runtime/tensor.h"

namespace dfarm::delegates::gpu {

// A quantized tensor the gpu delegate takes: int8/uint8 quantized per tensor
// with a positive scale, or a constant int8/uint8/int32 quantized per tensor
// or per channel.
bool IsGpuQuantized(const runtime::Tensor& t);

// The real values of a constant `t` (float32, or quantized per IsGpuQuantized()).
std::vector<float> RealValues(const runtime::Tensor& t);

// `t`'s codes as real values, into `out` (num_elements() floats); `t` is a
// run-time int8/uint8 tensor quantized per tensor.
void Dequantize(const runtime::Tensor& t, float* out);

// Real values to `t`'s codes (rounded half away from zero, saturated).
void Quantize(const float* in, runtime::Tensor* t);

}  // namespace dfarm::delegates::gpu
