// The fast float32 depthwise convolution (depthwise_conv_float.h) against
// plain loops written here in the reference kernel's order (bias, then the
// in-bounds taps row-major, then the clamp), on random shapes of every
// covered case and on edge cases: each output within 1e-5 of the sum of the
// magnitudes behind it (the fast kernel may round each step once, with FMA).
// The 512-bit variant (kernel_clones.h, where the CPU has x86-64-v4) against
// the x86-64-v3 clone, bit for bit. Then DEPTHWISE_CONV_2D's default kernel against
// RegisterDepthwiseConv2DReference() on single-op models, covered and
// uncovered nodes.
#include "runtime/kernels/depthwise_conv_float.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/interpreter.h"
#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/parallel.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/graph_runner.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {
namespace {

using runtime::DepthwiseFloatParams;
using runtime::DepthwiseFloatPlan;

constexpr float kInf = std::numeric_limits<float>::infinity();

// SAME (pad_total split with the smaller half first) or VALID, as TFLite.
void SetAxis(bool same, int in, int k, int stride, int* out, int* pad) {
  *out = same ? (in + stride - 1) / stride : (in - k + stride) / stride;
  *pad = same ? std::max((*out - 1) * stride + k - in, 0) / 2 : 0;
}

DepthwiseFloatParams MakeParams(int n, int h, int w, int c, int k, int stride_h, int stride_w,
                                bool same, float lo, float hi) {
  DepthwiseFloatParams p;
  p.batches = n;
  p.in_h = h;
  p.in_w = w;
  p.in_c = p.out_c = c;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = stride_h;
  p.stride_w = stride_w;
  SetAxis(same, h, k, stride_h, &p.out_h, &p.pad_top);
  SetAxis(same, w, k, stride_w, &p.out_w, &p.pad_left);
  p.act_min = lo;
  p.act_max = hi;
  return p;
}

// The outputs, and in `scale_out` each output's |bias| + sum |x * w|.
std::vector<float> PlainLoops(const DepthwiseFloatParams& p, const std::vector<float>& in,
                              const std::vector<float>& filter, const float* bias,
                              std::vector<float>* scale_out) {
  std::vector<float> out(static_cast<size_t>(p.batches) * p.out_h * p.out_w * p.out_c);
  scale_out->assign(out.size(), 0.0f);
  for (int n = 0; n < p.batches; ++n) {
    for (int oy = 0; oy < p.out_h; ++oy) {
      for (int ox = 0; ox < p.out_w; ++ox) {
        for (int c = 0; c < p.out_c; ++c) {
          float acc = bias != nullptr ? bias[c] : 0.0f;
          float scale = std::fabs(acc);
          for (int ky = 0; ky < p.kernel_h; ++ky) {
            const int iy = oy * p.stride_h - p.pad_top + ky;
            if (iy < 0 || iy >= p.in_h) continue;
            for (int kx = 0; kx < p.kernel_w; ++kx) {
              const int ix = ox * p.stride_w - p.pad_left + kx;
              if (ix < 0 || ix >= p.in_w) continue;
              const float product =
                  in[((static_cast<size_t>(n) * p.in_h + iy) * p.in_w + ix) * p.in_c + c] *
                  filter[(static_cast<size_t>(ky) * p.kernel_w + kx) * p.out_c + c];
              acc += product;
              scale += std::fabs(product);
            }
          }
          const size_t o = ((static_cast<size_t>(n) * p.out_h + oy) * p.out_w + ox) * p.out_c + c;
          out[o] = std::min(std::max(acc, p.act_min), p.act_max);
          (*scale_out)[o] = scale;
        }
      }
    }
  }
  return out;
}

// A context of 3 threads (no scratch: the kernel needs none), for all tests.
ThreadedContext& ThreeThreads() {
  static ThreadedContext* threaded = new ThreadedContext();
  return *threaded;
}

std::vector<float> Random(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs the fast kernel and the plain loops on random data, with and without
// bias, and expects every output within 1e-5 of its scale.
void ExpectSameAsPlainLoops(const DepthwiseFloatParams& p, std::mt19937& rng) {
  std::ostringstream description;
  description << "n" << p.batches << " " << p.in_h << "x" << p.in_w << "x" << p.in_c << " k"
              << p.kernel_h << " s" << p.stride_h << "," << p.stride_w << " pad " << p.pad_top
              << "," << p.pad_left << " act [" << p.act_min << ", " << p.act_max << "]";
  const std::string what = description.str();
  const DepthwiseFloatPlan plan = runtime::PlanDepthwiseFloat(p);
  ASSERT_TRUE(plan.covered()) << what;
  ASSERT_GT(p.out_h, 0) << what;
  ASSERT_GT(p.out_w, 0) << what;
  const std::vector<float> in =
      Random(rng, static_cast<size_t>(p.batches) * p.in_h * p.in_w * p.in_c);
  const std::vector<float> filter =
      Random(rng, static_cast<size_t>(p.kernel_h) * p.kernel_w * p.in_c);
  const std::vector<float> bias = Random(rng, p.in_c);
  for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
    std::vector<float> scale;
    const std::vector<float> expected = PlainLoops(p, in, filter, b, &scale);
    // Poisoned, so an output the kernel does not write shows up.
    std::vector<float> actual(expected.size(), std::numeric_limits<float>::quiet_NaN());
    runtime::RunDepthwiseFloat(plan, in.data(), filter.data(), b, actual.data());
    for (size_t i = 0; i < actual.size(); ++i) {
      ASSERT_NEAR(actual[i], expected[i], 1e-5f * scale[i])
          << what << (b != nullptr ? " with bias" : " without bias") << " at " << i;
    }
    // Rows split across 3 threads: the same bits.
    std::vector<float> threaded(expected.size(), std::numeric_limits<float>::quiet_NaN());
    runtime::RunDepthwiseFloat(plan, in.data(), filter.data(), b, threaded.data(),
                               &ThreeThreads().context);
    ASSERT_EQ(std::memcmp(threaded.data(), actual.data(), actual.size() * sizeof(float)), 0)
        << what << ": 3 threads differ from 1";
  }
}

TEST(DepthwiseConvFloatTest, RandomShapesMatchPlainLoops) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> size(1, 13);
  const float ranges[][2] = {{-kInf, kInf}, {0.0f, kInf}, {0.0f, 6.0f}, {-1.0f, 1.0f}};
  int cases = 0;
  for (int k : {3, 5}) {
    for (int stride : {1, 2}) {
      for (bool same : {true, false}) {
        for (int c : {1, 3, 17, 64, 96, 576}) {
          const int n = 1 + cases % 2;
          const float* range = ranges[cases % 4];
          // VALID needs the input at least as large as the filter.
          const int h = size(rng) + (same ? 0 : k - 1), w = size(rng) + (same ? 0 : k - 1);
          ExpectSameAsPlainLoops(
              MakeParams(n, h, w, c, k, stride, stride, same, range[0], range[1]), rng);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 48);
}

TEST(DepthwiseConvFloatTest, EdgeCasesMatchPlainLoops) {
  std::mt19937 rng(18);
  for (int k : {3, 5}) {
    for (int stride : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "k" << k << " s" << stride);
      // Input smaller than the filter (SAME: no interior at all).
      ExpectSameAsPlainLoops(MakeParams(1, 2, 2, 24, k, stride, stride, true, -kInf, kInf), rng);
      ExpectSameAsPlainLoops(MakeParams(2, 1, 3, 7, k, stride, stride, true, 0.0f, 6.0f), rng);
      // 1x1 spatial, SAME; and VALID with the input exactly the filter size.
      ExpectSameAsPlainLoops(MakeParams(1, 1, 1, 32, k, stride, stride, true, 0.0f, kInf), rng);
      ExpectSameAsPlainLoops(MakeParams(2, k, k, 19, k, stride, stride, false, -kInf, kInf), rng);
      // Interior in one axis only, and different strides per axis.
      ExpectSameAsPlainLoops(MakeParams(1, 1, 40, 12, k, stride, 3 - stride, true, -kInf, kInf),
                             rng);
      ExpectSameAsPlainLoops(MakeParams(1, 30, 2, 28, k, 3 - stride, stride, true, -1.0f, 1.0f),
                             rng);
      // A MobileNet-sized layer: many interior pixels, every block width.
      ExpectSameAsPlainLoops(
          MakeParams(1, 28, 28, 16 + 8 + 4 + 3, k, stride, stride, true, 0.0f, 6.0f), rng);
    }
  }
}

// Restores the 512-bit kernels' setting when it goes out of scope.
class WideKernelsRestorer {
 public:
  WideKernelsRestorer() : saved_(runtime::WideKernelsSetting().load()) {}
  ~WideKernelsRestorer() { runtime::SetWideKernels(saved_); }

 private:
  bool saved_;
};

// The output of the fast kernel with the 512-bit variant allowed (`wide`) or
// not, on 1 or 3 threads.
std::vector<float> RunFast(const DepthwiseFloatPlan& plan, const std::vector<float>& in,
                           const std::vector<float>& filter, const float* bias, bool wide,
                           bool threaded) {
  runtime::SetWideKernels(wide);
  const DepthwiseFloatParams& p = plan.params;
  std::vector<float> out(static_cast<size_t>(p.batches) * p.out_h * p.out_w * p.out_c,
                         std::numeric_limits<float>::quiet_NaN());
  runtime::RunDepthwiseFloat(plan, in.data(), filter.data(), bias, out.data(),
                             threaded ? &ThreeThreads().context : nullptr);
  return out;
}

// Where the CPU has x86-64-v4 (WideKernels()), the 512-bit variant gives the
// x86-64-v3 clone's bits: channel counts with blocks of 64, 32 and 16 and
// remainders of 8 and fewer, borders, strides 1 and 2, 3x3 and 5x5, every
// clamp. Elsewhere both runs take the same path.
TEST(DepthwiseConvFloatTest, WideVariantMatchesNarrowBitForBit) {
  const WideKernelsRestorer restore;
  if (!runtime::WideKernels()) {
    std::printf("note: no 512-bit kernels here (not built in, or no x86-64-v4): one path only\n");
  }
  std::mt19937 rng(20);
  const float ranges[][2] = {{-kInf, kInf}, {0.0f, kInf}, {0.0f, 6.0f}, {-1.0f, 1.0f}};
  int cases = 0;
  for (int k : {3, 5}) {
    for (int stride : {1, 2}) {
      for (int c : {8, 12, 16, 17, 24, 32, 33, 48, 64, 72, 100, 128, 144}) {
        const bool same = cases % 3 != 0;
        const float* range = ranges[cases % 4];
        const int n = 1 + cases % 2;
        const int h = 3 + cases % 11 + (same ? 0 : k - 1), w = 5 + cases % 13 + (same ? 0 : k - 1);
        const DepthwiseFloatParams p = MakeParams(
            n, h, w, c, k, stride, cases % 5 == 4 ? 3 - stride : stride, same, range[0], range[1]);
        const DepthwiseFloatPlan plan = runtime::PlanDepthwiseFloat(p);
        ASSERT_TRUE(plan.covered());
        const std::vector<float> in = Random(rng, static_cast<size_t>(n) * h * w * c);
        const std::vector<float> filter = Random(rng, static_cast<size_t>(k) * k * c);
        const std::vector<float> bias = Random(rng, c);
        for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
          const std::vector<float> narrow = RunFast(plan, in, filter, b, false, false);
          for (bool threaded : {false, true}) {
            const std::vector<float> wide = RunFast(plan, in, filter, b, true, threaded);
            ASSERT_EQ(std::memcmp(wide.data(), narrow.data(), narrow.size() * sizeof(float)), 0)
                << "n" << n << " " << h << "x" << w << "x" << c << " k" << k << " s" << p.stride_h
                << "," << p.stride_w << (same ? " SAME" : " VALID") << " act [" << range[0] << ", "
                << range[1] << "]" << (b != nullptr ? " with bias" : " without bias")
                << (threaded ? ", 3 threads" : "");
          }
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 52);
}

// The late 5x5 layers of the hand models (few rows, many channels): the
// 512-bit variant holds each block's filter in registers and, on several
// threads, splits them by blocks of 16 channels instead of by pixels (16
// dividing the channels) or by pixels (not dividing: 40, 200). Every way
// gives the x86-64-v3 clone's bits.
TEST(DepthwiseConvFloatTest, LateWideLayersMatchNarrowBitForBit) {
  const WideKernelsRestorer restore;
  std::mt19937 rng(21);
  struct Shape {
    int h, w, c, stride;
  };
  for (const Shape& shape : std::vector<Shape>{
           {7, 7, 1152, 1}, {14, 14, 672, 2}, {14, 14, 480, 1}, {9, 5, 40, 1}, {6, 11, 200, 2}}) {
    const DepthwiseFloatParams p =
        MakeParams(1, shape.h, shape.w, shape.c, 5, shape.stride, shape.stride, true, 0.0f, 6.0f);
    const DepthwiseFloatPlan plan = runtime::PlanDepthwiseFloat(p);
    ASSERT_TRUE(plan.covered());
    const std::vector<float> in = Random(rng, static_cast<size_t>(shape.h) * shape.w * shape.c);
    const std::vector<float> filter = Random(rng, static_cast<size_t>(25) * shape.c);
    const std::vector<float> bias = Random(rng, shape.c);
    const std::vector<float> narrow = RunFast(plan, in, filter, bias.data(), false, false);
    std::vector<float> scale;
    const std::vector<float> plain = PlainLoops(p, in, filter, bias.data(), &scale);
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_NEAR(narrow[i], plain[i], 1e-5f * scale[i])
          << shape.h << "x" << shape.c << " at " << i;
    }
    for (bool threaded : {false, true}) {
      const std::vector<float> wide = RunFast(plan, in, filter, bias.data(), true, threaded);
      EXPECT_EQ(std::memcmp(wide.data(), narrow.data(), narrow.size() * sizeof(float)), 0)
          << shape.h << "x" << shape.w << "x" << shape.c << " s" << shape.stride
          << (threaded ? ", 3 threads" : ", 1 thread");
    }
  }
}

TEST(DepthwiseConvFloatTest, PlanRefusesUncoveredCases) {
  const DepthwiseFloatParams base = MakeParams(1, 8, 8, 4, 3, 1, 1, true, -kInf, kInf);
  EXPECT_TRUE(runtime::PlanDepthwiseFloat(base).covered());
  DepthwiseFloatParams p = base;
  p.dilation_h = 2;
  EXPECT_FALSE(runtime::PlanDepthwiseFloat(p).covered());
  p = base;
  p.dilation_w = 2;
  EXPECT_FALSE(runtime::PlanDepthwiseFloat(p).covered());
  p = base;
  p.out_c = 8;  // depth multiplier 2
  EXPECT_FALSE(runtime::PlanDepthwiseFloat(p).covered());
  p = base;
  p.kernel_w = 5;  // 3x5
  EXPECT_FALSE(runtime::PlanDepthwiseFloat(p).covered());
  p = base;
  p.kernel_h = p.kernel_w = 7;
  EXPECT_FALSE(runtime::PlanDepthwiseFloat(p).covered());
  p = base;
  p.kernel_h = p.kernel_w = 1;
  EXPECT_FALSE(runtime::PlanDepthwiseFloat(p).covered());
}

TEST(DepthwiseConvFloatTest, InteriorRanges) {
  // 3x3 SAME stride 1 on 8x8: pad 1, interior outputs 1..6.
  DepthwiseFloatPlan plan =
      runtime::PlanDepthwiseFloat(MakeParams(1, 8, 8, 4, 3, 1, 1, true, -kInf, kInf));
  EXPECT_EQ(plan.oy_begin, 1);
  EXPECT_EQ(plan.oy_end, 7);
  // 3x3 SAME stride 2 on 8x8: out 4, pad 0 (total 1), interior 0..2.
  plan = runtime::PlanDepthwiseFloat(MakeParams(1, 8, 8, 4, 3, 2, 2, true, -kInf, kInf));
  EXPECT_EQ(plan.ox_begin, 0);
  EXPECT_EQ(plan.ox_end, 3);
  // 5x5 SAME on 2x2: no interior.
  plan = runtime::PlanDepthwiseFloat(MakeParams(1, 2, 2, 4, 5, 1, 1, true, -kInf, kInf));
  EXPECT_EQ(plan.oy_begin, plan.oy_end);
  // VALID: everything is interior.
  plan = runtime::PlanDepthwiseFloat(MakeParams(1, 9, 9, 4, 5, 2, 2, false, -kInf, kInf));
  EXPECT_EQ(plan.ox_begin, 0);
  EXPECT_EQ(plan.ox_end, 3);
}

// Output of a one-node DEPTHWISE_CONV_2D model on `input`, with the default
// kernel or (reference) the plain loops.
std::vector<float> RunOp(const ModelBuilder& b, const std::vector<float>& input, bool reference) {
  KernelOverrides overrides;
  if (reference) {
    overrides = {
        {tfl::BuiltinOperator::DEPTHWISE_CONV_2D, runtime::RegisterDepthwiseConv2DReference()}};
  }
  GraphRunner runner;
  runtime::Status status = runner.Init(b, {}, overrides);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, input)) << "input size";
  status = runner.Invoke();
  EXPECT_TRUE(status.ok()) << status.message();
  return runner.Output<float>(0);
}

TEST(DepthwiseConvFloatTest, OpMatchesReferenceKernel) {
  std::mt19937 rng(19);
  using Act = tfl::ActivationFunctionType;
  struct Case {
    int n, h, w, c, k, stride, multiplier, dilation;
    tfl::Padding padding;
    Act act;
  };
  const Case cases[] = {
      {1, 12, 12, 24, 3, 1, 1, 1, tfl::Padding::SAME, Act::RELU6},      // fast
      {2, 11, 9, 17, 5, 2, 1, 1, tfl::Padding::SAME, Act::RELU},        // fast
      {1, 9, 10, 96, 3, 2, 1, 1, tfl::Padding::VALID, Act::NONE},       // fast
      {1, 3, 3, 3, 5, 1, 1, 1, tfl::Padding::SAME, Act::RELU_N1_TO_1},  // fast, no interior
      {1, 8, 8, 4, 3, 1, 2, 1, tfl::Padding::SAME, Act::NONE},          // multiplier 2: plain
      {1, 9, 9, 5, 3, 1, 1, 2, tfl::Padding::SAME, Act::RELU},          // dilation 2: plain
      {1, 7, 7, 6, 7, 1, 1, 1, tfl::Padding::SAME, Act::NONE},          // 7x7: plain
  };
  for (const Case& c : cases) {
    const int oc = c.c * c.multiplier;
    const int eff = (c.k - 1) * c.dilation + 1;
    const bool same = c.padding == tfl::Padding::SAME;
    const int oh = same ? (c.h + c.stride - 1) / c.stride : (c.h - eff + c.stride) / c.stride;
    const int ow = same ? (c.w + c.stride - 1) / c.stride : (c.w - eff + c.stride) / c.stride;
    for (bool with_bias : {true, false}) {
      ModelBuilder b;
      const int in = b.AddTensor(tfl::TensorType::FLOAT32, {c.n, c.h, c.w, c.c});
      const int filter = b.AddConstFloat32({1, c.k, c.k, oc}, Random(rng, c.k * c.k * oc));
      const int bias = with_bias ? b.AddConstFloat32({oc}, Random(rng, oc)) : -1;
      const int out = b.AddTensor(tfl::TensorType::FLOAT32, {c.n, oh, ow, oc});
      DepthwiseConv2DParams p;
      p.padding = c.padding;
      p.stride_h = p.stride_w = c.stride;
      p.depth_multiplier = c.multiplier;
      p.dilation_h = p.dilation_w = c.dilation;
      p.activation = c.act;
      b.AddDepthwiseConv2D(in, filter, bias, out, p);
      b.SetInputs({in});
      b.SetOutputs({out});
      const std::vector<float> input = Random(rng, static_cast<size_t>(c.n) * c.h * c.w * c.c);
      const std::vector<float> expected = RunOp(b, input, /*reference=*/true);
      const std::vector<float> actual = RunOp(b, input, /*reference=*/false);
      ASSERT_EQ(actual.size(), static_cast<size_t>(c.n) * oh * ow * oc);
      ASSERT_EQ(expected.size(), actual.size());
      // Inputs and weights in [-1, 1): sums of at most 26 terms of magnitude <= 1.
      for (size_t i = 0; i < actual.size(); ++i) {
        ASSERT_NEAR(actual[i], expected[i], 26 * 1e-5f)
            << c.h << "x" << c.w << "x" << c.c << " k" << c.k << " s" << c.stride << " m"
            << c.multiplier << " d" << c.dilation << (with_bias ? " with bias" : " without bias")
            << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace dfarm::testing
