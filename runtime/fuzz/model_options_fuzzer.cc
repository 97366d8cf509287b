// Structural libFuzzer target for operator options: the fuzz bytes do not
// form a .tflite file but choose one, built with tests/model_builder: an op
// with window geometry (CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D,
// AVERAGE_POOL_2D, TRANSPOSE_CONV), float32 or int8, its shapes, and its
// options (strides, dilations, filter sizes, padding, activation, depth
// multiplier, the transpose-conv output shape), each drawn often from the
// extremes (0, -1, 2^31-1, -2^31, 2^30, ...). The byte-level model fuzzer
// rarely writes such a value into a valid options table (in 4 minutes it missed
// known window overflows and a pooling hang); here every input
// is a valid model. The model then goes through the loader fuzzer's run step
// (run_model.h). Built only with -DDFARM_BUILD_FUZZERS=ON and clang; see
// README.md here.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/fuzz/run_model.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::runtime::fuzz {
namespace {

namespace tfl = ::dfarm::tflite;
using testing::ModelBuilder;

// With DFARM_FUZZ_VERBOSE set (reproducing one input), each drawn shape and
// option value is printed, so a crash names the model that caused it.
const bool g_verbose = std::getenv("DFARM_FUZZ_VERBOSE") != nullptr;

int32_t Trace(const char* what, int32_t value) {
  if (g_verbose) std::fprintf(stderr, "%s=%d ", what, value);
  return value;
}

// An option value: mostly small, often an extreme.
int32_t OptionValue(FuzzedDataProvider& in) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  switch (in.ConsumeIntegralInRange<int>(0, 11)) {
    case 0:
      return kMax;
    case 1:
      return kMin;
    case 2:
      return -1;
    case 3:
      return 0;
    case 4:
      return int32_t{1} << 30;
    case 5:
      return kMax - in.ConsumeIntegralInRange<int32_t>(0, 16);
    case 6:
      return in.ConsumeIntegralInRange<int32_t>(1 << 15, 1 << 17);
    case 7:
      return in.ConsumeIntegral<int32_t>();
    default:
      return in.ConsumeIntegralInRange<int32_t>(1, 4);
  }
}

// A tensor dimension: mostly small (the model must still fit the invoke
// limit), sometimes 0, -1 or huge.
int32_t Dim(FuzzedDataProvider& in, int32_t small_max) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return Trace("dim", OptionValue(in));
  return Trace("dim", in.ConsumeIntegralInRange<int32_t>(1, small_max));
}

tfl::Padding PaddingOf(FuzzedDataProvider& in) {
  const int v = in.ConsumeIntegralInRange<int>(0, 8);
  return static_cast<tfl::Padding>(Trace("padding", v == 8 ? in.ConsumeIntegral<int8_t>() : v & 1));
}

tfl::ActivationFunctionType ActivationOf(FuzzedDataProvider& in) {
  const int v = in.ConsumeIntegralInRange<int>(0, 7);
  return v == 7 ? static_cast<tfl::ActivationFunctionType>(in.ConsumeIntegral<int8_t>())
                : static_cast<tfl::ActivationFunctionType>(v == 6 ? 0 : v);
}

int64_t Elements(const std::vector<int32_t>& shape) {
  int64_t n = 1;
  for (int32_t d : shape) {
    if (d <= 0 || d > 64) return -1;  // a constant this big is not written
    n *= d;
  }
  return n;
}

// A constant of `shape` (float32 or int8 per `quantized`), values from the
// input; a shape too large to write gets a one-element buffer (a broken model).
int Constant(ModelBuilder& b, FuzzedDataProvider& in, std::vector<int32_t> shape, bool quantized) {
  const int64_t n = Elements(shape);
  const size_t count = n < 0 ? 1 : static_cast<size_t>(n);
  if (quantized) {
    std::vector<uint8_t> bytes(count);
    for (auto& v : bytes) v = in.ConsumeIntegral<uint8_t>();
    const int t = b.AddConstRaw(tfl::TensorType::INT8, std::move(shape), std::move(bytes));
    b.SetQuantization(t, 0.05f, 0);
    return t;
  }
  std::vector<uint8_t> bytes(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) {
    const float v = in.ConsumeFloatingPointInRange<float>(-2.0f, 2.0f);
    std::memcpy(&bytes[i * sizeof(float)], &v, sizeof(float));
  }
  return b.AddConstRaw(tfl::TensorType::FLOAT32, std::move(shape), std::move(bytes));
}

int Bias(ModelBuilder& b, FuzzedDataProvider& in, int32_t channels, bool quantized) {
  if (in.ConsumeBool()) return -1;
  if (quantized) {
    std::vector<int32_t> values(channels > 0 && channels <= 64 ? channels : 1);
    for (auto& v : values) v = in.ConsumeIntegralInRange<int32_t>(-1000, 1000);
    return b.AddQuantizedBias(values, 0.05f, {0.05f});
  }
  return Constant(b, in, {channels}, false);
}

std::vector<uint8_t> BuildModel(FuzzedDataProvider& in) {
  ModelBuilder b;
  const bool quantized = in.ConsumeBool();
  const tfl::TensorType type = quantized ? tfl::TensorType::INT8 : tfl::TensorType::FLOAT32;
  const std::vector<int32_t> input_shape = {Dim(in, 2), Dim(in, 12), Dim(in, 12), Dim(in, 4)};
  const int input = b.AddTensor(type, input_shape, "input");
  // The runtime sizes the output in Prepare; the written shape is a guess.
  const int output =
      b.AddTensor(type, {input_shape[0], Dim(in, 12), Dim(in, 12), Dim(in, 4)}, "output");
  if (quantized) {
    b.SetQuantization(input, 0.05f, in.ConsumeIntegralInRange<int64_t>(-128, 127));
    b.SetQuantization(output, 0.1f, in.ConsumeIntegralInRange<int64_t>(-128, 127));
  }
  const int32_t in_channels = input_shape[3];

  switch (Trace("op", in.ConsumeIntegralInRange<int>(0, 4))) {
    case 0: {
      testing::Conv2DParams p;
      p.padding = PaddingOf(in);
      p.stride_h = Trace("stride_h", OptionValue(in));
      p.stride_w = Trace("stride_w", OptionValue(in));
      p.dilation_h = Trace("dilation_h", OptionValue(in));
      p.dilation_w = Trace("dilation_w", OptionValue(in));
      p.activation = ActivationOf(in);
      const int32_t out_channels = Dim(in, 4);
      const int filter =
          Constant(b, in, {out_channels, Dim(in, 5), Dim(in, 5), in_channels}, quantized);
      b.AddConv2D(input, filter, Bias(b, in, out_channels, quantized), output, p);
      break;
    }
    case 1: {
      testing::DepthwiseConv2DParams p;
      p.padding = PaddingOf(in);
      p.stride_h = Trace("stride_h", OptionValue(in));
      p.stride_w = Trace("stride_w", OptionValue(in));
      p.dilation_h = Trace("dilation_h", OptionValue(in));
      p.dilation_w = Trace("dilation_w", OptionValue(in));
      p.depth_multiplier = Trace("depth_multiplier", OptionValue(in));
      p.activation = ActivationOf(in);
      const int32_t out_channels = Dim(in, 8);
      const int filter = Constant(b, in, {1, Dim(in, 5), Dim(in, 5), out_channels}, quantized);
      b.AddDepthwiseConv2D(input, filter, Bias(b, in, out_channels, quantized), output, p);
      break;
    }
    case 2:
    case 3: {
      testing::Pool2DParams p;
      p.padding = PaddingOf(in);
      p.stride_h = Trace("stride_h", OptionValue(in));
      p.stride_w = Trace("stride_w", OptionValue(in));
      p.filter_h = Trace("filter_h", OptionValue(in));
      p.filter_w = Trace("filter_w", OptionValue(in));
      p.activation = ActivationOf(in);
      const auto code = in.ConsumeBool() ? tfl::BuiltinOperator::MAX_POOL_2D
                                         : tfl::BuiltinOperator::AVERAGE_POOL_2D;
      b.AddPool2D(code, input, output, p);
      break;
    }
    default: {
      testing::TransposeConvParams p;
      p.padding = PaddingOf(in);
      p.stride_h = Trace("stride_h", OptionValue(in));
      p.stride_w = Trace("stride_w", OptionValue(in));
      p.activation = ActivationOf(in);
      const int32_t out_channels = Dim(in, 4);
      const std::vector<int32_t> out_shape = {input_shape[0], OptionValue(in), OptionValue(in),
                                              out_channels};
      const int shape = b.AddConstInt32({4}, out_shape);
      const int filter =
          Constant(b, in, {out_channels, Dim(in, 5), Dim(in, 5), in_channels}, quantized);
      b.AddTransposeConv(shape, filter, input, Bias(b, in, out_channels, quantized), output, p);
      break;
    }
  }
  if (g_verbose) std::fprintf(stderr, "\n");
  b.SetInputs({input});
  b.SetOutputs({output});
  return b.Build();
}

}  // namespace
}  // namespace dfarm::runtime::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::vector<uint8_t> model = dfarm::runtime::fuzz::BuildModel(in);
  const std::vector<uint8_t> fill = in.ConsumeRemainingBytes<uint8_t>();
  dfarm::runtime::fuzz::RunModel(model, fill);
  return 0;
}
