// The direct 3-channel CONV_2D kernel (conv_hwc3_float.h) against plain
// double loops over many shapes, on 1 and 3 threads (the same bits), against
// the GEMM path's sums (the same bits where its AVX2/FMA kernel runs), its
// 512-bit variant against the x86-64-v3 clone (the same bits), and as
// CONV_2D's default kernel against the reference kernel.
#include "runtime/kernels/conv_hwc3_float.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "runtime/interpreter.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/parallel.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/graph_runner.h"
#include "tests/model_builder/model_builder.h"

// Its own namespace: the unity build joins this file with the depthwise one.
namespace dfarm::testing::conv_hwc3 {
namespace {

using runtime::ConvHwc3Params;
using runtime::ConvHwc3Plan;

constexpr float kInf = std::numeric_limits<float>::infinity();

// SAME (pad_total split with the smaller half first) or VALID, as TFLite.
void SetAxis(bool same, int in, int k, int stride, int* out, int* pad) {
  *out = same ? (in + stride - 1) / stride : (in - k + stride) / stride;
  *pad = same ? std::max((*out - 1) * stride + k - in, 0) / 2 : 0;
}

ConvHwc3Params MakeParams(int n, int h, int w, int out_c, int kh, int kw, int stride, bool same,
                          float lo, float hi) {
  ConvHwc3Params p;
  p.batches = n;
  p.in_h = h;
  p.in_w = w;
  p.out_c = out_c;
  p.kernel_h = kh;
  p.kernel_w = kw;
  p.stride_h = p.stride_w = stride;
  SetAxis(same, h, kh, stride, &p.out_h, &p.pad_top);
  SetAxis(same, w, kw, stride, &p.out_w, &p.pad_left);
  p.act_min = lo;
  p.act_max = hi;
  return p;
}

std::vector<float> Random(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

size_t OutputSize(const ConvHwc3Params& p) {
  return static_cast<size_t>(p.batches) * p.out_h * p.out_w * p.out_c;
}

// The convolution in double, taps outside the input skipped.
std::vector<float> Naive(const ConvHwc3Params& p, const std::vector<float>& in,
                         const std::vector<float>& filter, const std::vector<float>& bias) {
  std::vector<float> out(OutputSize(p));
  for (int n = 0; n < p.batches; ++n) {
    for (int oy = 0; oy < p.out_h; ++oy) {
      for (int ox = 0; ox < p.out_w; ++ox) {
        for (int oc = 0; oc < p.out_c; ++oc) {
          double acc = bias[oc];
          for (int ky = 0; ky < p.kernel_h; ++ky) {
            for (int kx = 0; kx < p.kernel_w; ++kx) {
              const int iy = oy * p.stride_h - p.pad_top + ky;
              const int ix = ox * p.stride_w - p.pad_left + kx;
              if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) continue;
              for (int c = 0; c < 3; ++c) {
                acc +=
                    double(in[((static_cast<size_t>(n) * p.in_h + iy) * p.in_w + ix) * 3 + c]) *
                    filter[((static_cast<size_t>(oc) * p.kernel_h + ky) * p.kernel_w + kx) * 3 + c];
              }
            }
          }
          acc = std::min<double>(std::max<double>(acc, p.act_min), p.act_max);
          out[((static_cast<size_t>(n) * p.out_h + oy) * p.out_w + ox) * p.out_c + oc] =
              static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

struct Shape {
  int n, h, w, kh, kw, stride;
  bool same;
};

const Shape kShapes[] = {
    {1, 17, 19, 3, 3, 2, true}, {1, 16, 16, 3, 3, 2, true},  {2, 9, 11, 3, 3, 1, true},
    {1, 13, 7, 3, 3, 1, false}, {1, 14, 15, 3, 3, 2, false}, {1, 2, 2, 3, 3, 1, true},
    {1, 1, 5, 3, 3, 2, true},   {1, 12, 10, 5, 5, 2, true},  {1, 8, 9, 1, 1, 1, false},
    {1, 10, 9, 3, 2, 1, true},  {1, 23, 21, 7, 7, 2, true},  {2, 6, 40, 3, 3, 3, true},
};

TEST(ConvHwc3FloatTest, MatchesPlainLoopsOnOneAndThreeThreads) {
  std::mt19937 rng(7);
  ::dfarm::testing::ThreadedContext threaded;
  for (const Shape& s : kShapes) {
    for (int out_c = 1; out_c <= 40; ++out_c) {
      const bool relu6 = out_c % 3 == 0;
      const ConvHwc3Params p = MakeParams(s.n, s.h, s.w, out_c, s.kh, s.kw, s.stride, s.same,
                                          relu6 ? 0.0f : -kInf, relu6 ? 6.0f : kInf);
      ASSERT_TRUE(runtime::ConvHwc3Supported(p));
      const std::vector<float> in = Random(rng, static_cast<size_t>(s.n) * s.h * s.w * 3);
      const std::vector<float> filter = Random(rng, static_cast<size_t>(out_c) * s.kh * s.kw * 3);
      const std::vector<float> bias = Random(rng, out_c);
      const ConvHwc3Plan plan = runtime::PlanConvHwc3(p, filter.data(), bias.data());
      // A guard value past the output catches writes past the last channel.
      std::vector<float> one(OutputSize(p) + 1, 123.0f), three(OutputSize(p) + 1, 123.0f);
      runtime::RunConvHwc3(plan, in.data(), one.data());
      runtime::RunConvHwc3(plan, in.data(), three.data(), &threaded.context);
      EXPECT_EQ(one.back(), 123.0f);
      one.pop_back();
      three.pop_back();
      const std::vector<float> want = Naive(p, in, filter, bias);
      for (size_t i = 0; i < want.size(); ++i) {
        // Inputs and weights in [-1, 1): at most 147 terms of magnitude <= 1.
        ASSERT_NEAR(one[i], want[i], 2e-5f * s.kh * s.kw * 3)
            << s.h << "x" << s.w << " k" << s.kh << "x" << s.kw << " s" << s.stride
            << (s.same ? " SAME" : " VALID") << " cout " << out_c << " at " << i;
        ASSERT_EQ(std::memcmp(&one[i], &three[i], sizeof(float)), 0)
            << "3 threads differ at " << i << " cout " << out_c;
      }
    }
  }
}

TEST(ConvHwc3FloatTest, RefusesWhatItDoesNotCover) {
  ConvHwc3Params p = MakeParams(1, 8, 8, 8, 3, 3, 1, true, -kInf, kInf);
  EXPECT_TRUE(runtime::ConvHwc3Supported(p));
  p.kernel_h = p.kernel_w = 10;  // 300 taps: more than one GEMM depth block
  EXPECT_FALSE(runtime::ConvHwc3Supported(p));
  p = MakeParams(1, 8, 8, 8, 3, 3, 1, true, -kInf, kInf);
  p.pad_left = -1;
  EXPECT_FALSE(runtime::ConvHwc3Supported(p));
}

// The GEMM path's product (im2col rows, zeros outside the input, times the
// OHWI filter with the bias and clamp in its epilogue) against the direct
// kernel: the same bits where the GEMM's AVX2/FMA kernel runs.
TEST(ConvHwc3FloatTest, SameBitsAsTheGemmPath) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "the GEMM's AVX2/FMA kernel does not run on this CPU";
  }
#else
  GTEST_SKIP() << "the GEMM runs Eigen's kernel here, which sums in another order";
#endif
  std::mt19937 rng(11);
  for (const Shape& s : kShapes) {
    for (int out_c : {5, 8, 16, 24, 32, 40}) {
      const ConvHwc3Params p =
          MakeParams(s.n, s.h, s.w, out_c, s.kh, s.kw, s.stride, s.same, 0.0f, 6.0f);
      const int depth = s.kh * s.kw * 3;
      const std::vector<float> in = Random(rng, static_cast<size_t>(s.n) * s.h * s.w * 3);
      const std::vector<float> filter = Random(rng, static_cast<size_t>(out_c) * depth);
      const std::vector<float> bias = Random(rng, out_c);
      const int64_t pixels = static_cast<int64_t>(s.n) * p.out_h * p.out_w;
      std::vector<float> patches(static_cast<size_t>(pixels) * depth, 0.0f);
      for (int64_t px = 0; px < pixels; ++px) {
        const int ox = static_cast<int>(px % p.out_w),
                  oy = static_cast<int>(px / p.out_w % p.out_h);
        const int64_t n = px / (static_cast<int64_t>(p.out_w) * p.out_h);
        for (int ky = 0; ky < s.kh; ++ky) {
          for (int kx = 0; kx < s.kw; ++kx) {
            const int iy = oy * s.stride - p.pad_top + ky, ix = ox * s.stride - p.pad_left + kx;
            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
            for (int c = 0; c < 3; ++c) {
              patches[px * depth + (ky * s.kw + kx) * 3 + c] =
                  in[((n * s.h + iy) * s.w + ix) * 3 + c];
            }
          }
        }
      }
      runtime::Gemm gemm;
      gemm.Plan(pixels, out_c, depth);
      gemm.SetConstantB({filter.data(), depth, true});
      std::vector<std::byte> workspace(gemm.workspace_bytes() + 64);
      std::byte* aligned = reinterpret_cast<std::byte*>(
          (reinterpret_cast<uintptr_t>(workspace.data()) + 63) & ~uintptr_t{63});
      // Every other case with a folded ADD of channels [1, Cout) (+0.0f in channel 0).
      const bool with_addend = out_c % 16 == 0;
      const std::vector<float> addend = Random(rng, static_cast<size_t>(pixels) * (out_c - 1));
      runtime::GemmEpilogue epilogue{bias.data(), 0.0f, 6.0f};
      runtime::ConvHwc3Addend hwc3_addend;
      if (with_addend) {
        epilogue.addend = addend.data();
        epilogue.addend_stride = out_c - 1;
        epilogue.addend_begin = 1;
        epilogue.addend_end = out_c;
        hwc3_addend = {addend.data(), 1, out_c};
      }
      std::vector<float> want(OutputSize(p));
      gemm.Run(pixels, out_c, depth, {patches.data(), depth, false}, {filter.data(), depth, true},
               want.data(), out_c, epilogue, aligned);
      const ConvHwc3Plan plan = runtime::PlanConvHwc3(p, filter.data(), bias.data());
      std::vector<float> got(OutputSize(p));
      runtime::RunConvHwc3(plan, in.data(), got.data(), nullptr, hwc3_addend);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
            << s.h << "x" << s.w << " k" << s.kh << "x" << s.kw << " s" << s.stride << " cout "
            << out_c << (with_addend ? " with addend" : "") << " at " << i << ": " << got[i]
            << " vs " << want[i];
      }
    }
  }
}

// Where the CPU has x86-64-v4 (WideKernels()), the 512-bit variant gives the
// x86-64-v3 clone's bits: blocks of 16 and 24 channels as Vec16 (+ Vec8),
// partial last blocks, a folded ADD, clamps, borders, on 1 and 3 threads.
// Elsewhere both runs take the same path.
TEST(ConvHwc3FloatTest, WideVariantMatchesNarrowBitForBit) {
  const bool saved = runtime::WideKernelsSetting().load();
  if (!runtime::WideKernels()) {
    std::printf("note: no 512-bit kernels here (not built in, or no x86-64-v4): one path only\n");
  }
  std::mt19937 rng(31);
  ::dfarm::testing::ThreadedContext threaded;
  int cases = 0;
  for (const Shape& s : kShapes) {
    for (int out_c : {8, 13, 16, 20, 24, 32, 37, 40, 48, 64, 72}) {
      const bool relu6 = cases % 2 == 0;
      const ConvHwc3Params p = MakeParams(s.n, s.h, s.w, out_c, s.kh, s.kw, s.stride, s.same,
                                          relu6 ? 0.0f : -kInf, relu6 ? 6.0f : kInf);
      const std::vector<float> in = Random(rng, static_cast<size_t>(s.n) * s.h * s.w * 3);
      const std::vector<float> filter = Random(rng, static_cast<size_t>(out_c) * s.kh * s.kw * 3);
      const std::vector<float> bias = Random(rng, out_c);
      const ConvHwc3Plan plan = runtime::PlanConvHwc3(p, filter.data(), bias.data());
      // Every third case with a folded ADD of channels [2, Cout - 1).
      const int64_t pixels = static_cast<int64_t>(s.n) * p.out_h * p.out_w;
      const std::vector<float> addend_values =
          Random(rng, static_cast<size_t>(pixels) * std::max(out_c - 3, 0));
      runtime::ConvHwc3Addend addend;
      if (cases % 3 == 0 && out_c > 3) addend = {addend_values.data(), 2, out_c - 1};
      const auto run = [&](bool wide, bool three) {
        runtime::SetWideKernels(wide);
        std::vector<float> out(OutputSize(p) + 1, 123.0f);
        runtime::RunConvHwc3(plan, in.data(), out.data(), three ? &threaded.context : nullptr,
                             addend);
        runtime::SetWideKernels(saved);
        return out;
      };
      const std::vector<float> narrow = run(false, false);
      for (bool three : {false, true}) {
        const std::vector<float> wide = run(true, three);
        ASSERT_EQ(std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)), 0)
            << s.h << "x" << s.w << " k" << s.kh << "x" << s.kw << " s" << s.stride
            << (s.same ? " SAME" : " VALID") << " cout " << out_c
            << (addend.data != nullptr ? " with addend" : "") << (three ? ", 3 threads" : "");
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 132);
}

// The model `b` through the interpreter on `threads` threads, its CONV_2D the
// direct kernel or (`reference`) the reference kernel: its first output for
// `inputs` (one per model input). `nodes` > 0: how many nodes must run after
// folding.
std::vector<float> RunOp(const ModelBuilder& b, const std::vector<std::vector<float>>& inputs,
                         bool reference, int threads, size_t nodes = 0) {
  std::unique_ptr<runtime::Model> model;
  runtime::Status status = runtime::Model::FromBuffer("conv.tflite", b.Build(), &model);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  if (reference) {
    resolver.AddBuiltin(tfl::BuiltinOperator::CONV_2D, runtime::RegisterConv2DReference());
  }
  runtime::InterpreterOptions options;
  options.num_threads = threads;
  runtime::Interpreter interpreter(*model, resolver, options);
  status = interpreter.AllocateTensors();
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  if (nodes > 0) {
    EXPECT_EQ(interpreter.invoked_nodes_size(), nodes) << "nodes after folding";
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::copy(inputs[i].begin(), inputs[i].end(), interpreter.inputs()[i]->data_as<float>());
  }
  status = interpreter.Invoke();
  EXPECT_TRUE(status.ok()) << status.message();
  const runtime::Tensor* o = interpreter.outputs()[0];
  return std::vector<float>(o->data_as<float>(), o->data_as<float>() + o->bytes / sizeof(float));
}

TEST(ConvHwc3FloatTest, OpMatchesReferenceKernel) {
  std::mt19937 rng(23);
  using Act = tfl::ActivationFunctionType;
  for (const Shape& s : kShapes) {
    for (int out_c : {3, 24, 33}) {
      const ConvHwc3Params p =
          MakeParams(s.n, s.h, s.w, out_c, s.kh, s.kw, s.stride, s.same, -kInf, kInf);
      ModelBuilder b;
      const int in = b.AddTensor(tfl::TensorType::FLOAT32, {s.n, s.h, s.w, 3});
      const int filter = b.AddConstFloat32(
          {out_c, s.kh, s.kw, 3}, Random(rng, static_cast<size_t>(out_c) * s.kh * s.kw * 3));
      const int bias = out_c == 33 ? -1 : b.AddConstFloat32({out_c}, Random(rng, out_c));
      const int out = b.AddTensor(tfl::TensorType::FLOAT32, {s.n, p.out_h, p.out_w, out_c});
      Conv2DParams cp;
      cp.padding = s.same ? tfl::Padding::SAME : tfl::Padding::VALID;
      cp.stride_h = cp.stride_w = s.stride;
      cp.activation = out_c == 24 ? Act::RELU6 : Act::NONE;
      b.AddConv2D(in, filter, bias, out, cp);
      b.SetInputs({in});
      b.SetOutputs({out});
      const std::vector<float> input = Random(rng, static_cast<size_t>(s.n) * s.h * s.w * 3);
      const std::vector<float> expected = RunOp(b, {input}, /*reference=*/true, 1);
      const std::vector<float> one = RunOp(b, {input}, /*reference=*/false, 1);
      const std::vector<float> three = RunOp(b, {input}, /*reference=*/false, 3);
      ASSERT_EQ(one.size(), OutputSize(p));
      ASSERT_EQ(expected.size(), one.size());
      for (size_t i = 0; i < one.size(); ++i) {
        ASSERT_NEAR(one[i], expected[i], 2e-5f * s.kh * s.kw * 3) << "at " << i;
        ASSERT_EQ(std::memcmp(&one[i], &three[i], sizeof(float)), 0) << "at " << i;
      }
    }
  }
}

// A float ADD after the conv is folded into it (the interpreter invokes one
// node) and added in the direct kernel's epilogue: the reference kernel's
// values, the same bits on 1 and 3 threads.
TEST(ConvHwc3FloatTest, FoldedAddMatchesReferenceKernel) {
  std::mt19937 rng(29);
  const ConvHwc3Params p = MakeParams(1, 15, 13, 20, 3, 3, 2, true, 0.0f, 6.0f);
  ModelBuilder b;
  const int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, p.in_h, p.in_w, 3});
  const int other = b.AddTensor(tfl::TensorType::FLOAT32, {1, p.out_h, p.out_w, p.out_c});
  const int filter =
      b.AddConstFloat32({p.out_c, 3, 3, 3}, Random(rng, static_cast<size_t>(p.out_c) * 27));
  const int bias = b.AddConstFloat32({p.out_c}, Random(rng, p.out_c));
  const int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, p.out_h, p.out_w, p.out_c});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, p.out_h, p.out_w, p.out_c});
  Conv2DParams cp;
  cp.padding = tfl::Padding::SAME;
  cp.stride_h = cp.stride_w = 2;
  b.AddConv2D(in, filter, bias, conv, cp);
  b.AddAdd(conv, other, out, tfl::ActivationFunctionType::RELU6);
  b.SetInputs({in, other});
  b.SetOutputs({out});
  const std::vector<float> image = Random(rng, static_cast<size_t>(p.in_h) * p.in_w * 3);
  const std::vector<float> addend = Random(rng, OutputSize(p));
  // The ADD folds into the conv: one node runs.
  const auto run = [&](bool reference, int threads) {
    return RunOp(b, {image, addend}, reference, threads, /*nodes=*/1);
  };

  const std::vector<float> expected = run(true, 1), one = run(false, 1), three = run(false, 3);
  ASSERT_EQ(one.size(), OutputSize(p));
  ASSERT_EQ(expected.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_NEAR(one[i], expected[i], 1e-4f) << "at " << i;
    ASSERT_EQ(std::memcmp(&one[i], &three[i], sizeof(float)), 0) << "at " << i;
  }
}

}  // namespace
}  // namespace dfarm::testing::conv_hwc3
