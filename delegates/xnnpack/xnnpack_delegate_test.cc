#include "delegates/xnnpack/xnnpack_delegate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "delegates/conformance/conformance.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/crafted_models.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::delegates {
namespace {

using ::dfarm::testing::Conv2DParams;
using ::dfarm::testing::ModelBuilder;
using ::testing::HasSubstr;
namespace tfl = ::dfarm::tflite;
using runtime::Status;
using runtime::StatusCode;

std::unique_ptr<runtime::Delegate> MakeXnnpack(DelegateOptions options = {}) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate(options, &d);
  EXPECT_TRUE(s.ok()) << s.message();
  return d;
}

struct RunResult {
  Status status;
  std::vector<std::vector<float>> outputs;
  runtime::Placement placement;
  size_t invoked_nodes = 0;
};

// Loads `model`, runs it once on seeded inputs in [-1, 1] (float32 inputs
// only) with `delegate` (null: reference kernels).
RunResult RunModel(const runtime::Model& model, runtime::Delegate* delegate, bool invoke = true) {
  RunResult r;
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(model, resolver);
  if (delegate != nullptr) interpreter.AddDelegate(delegate);
  r.status = interpreter.AllocateTensors();
  if (!r.status.ok()) return r;
  r.placement = interpreter.placement();
  r.invoked_nodes = interpreter.invoked_nodes_size();
  if (!invoke) return r;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (runtime::Tensor* t : interpreter.inputs()) {
    if (t->dtype != runtime::DType::kFloat32) {
      r.status = Status::Error("input is " + runtime::DescribeTensor(*t));
      return r;
    }
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data_as<float>()[i] = u(rng);
  }
  r.status = interpreter.Invoke();
  for (const runtime::Tensor* t : interpreter.outputs()) {
    r.outputs.emplace_back(t->data_as<float>(), t->data_as<float>() + t->num_elements());
  }
  return r;
}

std::unique_ptr<runtime::Model> Load(const ModelBuilder& b, const std::string& name) {
  std::vector<uint8_t> bytes = b.Build();
  std::unique_ptr<runtime::Model> model;
  Status s = runtime::Model::FromBuffer(name, bytes, &model);
  EXPECT_TRUE(s.ok()) << s.message();
  return model;
}

// x [1,6,6,2] -> CONV_2D 3x3 SAME -> TANH -> CONV_2D 3x3 SAME -> out
ModelBuilder ConvTanhConv() {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "x");
  std::vector<float> w(3 * 3 * 3 * 2), bias = {0.1f, -0.2f, 0.3f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  const int f1 = b.AddConstFloat32({3, 3, 3, 2}, w);
  const int b1 = b.AddConstFloat32({3}, bias);
  std::vector<float> w2(2 * 3 * 3 * 3);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = std::cos(static_cast<float>(i));
  const int f2 = b.AddConstFloat32({2, 3, 3, 3}, w2);
  const int b2 = b.AddConstFloat32({2}, {0.5f, -0.5f});
  const int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "out");
  Conv2DParams same{tfl::Padding::SAME};
  b.AddConv2D(x, f1, b1, t1, same);
  b.AddUnary(tfl::BuiltinOperator::TANH, t1, t2);
  b.AddConv2D(t2, f2, b2, out, same);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

void ExpectNear(const std::vector<std::vector<float>>& got,
                const std::vector<std::vector<float>>& want, double abs, double rel,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].size(), want[o].size()) << what;
    int bad = 0;
    for (size_t i = 0; i < want[o].size(); ++i) {
      const double tol = abs + rel * std::fabs(want[o][i]);
      if (!(std::fabs(got[o][i] - want[o][i]) <= tol) && bad++ < 3) {
        ADD_FAILURE() << what << " output " << o << " [" << i << "]: " << got[o][i]
                      << " vs reference " << want[o][i];
      }
    }
    EXPECT_EQ(bad, 0) << what << " output " << o;
  }
}

// Every op case of the shared catalog that xnnpack claims matches the
// reference kernels within the float32 tolerance; the ops it lacks are
// refused (worked out from XNNPACK 2022-02's header).
// Quantized cases are compared within conformance::kQuantizedSteps output
// steps. The refusals, each with the reason a user reads in the placement
// (quantized ones from probing this XNNPACK's subgraph API: no qs8/qu8
// average pooling, per-channel fully connected or deconvolution).
TEST(XnnpackDelegateTest, CatalogOpsMatchReferenceAndUnsupportedOnesAreRefused) {
  const std::map<std::string, std::string> refused = {
      {"TANH [1,5,7,3]", "TANH is not supported by xnnpack"},
      {"MEAN over C (not H,W)", "other than over H and W"},
      {"CONCATENATION axis 3", "this xnnpack has no concatenate node"},
      {"TRANSPOSE_CONV int8 per-channel 3x3 SAME s2 [1,4,4,2]->[1,8,8,3]",
       "quantized per channel along dimension 0 (xnnpack takes per-tensor ones only here)"},
      {"FULLY_CONNECTED int8 per-channel [2,8] x [4,8]",
       "quantized per channel along dimension 0 (xnnpack takes per-tensor ones only here)"},
      {"AVERAGE_POOL_2D int8 2x2 VALID s2 [1,6,6,3]",
       "AVERAGE_POOL_2D on quantized int8 tensors is not supported by xnnpack"},
      {"RELU int8 output rescaled [1,5,7,3]",
       "quantized input and output of different scales or zero points"},
  };
  const conformance::DelegateUnderTest xnn{"xnnpack", {}};
  int quantized_claimed = 0;
  for (const conformance::ConformanceCase& c : conformance::Catalog()) {
    const conformance::CaseResult r = conformance::RunCase(c, xnn);
    EXPECT_TRUE(r.pass) << c.name << ": " << r.error;
    const auto it = refused.find(c.name);
    EXPECT_EQ(r.claimed, it == refused.end()) << c.name << ": " << r.reason;
    if (!r.claimed && it != refused.end()) {
      EXPECT_THAT(r.reason, HasSubstr("xnnpack: ")) << c.name;
      EXPECT_THAT(r.reason, HasSubstr(it->second)) << c.name;
    }
    if (r.claimed && c.quantum > 0) {
      ++quantized_claimed;
      EXPECT_LE(r.max_steps, conformance::kQuantizedSteps) << c.name;
    }
  }
  EXPECT_GE(quantized_claimed, 20);
}

// int8 per-channel, as TFLite's converter writes a quantized network:
// x -> QUANTIZE -> CONV_2D 3x3 s2 RELU6 -> DEPTHWISE 3x3 RELU6 -> ADD (of
// the two) -> MEAN over H,W -> FULLY_CONNECTED (per tensor) -> DEQUANTIZE.
// A run-time int8 tensor quantized per tensor.
int AddInt8(ModelBuilder& b, std::vector<int32_t> shape, float scale, int64_t zero_point) {
  const int t = b.AddTensor(tfl::TensorType::INT8, std::move(shape));
  b.SetQuantization(t, scale, zero_point);
  return t;
}

ModelBuilder QuantizedNet() {
  using tfl::TensorType;
  ModelBuilder b;
  auto q = [&](std::vector<int32_t> shape, float scale, int64_t zp) {
    return AddInt8(b, std::move(shape), scale, zp);
  };
  auto weights = [&](std::vector<int32_t> shape, int channel_dim, std::vector<float> scales) {
    int64_t n = 1;
    for (int32_t d : shape) n *= d;
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 37 + 11) % 255 - 127);
    const int w = b.AddConstRaw(TensorType::INT8, shape, v);
    if (channel_dim < 0) {
      b.SetQuantization(w, scales[0], 0);
    } else {
      b.SetQuantization(w, scales, std::vector<int64_t>(scales.size(), 0), channel_dim);
    }
    return w;
  };
  auto bias = [&](int n, float scale) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (i * 97) % 400 - 200;
    const int t = b.AddConstInt32({n}, v);
    b.SetQuantization(t, scale, 0);
    return t;
  };
  const int x = b.AddTensor(TensorType::FLOAT32, {1, 16, 16, 3}, "x");
  const int xq = q({1, 16, 16, 3}, 1.0f / 128, 0);
  b.AddOperator(tfl::BuiltinOperator::QUANTIZE, {x}, {xq});
  const int c1 = q({1, 8, 8, 8}, 6.0f / 255, -128);
  b.AddConv2D(
      xq,
      weights({8, 3, 3, 3}, 0, {0.004f, 0.005f, 0.006f, 0.007f, 0.004f, 0.005f, 0.006f, 0.007f}),
      bias(8, 0.005f / 128), c1,
      {tfl::Padding::SAME, 2, 2, 1, 1, tfl::ActivationFunctionType::RELU6});
  const int c2 = q({1, 8, 8, 8}, 6.0f / 255, -128);
  b.AddDepthwiseConv2D(c1, weights({1, 3, 3, 8}, 3, std::vector<float>(8, 0.01f)),
                       bias(8, 0.01f * 6 / 255), c2,
                       {tfl::Padding::SAME, 1, 1, 1, 1, 1, tfl::ActivationFunctionType::RELU6});
  const int sum = q({1, 8, 8, 8}, 12.0f / 255, -128);
  b.AddBinary(tfl::BuiltinOperator::ADD, c1, c2, sum);
  const int mean = q({1, 8}, 12.0f / 255, -128);
  b.AddReducer(tfl::BuiltinOperator::MEAN, sum, b.AddConstInt32({2}, {1, 2}), mean, false);
  const int fc = q({1, 4}, 0.05f, 0);
  b.AddFullyConnected(mean, weights({4, 8}, -1, {0.01f}), bias(4, 0.01f * 12 / 255), fc);
  const int out = b.AddTensor(TensorType::FLOAT32, {1, 4}, "out");
  b.AddDequantize(fc, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

TEST(XnnpackDelegateTest, QuantizedNetworkRunsAsOnePartitionWithinTwoSteps) {
  auto model = Load(QuantizedNet(), "quantized_net.tflite");
  auto d = MakeXnnpack({{"threads", "2"}});
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(ref.status.ok()) << ref.status.message();
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ASSERT_EQ(got.placement.nodes.size(), 7u);
  for (const runtime::NodePlacement& n : got.placement.nodes) {
    EXPECT_EQ(n.delegate, "xnnpack") << "node " << n.node << " " << n.op << ": " << n.reason;
  }
  EXPECT_EQ(got.placement.partitions, 1);
  // The output's step is 0.05; the outputs must not all be clamped to one value.
  ExpectNear(got.outputs, ref.outputs, 2 * 0.05 + 1e-6, 0, "quantized net");
  std::set<float> distinct(ref.outputs[0].begin(), ref.outputs[0].end());
  EXPECT_GT(distinct.size(), 1u);
}

// Quantized parameters outside what XNNPACK accepts are refused at CheckNode
// with the reason (creating the runtime would fail), and the node runs on the
// CPU instead: an ADD whose input/output scale ratio is 512, a CONV_2D whose
// requantization scale input*filter/output is 300.
TEST(XnnpackDelegateTest, QuantizedParametersOutsideXnnpackLimitsFallBack) {
  using tfl::TensorType;
  ModelBuilder b;
  auto q = [&](std::vector<int32_t> shape, float scale, int64_t zp) {
    return AddInt8(b, std::move(shape), scale, zp);
  };
  const int x = q({1, 4, 4, 2}, 1.0f, 0);
  const int sum = q({1, 4, 4, 2}, 1.0f / 512, 0);
  b.AddBinary(tfl::BuiltinOperator::ADD, x, x, sum);
  const int w = b.AddConstRaw(TensorType::INT8, {2, 1, 1, 2}, {1, 2, 3, 4});
  b.SetQuantization(w, 3.0f, 0);
  const int conv = q({1, 4, 4, 2}, 0.01f, 0);
  b.AddConv2D(x, w, -1, conv, Conv2DParams{});
  b.SetInputs({x});
  b.SetOutputs({sum, conv});
  auto model = Load(b, "limits.tflite");
  auto d = MakeXnnpack();
  RunResult got = RunModel(*model, d.get(), /*invoke=*/false);
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ASSERT_EQ(got.placement.nodes.size(), 2u);
  EXPECT_EQ(got.placement.nodes[0].delegate, "cpu");
  EXPECT_THAT(got.placement.nodes[0].reason, HasSubstr("scale ratio input0/output 512"));
  EXPECT_EQ(got.placement.nodes[1].delegate, "cpu");
  EXPECT_THAT(got.placement.nodes[1].reason,
              HasSubstr("requantization scale input*weights/output 300"));
}

// fp16:true leaves quantized nodes on the CPU, saying so.
TEST(XnnpackDelegateTest, Fp16LeavesQuantizedNodesToTheCpu) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate({{"fp16", "true"}}, &d);
  if (!s.ok()) GTEST_SKIP() << s.message();
  auto model = Load(QuantizedNet(), "quantized_net.tflite");
  RunResult got = RunModel(*model, d.get(), /*invoke=*/false);
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.nodes[1].delegate, "cpu");
  EXPECT_THAT(got.placement.nodes[1].reason,
              HasSubstr("quantized CONV_2D is not run by xnnpack with fp16:true"));
}

TEST(XnnpackDelegateTest, PlacementShowsNodesOnXnnpackAndFallbackWithReason) {
  auto model = Load(ConvTanhConv(), "conv_tanh_conv.tflite");
  auto d = MakeXnnpack();
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ASSERT_EQ(got.placement.nodes.size(), 3u);
  EXPECT_EQ(got.placement.partitions, 2);
  EXPECT_EQ(got.placement.nodes[0].delegate, "xnnpack");
  EXPECT_EQ(got.placement.nodes[2].delegate, "xnnpack");
  EXPECT_EQ(got.placement.nodes[1].delegate, "cpu");
  EXPECT_EQ(got.placement.nodes[1].reason, "xnnpack: TANH is not supported by xnnpack");
  ExpectNear(got.outputs, ref.outputs, 1e-5, 1e-5, "conv-tanh-conv");
}

TEST(XnnpackDelegateTest, RequireFullDelegationRefusesAFallback) {
  auto model = Load(ConvTanhConv(), "conv_tanh_conv.tflite");
  auto d = MakeXnnpack({{"require_full_delegation", "true"}});
  RunResult got = RunModel(*model, d.get(), /*invoke=*/false);
  EXPECT_EQ(got.status.code(), StatusCode::kUnsupported) << got.status.message();
}

TEST(XnnpackDelegateTest, Float16DequantizeOfAnInputFallsBackWithReason) {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT16, {1, 4}, "x");
  const int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
  b.AddDequantize(x, y);
  b.AddUnary(tfl::BuiltinOperator::RELU, y, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  auto model = Load(b, "dequantize.tflite");
  auto d = MakeXnnpack();
  RunResult got = RunModel(*model, d.get(), /*invoke=*/false);
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.nodes[0].delegate, "cpu");
  EXPECT_THAT(got.placement.nodes[0].reason,
              HasSubstr("DEQUANTIZE from float16 is not supported by xnnpack"));
  EXPECT_EQ(got.placement.nodes[1].delegate, "xnnpack");
}

TEST(XnnpackDelegateTest, PreluTakesASlopeFoldedFromFloat16) {
  // x [1,4,4,3] -> PRELU(slope: DEQUANTIZE of float16 [3], folded at load)
  // -> PRELU(slope: the model input y [3], computed at run time) -> out.
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 3}, "x");
  const int y = b.AddTensor(tfl::TensorType::FLOAT32, {3}, "y");
  const int half = b.AddConstFloat16({3}, {0.25f, 0.5f, -0.125f}, "slope16");
  const int slope = b.AddTensor(tfl::TensorType::FLOAT32, {3}, "slope");
  const int mid = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 3}, "mid");
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 3}, "out");
  b.AddDequantize(half, slope);
  b.AddBinary(tfl::BuiltinOperator::PRELU, x, slope, mid);
  b.AddBinary(tfl::BuiltinOperator::PRELU, mid, y, out);
  b.SetInputs({x, y});
  b.SetOutputs({out});
  auto model = Load(b, "prelu16.tflite");
  auto d = MakeXnnpack();
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(ref.status.ok()) << ref.status.message();
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_TRUE(got.placement.nodes[0].folded);
  EXPECT_EQ(got.placement.nodes[1].delegate, "xnnpack") << got.placement.nodes[1].reason;
  EXPECT_EQ(got.placement.nodes[2].delegate, "cpu");
  EXPECT_EQ(got.placement.nodes[2].reason,
            "xnnpack: PRELU with an alpha computed at run time (xnnpack takes constant slopes)");
  ExpectNear(got.outputs, ref.outputs, 1e-6, 1e-6, "prelu with a float16 slope");
}

TEST(XnnpackDelegateTest, TwoThreadsGiveTheSameOutputsAsOne) {
  // Large enough that XNNPACK splits the work between threads.
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 32, 32, 16}, "x");
  std::vector<float> w(32 * 3 * 3 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i));
  const int f = b.AddConstFloat32({32, 3, 3, 16}, w);
  const int bias = b.AddConstFloat32({32}, std::vector<float>(32, 0.25f));
  const int t = b.AddTensor(tfl::TensorType::FLOAT32, {1, 32, 32, 32});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 16, 16, 32}, "out");
  b.AddConv2D(x, f, bias, t, Conv2DParams{tfl::Padding::SAME});
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, t, out,
              {tfl::Padding::VALID, 2, 2, 2, 2, tfl::ActivationFunctionType::RELU});
  b.SetInputs({x});
  b.SetOutputs({out});
  auto model = Load(b, "threads.tflite");
  auto one = MakeXnnpack({{"threads", "1"}});
  auto two = MakeXnnpack({{"threads", "2"}});
  RunResult r1 = RunModel(*model, one.get());
  RunResult r2 = RunModel(*model, two.get());
  RunResult ref = RunModel(*model, nullptr);
  ASSERT_TRUE(r1.status.ok() && r2.status.ok()) << r1.status.message() << r2.status.message();
  EXPECT_EQ(r2.placement.partitions, 1);
  ExpectNear(r2.outputs, r1.outputs, 1e-6, 1e-6, "threads:2 vs threads:1");
  ExpectNear(r1.outputs, ref.outputs, 1e-4, 1e-5, "threads:1 vs reference");
}

// Whether xnnpack takes node 0 of `model` (the reason why not).
Status CheckFirstNode(const runtime::Model& model, const runtime::Delegate& delegate) {
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(model, resolver);
  return delegate.CheckNode(interpreter.node(0));
}

TEST(XnnpackDelegateTest, OverflowingWindowGeometryIsDeclinedAndTheCpuRefusesIt) {
  // dilation_h_factor 2^31 - 1 on a 3x3 filter: the padding computed in int
  // wrapped, and XNNPACK was asked for a 32 TiB buffer. The delegate declines
  // the node; the CPU kernel's Prepare then refuses the model, so both paths
  // give the same model error.
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "x");
  const int f = b.AddConstFloat32({1, 3, 3, 1}, std::vector<float>(9, 1.0f));
  const int bias = b.AddConstFloat32({1}, {0.0f});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "out");
  Conv2DParams p{tfl::Padding::SAME};
  p.dilation_h = 2147483647;
  b.AddConv2D(x, f, bias, out, p);
  b.SetInputs({x});
  b.SetOutputs({out});
  auto model = Load(b, "dilation.tflite");
  auto d = MakeXnnpack();
  Status check = CheckFirstNode(*model, *d);
  EXPECT_EQ(check.code(), StatusCode::kUnsupported) << check.message();
  EXPECT_THAT(check.message(),
              HasSubstr("dilation_h_factor 2147483647 makes the effective filter height overflow"));
  RunResult cpu = RunModel(*model, nullptr, /*invoke=*/false);
  RunResult got = RunModel(*model, d.get(), /*invoke=*/false);
  EXPECT_EQ(cpu.status.code(), StatusCode::kError) << cpu.status.message();
  EXPECT_EQ(got.status.code(), StatusCode::kError) << got.status.message();
  EXPECT_EQ(got.status.message(), cpu.status.message());
}

TEST(XnnpackDelegateTest, PoolWindowLargerThanItsInputIsLeftToTheCpu) {
  // A 2^31 - 1 square SAME window over one pixel fits int32, but XNNPACK
  // walks every cell of a window, padding included; the CPU kernel clamps
  // the window to the input.
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 2}, "x");
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 2}, "out");
  b.AddPool2D(
      tfl::BuiltinOperator::MAX_POOL_2D, x, out,
      {tfl::Padding::SAME, 1, 1, 2147483647, 2147483647, tfl::ActivationFunctionType::NONE});
  b.SetInputs({x});
  b.SetOutputs({out});
  auto model = Load(b, "huge_window.tflite");
  auto d = MakeXnnpack();
  Status check = CheckFirstNode(*model, *d);
  EXPECT_EQ(check.code(), StatusCode::kUnsupported) << check.message();
  EXPECT_THAT(check.message(), HasSubstr("MAX_POOL_2D with a 2147483647x2147483647 window over a "
                                         "1x1 input"));
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.nodes[0].delegate, "cpu");
  ExpectNear(got.outputs, ref.outputs, 0.0, 0.0, "huge window");
}

TEST(XnnpackDelegateTest, CraftedShapesAreCheckedBeforeXnnpackSeesThem) {
  // Our kernels' Prepare checks every node before a delegate is offered it:
  // a shape the CPU path refuses is the same model error here (XNNPACK
  // trusted the declared shapes: out-of-bounds reads and writes), and a node
  // with an empty tensor (XNNPACK aborts) stays on the CPU, which gives
  // TFLite's empty result.
  for (testing::CraftedModel& crafted : testing::CraftedShapeModels()) {
    SCOPED_TRACE(crafted.name);
    auto model = Load(crafted.builder, crafted.name + ".tflite");
    auto d = MakeXnnpack();
    RunResult cpu = RunModel(*model, nullptr);
    RunResult got = RunModel(*model, d.get());
    if (!crafted.error.empty()) {
      EXPECT_EQ(cpu.status.code(), StatusCode::kError) << cpu.status.message();
      EXPECT_THAT(cpu.status.message(), HasSubstr(crafted.error));
      EXPECT_EQ(got.status.code(), StatusCode::kError) << got.status.message();
      EXPECT_EQ(got.status.message(), cpu.status.message());
      continue;
    }
    ASSERT_TRUE(cpu.status.ok()) << cpu.status.message();
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    EXPECT_EQ(got.placement.nodes[0].delegate, "cpu");
    EXPECT_THAT(got.placement.nodes[0].reason, HasSubstr("is empty"));
    ASSERT_EQ(got.outputs.size(), 1u);
    EXPECT_TRUE(got.outputs[0].empty());
  }
}

TEST(XnnpackDelegateTest, BadOptionsAreErrorsNamingTheOption) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate({{"threads", "0"}}, &d);
  EXPECT_EQ(s.code(), StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("'threads' has value '0'"));
  s = CreateXnnpackDelegate({{"fp16", "maybe"}}, &d);
  EXPECT_THAT(s.message(), HasSubstr("'fp16' has value 'maybe'"));
  s = CreateXnnpackDelegate({{"min_nodes_per_partition", "0"}}, &d);
  EXPECT_THAT(s.message(), HasSubstr("min_nodes_per_partition"));
}

// fp16 works where the CPU has float16 arithmetic and is refused, as
// unsupported, elsewhere; where it works, outputs are close to float32.
TEST(XnnpackDelegateTest, Fp16IsHonestAboutTheCpu) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate({{"fp16", "true"}}, &d);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("fp16 inference unsupported on this CPU"));
    GTEST_SKIP() << s.message();
  }
  auto model = Load(ConvTanhConv(), "conv_tanh_conv.tflite");
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.nodes[0].delegate, "xnnpack");
  ExpectNear(got.outputs, ref.outputs, 1e-2, 1e-2, "fp16");
  // Ops without a float16 kernel in this XNNPACK stay on the CPU.
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "x");
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "out");
  b.AddUnary(tfl::BuiltinOperator::HARD_SWISH, x, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  auto hs = Load(b, "hard_swish.tflite");
  RunResult fallback = RunModel(*hs, d.get());
  ASSERT_TRUE(fallback.status.ok()) << fallback.status.message();
  EXPECT_EQ(fallback.placement.nodes[0].delegate, "cpu");
  EXPECT_THAT(fallback.placement.nodes[0].reason, HasSubstr("no float16 kernel"));
}

// XNNPACK's fp16 rewrite asserts that a value a node reads is no external
// output (it aborted the runner on selfie_segmentation, where a tensor feeds
// both a CPU node and a node of the same partition): such an output is
// written to an internal value and copied out, so the graph stays one
// partition and matches float32.
TEST(XnnpackDelegateTest, Fp16PartitionOutputsReadInsideThePartitionAreCopiedOut) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate({{"fp16", "true"}}, &d);
  if (!s.ok()) GTEST_SKIP() << s.message();
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "x");
  std::vector<float> w(3 * 3 * 3 * 2);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.3f * std::sin(static_cast<float>(i));
  const int f1 = b.AddConstFloat32({3, 3, 3, 2}, w);
  const int f2 = b.AddConstFloat32({3, 3, 3, 3}, std::vector<float>(27 * 3, 0.1f));
  const int b1 = b.AddConstFloat32({3}, {0.1f, -0.2f, 0.3f});
  const int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3}, "t1");
  const int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3}, "t2");
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3}, "out");
  Conv2DParams same{tfl::Padding::SAME};
  b.AddConv2D(x, f1, b1, t1, same);
  b.AddConv2D(t1, f2, b1, t2, same);
  b.AddUnary(tfl::BuiltinOperator::RELU, t2, out);
  b.SetInputs({x});
  b.SetOutputs({t1, out});  // t1: a model output that the second CONV_2D reads
  auto model = Load(b, "output_read_inside.tflite");
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.partitions, 1);
  for (const runtime::NodePlacement& n : got.placement.nodes) {
    EXPECT_EQ(n.delegate, "xnnpack") << n.op << ": " << n.reason;
  }
  ExpectNear(got.outputs, ref.outputs, 1e-2, 1e-2, "fp16");
}

// Every corpus model with fp16:true: no abort, and each output within 10% of
// its range, whatever fell back. XNNPACK computes in float16 (11 significant
// bits, rounded at every layer); hand_landmark's small outputs (ranges 0.04
// to 0.5, differences of far larger values) are off by up to 5% of their range
// with seeded inputs, the others by under 1%.
TEST(XnnpackDelegateTest, Fp16CorpusModelsRunWithinTolerance) {
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate({{"fp16", "true"}}, &d);
  if (!s.ok()) GTEST_SKIP() << s.message();
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    SCOPED_TRACE(entry.path().filename().string());
    std::unique_ptr<runtime::Model> model;
    ASSERT_TRUE(runtime::Model::Load(entry.path().string(), &model).ok());
    RunResult ref = RunModel(*model, nullptr);
    RunResult got = RunModel(*model, d.get());
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    EXPECT_GT(got.placement.partitions, 0);
    ASSERT_EQ(got.outputs.size(), ref.outputs.size());
    for (size_t o = 0; o < ref.outputs.size(); ++o) {
      double range = 1e-3, err = 0;
      for (size_t i = 0; i < ref.outputs[o].size(); ++i) {
        range = std::max(range, std::fabs(double{ref.outputs[o][i]}));
        err = std::max(err, std::fabs(double{got.outputs[o][i]} - ref.outputs[o][i]));
      }
      EXPECT_LE(err, 0.1 * range) << "output " << o;
      std::printf("fp16 output %zu: max abs error %.3g (range %.3g)\n", o, err, range);
    }
  }
}

// The corpus (scripts/setup.sh fetches it): every node of each model that is
// not folded runs on xnnpack, in one partition, and the outputs match the
// reference kernels.
TEST(XnnpackDelegateTest, CorpusModelsRunOnXnnpackAndMatchReference) {
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    ++models;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    std::unique_ptr<runtime::Model> model;
    Status s = runtime::Model::Load(entry.path().string(), &model);
    ASSERT_TRUE(s.ok()) << s.message();
    auto d = MakeXnnpack({{"threads", "2"}});
    RunResult ref = RunModel(*model, nullptr);
    RunResult got = RunModel(*model, d.get());
    ASSERT_TRUE(ref.status.ok()) << ref.status.message();
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    for (const runtime::NodePlacement& n : got.placement.nodes) {
      EXPECT_TRUE(n.folded || n.delegate == "xnnpack")
          << "node " << n.node << " " << n.op << ": " << n.reason;
    }
    EXPECT_EQ(got.placement.partitions, 1);
    ExpectNear(got.outputs, ref.outputs, 1e-4, 1e-4, name);
  }
  if (models == 0) GTEST_SKIP() << "no .tflite files in " << dir;
}

// x [1,6,6,2] -> CONV_2D -> t1 -> MAX_POOL_2D 3x3 SAME -> t2; CONCATENATION
// of t2 and t1 along the height (this XNNPACK copies whole blocks only) ->
// CONV_2D -> out: one partition of four nodes, where the pool and the first
// conv write straight into the concatenation's output in the partition's
// runtime.
ModelBuilder ConvPoolConcatConv() {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "x");
  std::vector<float> w1(3 * 3 * 3 * 2), w2(2 * 3 * 3 * 3);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = std::cos(static_cast<float>(i));
  const int f1 = b.AddConstFloat32({3, 3, 3, 2}, w1);
  const int b1 = b.AddConstFloat32({3}, {0.1f, -0.2f, 0.3f});
  const int f2 = b.AddConstFloat32({2, 3, 3, 3}, w2);
  const int b2 = b.AddConstFloat32({2}, {0.5f, -0.5f});
  const int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int t3 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 12, 6, 3});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 12, 6, 2}, "out");
  b.AddConv2D(x, f1, b1, t1, Conv2DParams{tfl::Padding::SAME});
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, t1, t2,
              ::dfarm::testing::Pool2DParams{tfl::Padding::SAME, 1, 1, 3, 3});
  b.AddConcatenation({t2, t1}, t3, 1);
  b.AddConv2D(t3, f2, b2, out, Conv2DParams{tfl::Padding::SAME});
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

ModelBuilder PadConvRelu() { return ::dfarm::testing::PadConvReluAdd(); }

std::vector<uint8_t> ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// --profile's per-node times: each node of every partition gets one, and
// the node-by-node runtimes compute what the partition's runtime computes
// (conformance::RunNodeProfile; no verdict reads a clock).
TEST(XnnpackDelegateTest, ProfiledPartitionsTimeEveryNodeAndComputeTheSame) {
  const conformance::DelegateUnderTest xnn{"xnnpack", {}};
  conformance::NodeProfileResult r =
      conformance::RunNodeProfile(ConvPoolConcatConv().Build(), "concat.tflite", xnn);
  EXPECT_TRUE(r.pass) << r.error;
  EXPECT_TRUE(r.supported);
  EXPECT_EQ(r.partitions, 1);
  EXPECT_EQ(r.timed_nodes, 4);
  r = conformance::RunNodeProfile(PadConvRelu().Build(), "fused.tflite", xnn);
  EXPECT_TRUE(r.pass) << r.error;
  EXPECT_EQ(r.timed_nodes, 5);
  for (const conformance::PartitionCase& c : conformance::PartitionCatalog()) {
    SCOPED_TRACE(c.name);
    r = conformance::RunNodeProfile(c.model, "partition.tflite", xnn);
    EXPECT_TRUE(r.pass) << r.error;
    EXPECT_EQ(r.timed_nodes, r.delegated_nodes);
  }
  r = conformance::RunNodeProfile(ConvPoolConcatConv().Build(), "concat.tflite",
                                  {"xnnpack", {{"threads", "2"}}});
  EXPECT_TRUE(r.pass) << r.error;
}

TEST(XnnpackDelegateTest, ProfiledCorpusModelsTimeEveryNodeAndComputeTheSame) {
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    ++models;
    SCOPED_TRACE(entry.path().filename().string());
    // A whole model's tolerance, as CorpusModelsRunOnXnnpackAndMatchReference's:
    // rounding differences add up over the layers.
    const conformance::NodeProfileResult r =
        conformance::RunNodeProfile(ReadBytes(entry.path()), entry.path().filename().string(),
                                    {"xnnpack", {}}, conformance::Tolerance{1e-4, 1e-4});
    EXPECT_TRUE(r.pass) << r.error;
    EXPECT_GT(r.timed_nodes, 0);
    EXPECT_EQ(r.timed_nodes, r.delegated_nodes);
  }
  if (models == 0) GTEST_SKIP() << "no .tflite files in " << dir;
}

// The node times split one profiled run on the host's steady clock: each
// runs from the previous node's end to its own, so together they take no
// more than the call, timed around it on the same clock. The nodes fused
// into another's runtime (PAD, RELU, RELU6) read exactly 0.
TEST(XnnpackDelegateTest, NodeTimesSplitTheProfiledRun) {
  auto model = Load(PadConvRelu(), "fused.tflite");
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  auto d = MakeXnnpack();
  ASSERT_TRUE(d->EnableProfiling().ok());
  runtime::Interpreter interpreter(*model, resolver);
  interpreter.AddDelegate(d.get());
  ASSERT_TRUE(interpreter.AllocateTensors().ok());
  std::fill_n(interpreter.inputs()[0]->data_as<float>(), interpreter.inputs()[0]->num_elements(),
              0.5f);
  std::vector<double> node_us;
  ASSERT_TRUE(interpreter.InvokeStepProfiled(0, &node_us).ok());  // builds the runtimes
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(interpreter.InvokeStepProfiled(0, &node_us).ok());
    const double call_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(node_us.size(), 5u);
    double sum = 0;
    for (double us : node_us) sum += us;
    EXPECT_LE(sum, call_us + 1e-6);
    EXPECT_GT(node_us[1], 0.0);  // CONV_2D: a runtime's call
    EXPECT_GT(node_us[3], 0.0);  // ADD
    EXPECT_EQ(node_us[0], 0.0);
    EXPECT_EQ(node_us[2], 0.0);
    EXPECT_EQ(node_us[4], 0.0);
  }
}

// Without EnableProfiling() a partition is timed only as a whole; a CPU step
// has no nodes inside to time.
TEST(XnnpackDelegateTest, NodeTimesOnlyWhenProfilingWasEnabled) {
  auto model = Load(ConvTanhConv(), "conv_tanh_conv.tflite");
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  auto d = MakeXnnpack();
  runtime::Interpreter interpreter(*model, resolver);
  interpreter.AddDelegate(d.get());
  ASSERT_TRUE(interpreter.AllocateTensors().ok());
  std::vector<double> node_us;
  EXPECT_EQ(interpreter.InvokeStepProfiled(0, &node_us).code(), StatusCode::kUnsupported);
  EXPECT_EQ(interpreter.InvokeStepProfiled(1, &node_us).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dfarm::delegates
