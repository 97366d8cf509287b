// The fast float32 depthwise convolution (depthwise_conv_float.h) against
// plain loops written here in the reference kernel's order (bias, then the
// in-bounds taps row-major, then the clamp): results must be bitwise equal,
// on random shapes of every covered case and on edge cases.
#include "runtime/kernels/depthwise_conv_float.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

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

std::vector<float> PlainLoops(const DepthwiseFloatParams& p, const std::vector<float>& in,
                              const std::vector<float>& filter, const float* bias) {
  std::vector<float> out(static_cast<size_t>(p.batches) * p.out_h * p.out_w * p.out_c);
  for (int n = 0; n < p.batches; ++n) {
    for (int oy = 0; oy < p.out_h; ++oy) {
      for (int ox = 0; ox < p.out_w; ++ox) {
        for (int c = 0; c < p.out_c; ++c) {
          float acc = bias != nullptr ? bias[c] : 0.0f;
          for (int ky = 0; ky < p.kernel_h; ++ky) {
            const int iy = oy * p.stride_h - p.pad_top + ky;
            if (iy < 0 || iy >= p.in_h) continue;
            for (int kx = 0; kx < p.kernel_w; ++kx) {
              const int ix = ox * p.stride_w - p.pad_left + kx;
              if (ix < 0 || ix >= p.in_w) continue;
              acc += in[((static_cast<size_t>(n) * p.in_h + iy) * p.in_w + ix) * p.in_c + c] *
                     filter[(static_cast<size_t>(ky) * p.kernel_w + kx) * p.out_c + c];
            }
          }
          out[((static_cast<size_t>(n) * p.out_h + oy) * p.out_w + ox) * p.out_c + c] =
              std::min(std::max(acc, p.act_min), p.act_max);
        }
      }
    }
  }
  return out;
}

std::vector<float> Random(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs the fast kernel and the plain loops on random data, with and without
// bias, and expects bitwise equal outputs.
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
    const std::vector<float> expected = PlainLoops(p, in, filter, b);
    // Poisoned, so an output the kernel does not write shows up.
    std::vector<float> actual(expected.size(), std::numeric_limits<float>::quiet_NaN());
    runtime::RunDepthwiseFloat(plan, in.data(), filter.data(), b, actual.data());
    ASSERT_EQ(std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)), 0)
        << what << (b != nullptr ? " with bias" : " without bias");
  }
}

TEST(DepthwiseConvFloatTest, RandomShapesMatchPlainLoopsBitwise) {
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

TEST(DepthwiseConvFloatTest, EdgeCasesMatchPlainLoopsBitwise) {
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

}  // namespace
}  // namespace dfarm::testing
