// The fast float32 DEPTHWISE_CONV_2D of the common MobileNet-style case:
// 3x3 or 5x5 filter, any stride, dilation 1, depth multiplier 1, NHWC, SAME or
// VALID padding, any fused activation range. The output is split into an
// interior, where every tap lies inside the input and the loops have no bounds
// checks, and a border with clipped tap ranges. The interior runs 4 output
// pixels x 8 channels at a time with the accumulators in registers over all
// taps; with strides of 1 and 2 each input column is loaded once per group
// and filter row and serves every pixel whose window holds it (GCC generic
// vectors, no intrinsics; on x86-64 with GCC an AVX2+FMA clone is picked at
// load, and where the CPU has x86-64-v4 (AVX-512) a variant that takes 16
// channels a block in 16-float registers, the same sums as the AVX2+FMA
// clone, so the same bits: kernel_clones.h; its 5x5 layers of 16 channels or
// more keep each block's 25 filter vectors in registers while the output
// pixels go by, 7 of a row at a time, and with few rows split across threads
// by blocks of channels). Each output sums bias + x*w over the
// in-bounds taps in the plain loops' order (depthwise_conv_2d.cc); with FMA
// each step rounds once instead of twice, so results match the plain loops
// within float rounding (bitwise where the target has no FMA contraction).
#pragma once

#include <cstdint>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/kernel_util.h"

namespace dfarm::runtime {

// The geometry of one float32 depthwise convolution, as Prepare() computes it.
struct DepthwiseFloatParams {
  int batches = 0, in_h = 0, in_w = 0, in_c = 0;
  int out_h = 0, out_w = 0, out_c = 0;
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_left = 0;
  float act_min = 0.0f, act_max = 0.0f;
};

// Everything RunDepthwiseFloat() needs, computed once per node by
// PlanDepthwiseFloat(). A default-constructed plan covers nothing.
struct DepthwiseFloatPlan {
  enum class Variant : uint8_t { kNone, k3x3, k5x5 };
  Variant variant = Variant::kNone;
  DepthwiseFloatParams params;
  // The interior: output rows [oy_begin, oy_end) and columns [ox_begin,
  // ox_end) whose whole window lies inside the input (empty ranges allowed).
  int oy_begin = 0, oy_end = 0, ox_begin = 0, ox_end = 0;

  bool covered() const { return variant != Variant::kNone; }
};

// The plan for `params`; covered() is false when the fast kernel does not
// handle the case (other filter sizes, dilation, multiplier != 1, negative
// padding), and the caller runs its plain loops.
DepthwiseFloatPlan PlanDepthwiseFloat(const DepthwiseFloatParams& params);

// The same from a float32 DEPTHWISE_CONV_2D node's tensors (input [N,H,W,C],
// filter [1,KH,KW,Cout], output [N,OH,OW,Cout], as Prepare() checked them) and
// its window and activation.
DepthwiseFloatPlan PlanDepthwiseFloat(const Tensor& input, const Tensor& filter,
                                      const Tensor& output, int stride_h, int stride_w,
                                      int dilation_h, int dilation_w, int pad_top, int pad_left,
                                      ActivationRange activation);

// Computes the output [N, OH, OW, C] from input [N, H, W, C], filter
// [1, KH, KW, C] and bias [C] (null: zeros). Requires plan.covered(); keeps no
// pointer; allocates nothing. The output must not alias the inputs. With a
// `context` of several threads, the output pixels are split across them in
// whole rows, or at any pixel when there are few rows (each output
// is computed as on one thread, so the result is the same).
// `then`, when set, runs right after the task that wrote output pixels
// [begin, end), on the same thread (slot: its thread's scratch part): the
// interpreter's Node::then. The pixels are then cut where the GEMM cuts its
// rows (Gemm::kRowAlign), into bands of about 256 KiB of output even on one
// thread, so the band `then` reads is still in the core's cache.
struct DepthwiseThen {
  void (*run)(const void* arg, int64_t begin, int64_t end, int slot) = nullptr;
  const void* arg = nullptr;
  // Multiply-adds of `run` over all the pixels: with the depthwise conv's
  // own outputs, whether the pair is worth splitting across threads.
  int64_t macs = 0;
};
void RunDepthwiseFloat(const DepthwiseFloatPlan& plan, const float* input, const float* filter,
                       const float* bias, float* output, const ExecutionContext* context = nullptr,
                       DepthwiseThen then = {});

// DEPTHWISE_CONV_2D with the plain loops for every node (defined in
// depthwise_conv_2d.cc, same Prepare() checks): the reference the tests
// compare the default kernel with.
const OpRegistration* RegisterDepthwiseConv2DReference();

}  // namespace dfarm::runtime
