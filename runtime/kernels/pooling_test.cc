#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

std::vector<float> RunPool(tfl::BuiltinOperator code, const std::vector<float>& input,
                           std::vector<int32_t> in_shape, std::vector<int32_t> out_shape,
                           const Pool2DParams& p) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddPool2D(code, in, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, input));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output(0);
}

std::vector<float> Iota16(float sign) {
  std::vector<float> v(16);
  std::iota(v.begin(), v.end(), 1.0f);
  for (float& x : v) x *= sign;
  return v;
}

TEST(MaxPool2DTest, Valid2x2Stride2) {
  Pool2DParams p;
  p.filter_h = p.filter_w = 2;
  p.stride_h = p.stride_w = 2;
  EXPECT_THAT(RunPool(tfl::BuiltinOperator::MAX_POOL_2D, Iota16(1), {1, 4, 4, 1}, {1, 2, 2, 1}, p),
              ElementsAre(6, 8, 14, 16));
}

TEST(MaxPool2DTest, SamePaddingIsNotAValue) {
  // All inputs negative: if padded cells counted as 0, the max would be 0.
  Pool2DParams p;
  p.padding = tfl::Padding::SAME;
  p.filter_h = p.filter_w = 3;
  p.stride_h = p.stride_w = 2;
  EXPECT_THAT(RunPool(tfl::BuiltinOperator::MAX_POOL_2D, Iota16(-1), {1, 4, 4, 1}, {1, 2, 2, 1}, p),
              ElementsAre(-1, -3, -9, -11));
}

TEST(MaxPool2DTest, FusedRelu) {
  Pool2DParams p;
  p.filter_h = p.filter_w = 2;
  p.stride_h = p.stride_w = 2;
  p.activation = tfl::ActivationFunctionType::RELU;
  EXPECT_THAT(RunPool(tfl::BuiltinOperator::MAX_POOL_2D, Iota16(-1), {1, 4, 4, 1}, {1, 2, 2, 1}, p),
              ElementsAre(0, 0, 0, 0));
}

// 2x2 and 3x3 windows, max and average, with and without padding (whole
// windows take their own loop, edge windows the general one), 4x4, 5x5 and
// the whole 7x6 input (the general loop: blocks of 16 channels in registers),
// 20 channels (a 16-channel block and a tail), NaN, -0.0 and a RELU6: each
// output has the bits of the plain per-cell loop written here.
TEST(Pool2DTest, WholeAndEdgeWindowsMatchAPlainLoopBitForBit) {
  const int h = 7, w = 6, c = 20;
  std::vector<float> input(h * w * c);
  for (size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<float>((i * 7919) % 23) * 0.37f - 4.0f;
  }
  input[5] = std::nanf("");
  input[c + 6] = -0.0f;
  input[3 * w * c + 2 * c + 7] = std::nanf("");
  for (tfl::BuiltinOperator code :
       {tfl::BuiltinOperator::MAX_POOL_2D, tfl::BuiltinOperator::AVERAGE_POOL_2D}) {
    for (auto [kh, kw] : {std::pair{2, 2}, {3, 3}, {4, 4}, {5, 5}, {h, w}}) {
      for (tfl::Padding padding : {tfl::Padding::VALID, tfl::Padding::SAME}) {
        Pool2DParams p;
        p.filter_h = kh;
        p.filter_w = kw;
        p.stride_h = 1;
        p.stride_w = 2;
        p.padding = padding;
        p.activation = tfl::ActivationFunctionType::RELU6;
        const bool same = padding == tfl::Padding::SAME;
        const int out_h = same ? h : h - kh + 1, out_w = same ? (w + 1) / 2 : (w - kw) / 2 + 1;
        const int pad_top = same ? (kh - 1) / 2 : 0;
        const int pad_left = same ? std::max((out_w - 1) * 2 + kw - w, 0) / 2 : 0;
        SCOPED_TRACE(std::to_string(kh) + "x" + std::to_string(kw) + (same ? " SAME " : " VALID ") +
                     std::to_string(static_cast<int>(code)));
        const std::vector<float> got = RunPool(code, input, {1, h, w, c}, {1, out_h, out_w, c}, p);
        ASSERT_EQ(got.size(), static_cast<size_t>(out_h * out_w * c));
        for (int oy = 0; oy < out_h; ++oy) {
          for (int ox = 0; ox < out_w; ++ox) {
            for (int ch = 0; ch < c; ++ch) {
              const bool max = code == tfl::BuiltinOperator::MAX_POOL_2D;
              float v = max ? -std::numeric_limits<float>::infinity() : 0.0f;
              int count = 0;
              for (int ky = 0; ky < kh; ++ky) {
                for (int kx = 0; kx < kw; ++kx) {
                  const int y = oy - pad_top + ky, x = ox * 2 - pad_left + kx;
                  if (y < 0 || y >= h || x < 0 || x >= w) continue;
                  const float px = input[(y * w + x) * c + ch];
                  v = max ? (px > v ? px : v) : v + px;
                  ++count;
                }
              }
              if (!max) v *= 1.0f / static_cast<float>(count);
              v = std::min(std::max(v, 0.0f), 6.0f);
              const float actual = got[(oy * out_w + ox) * c + ch];
              EXPECT_EQ(std::memcmp(&actual, &v, sizeof v), 0)
                  << "at " << oy << "," << ox << "," << ch << ": " << actual << " vs " << v;
            }
          }
        }
      }
    }
  }
}

TEST(AveragePool2DTest, SameCountsOnlyRealCells) {
  // Window (0,1) covers rows 0..2, cols 2..3: (3+4+7+8+11+12)/6 = 7.5.
  Pool2DParams p;
  p.padding = tfl::Padding::SAME;
  p.filter_h = p.filter_w = 3;
  p.stride_h = p.stride_w = 2;
  EXPECT_THAT(
      RunPool(tfl::BuiltinOperator::AVERAGE_POOL_2D, Iota16(1), {1, 4, 4, 1}, {1, 2, 2, 1}, p),
      Pointwise(FloatNear(1e-5), {6.0f, 7.5f, 12.0f, 13.5f}));
}

// --- crafted geometry ------------------------------------------------------

constexpr int kInt32Max = 2147483647;

// A pool over `in_shape` declared to give `out_shape`; Init's status.
runtime::Status InitPool(tfl::BuiltinOperator code, std::vector<int32_t> in_shape,
                         std::vector<int32_t> out_shape, const Pool2DParams& p) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
  b.AddPool2D(code, in, out, p);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  return runner.Init(b);
}

TEST(MaxPool2DTest, FilterOfInt32MaxIsRefusedInPrepare) {
  // The last SAME window ends at (4 - 1) * 1 + 2^31 - 1, past int32; the
  // float loop used to walk all 2^31 rows of every window (a hang).
  for (auto code : {tfl::BuiltinOperator::MAX_POOL_2D, tfl::BuiltinOperator::AVERAGE_POOL_2D}) {
    const std::string op = tfl::EnumNameBuiltinOperator(code);
    Pool2DParams p;
    p.padding = tfl::Padding::SAME;
    p.filter_h = kInt32Max;
    runtime::Status status = InitPool(code, {1, 4, 4, 1}, {1, 4, 4, 1}, p);
    EXPECT_EQ(status.code(), runtime::StatusCode::kError) << op;
    EXPECT_THAT(status.message(), HasSubstr("node 0 (" + op + "): filter_height 2147483647"));
    EXPECT_THAT(status.message(), HasSubstr("makes the padded input height overflow"));
    p.filter_h = 2;
    p.filter_w = kInt32Max;
    status = InitPool(code, {1, 4, 4, 1}, {1, 4, 4, 1}, p);
    EXPECT_EQ(status.code(), runtime::StatusCode::kError) << op;
    EXPECT_THAT(status.message(), HasSubstr("filter_width 2147483647 with stride_w 1 makes the "
                                            "padded input width overflow"));
  }
}

TEST(MaxPool2DTest, StrideOfInt32MaxIsOneWindow) {
  // in + stride overflowed int: VALID computed 0 rows (or UB) instead of 1.
  Pool2DParams p;
  p.filter_h = p.filter_w = 2;
  p.stride_h = p.stride_w = kInt32Max;
  EXPECT_THAT(RunPool(tfl::BuiltinOperator::MAX_POOL_2D, Iota16(1), {1, 4, 4, 1}, {1, 1, 1, 1}, p),
              ElementsAre(6));
  p.padding = tfl::Padding::SAME;
  EXPECT_THAT(
      RunPool(tfl::BuiltinOperator::AVERAGE_POOL_2D, Iota16(1), {1, 4, 4, 1}, {1, 1, 1, 1}, p),
      ElementsAre(3.5f));
}

// Runs `code` with 2^30 x 2^30 SAME windows over [1,3,3,1] (they fit int32)
// in a child process that SIGALRM kills after 10 s; exits 0 when every
// output is `expected`.
void RunHugeWindowWithin10s(tfl::BuiltinOperator code, float expected) {
  Pool2DParams p;
  p.padding = tfl::Padding::SAME;
  p.filter_h = p.filter_w = 1 << 30;
  alarm(10);
  std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> got = RunPool(code, in, {1, 3, 3, 1}, {1, 3, 3, 1}, p);
  bool all = got.size() == 9;
  for (float v : got) all = all && v == expected;
  std::exit(all ? 0 : 1);
}

TEST(MaxPool2DTest, HugeWindowIsClampedToTheInputInTheFloatPathToo) {
  // As TFLite's reference pools (float and integer alike) do: the window is
  // clamped to the input, so each of these windows reads the 9 cells only.
  // The float loop walked all 2^30 rows and columns of each window instead.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunHugeWindowWithin10s(tfl::BuiltinOperator::MAX_POOL_2D, 9.0f),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(RunHugeWindowWithin10s(tfl::BuiltinOperator::AVERAGE_POOL_2D, 5.0f),
              ::testing::ExitedWithCode(0), "");
}

// Found by runtime/fuzz's options fuzzer: a zero-element input with a batch
// of 2^31-1 ([2^31-1,1,0,1]) passed Prepare and Eval walked every batch (tens
// of seconds under the sanitizers); with nothing to write it returns at once.
void RunZeroElementPoolWithin10s(tfl::BuiltinOperator code) {
  Pool2DParams p;
  p.padding = tfl::Padding::SAME;
  p.stride_h = p.stride_w = p.filter_h = p.filter_w = 0x7fffffff;
  alarm(10);
  std::vector<float> got = RunPool(code, {}, {0x7fffffff, 1, 0, 1}, {0x7fffffff, 1, 0, 1}, p);
  std::_Exit(got.empty() ? 0 : 1);
}

TEST(MaxPool2DTest, ZeroElementsWithAHugeBatchReturnAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunZeroElementPoolWithin10s(tfl::BuiltinOperator::MAX_POOL_2D),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(RunZeroElementPoolWithin10s(tfl::BuiltinOperator::AVERAGE_POOL_2D),
              ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dfarm::testing
