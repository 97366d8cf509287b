// The direct float32 CONV_2D of a 3-channel input (a model's first layer on
// an RGB image): filter [Cout, KH, KW, 3] (KH * KW * 3 <= 256), any stride,
// dilation 1, SAME/VALID (or folded) padding, any Cout, a fused activation
// range and a folded ADD. Instead of im2col + GEMM it reads the image in
// place: a few adjacent output pixels x 8, 16 or 24 output channels at a
// time, each input value broadcast against a vector of the filter (packed at
// Prepare per block of channels as [KH][KW][3][block width], zero past
// Cout), the accumulators in registers over all taps. Each output is
// bias + (0 + x*w over the in-bounds taps in (ky, kx, ci) order), each step
// one FMA where the target has it: the sums of the GEMM path's AVX2/FMA
// kernel (one depth block of 256 holds every tap; its zero taps outside the
// input add nothing for finite weights), so its bits where it runs. GCC
// generic vectors; on x86-64 with GCC an x86-64-v3 (AVX2 + FMA) clone is
// picked at load, and where the CPU has x86-64-v4 (AVX-512) a variant with
// 16-float registers runs instead (a block of 16 or 24 channels as one
// 16-float vector per pixel and, for 24, an 8-float one; 6 pixels at a
// time): the same sums, so the same bits (kernel_clones.h).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/aligned_vector.h"
#include "runtime/kernels/kernel.h"

namespace dfarm::runtime {

// The geometry of one 3-channel float32 convolution, as Prepare() computes it.
struct ConvHwc3Params {
  int batches = 0, in_h = 0, in_w = 0;
  int out_h = 0, out_w = 0, out_c = 0;
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0;
  float act_min = 0.0f, act_max = 0.0f;
};

// Everything RunConvHwc3() needs; a default-constructed plan covers nothing.
struct ConvHwc3Plan {
  ConvHwc3Params params;
  // Output columns [ox_begin, ox_end) whose whole window row lies inside the
  // input (possibly empty).
  int ox_begin = 0, ox_end = 0;
  AlignedFloats packed_filter;  // per channel block [KH][KW][3][width]
  AlignedFloats bias;           // [blocks * 8], zeros past Cout

  bool covered() const { return !packed_filter.empty(); }
};

// Whether the direct kernel handles these parameters (3 input channels
// implied; kernel and strides positive, padding not negative, KH*KW*3 <= 256).
bool ConvHwc3Supported(const ConvHwc3Params& params);

// The plan for `params` (ConvHwc3Supported() must hold), packing `filter`
// ([Cout][KH][KW][3]) and `bias` ([Cout], null: zeros). Allocates; keeps no
// pointer.
ConvHwc3Plan PlanConvHwc3(const ConvHwc3Params& params, const float* filter, const float* bias);

// The plan for `params` (supported) with the filter `from` packed (a plan
// of the same Cout, KH and KW, moved from), and `bias` as in PlanConvHwc3():
// for a node prepared again after its filter's values were freed.
ConvHwc3Plan ReplanConvHwc3(ConvHwc3Plan&& from, const ConvHwc3Params& params, const float* bias);

// A float ADD folded into the convolution (Node::folded_addend): output
// channel c of pixel i gets data[i * (end - begin) + c - begin] added after
// the bias and before the clamp when begin <= c < end, +0.0f elsewhere (as
// GemmEpilogue::addend). Null data: nothing added.
struct ConvHwc3Addend {
  const float* data = nullptr;
  int begin = 0, end = 0;
};

// Computes output [N, OH, OW, Cout] from input [N, H, W, 3]. Requires
// plan.covered(); allocates nothing; the output must not alias the input
// nor the addend. With a `context` of several threads, whole output rows are
// split across them (each output computed as on one thread, so the same
// result).
void RunConvHwc3(const ConvHwc3Plan& plan, const float* input, float* output,
                 const ExecutionContext* context = nullptr, const ConvHwc3Addend& addend = {});

}  // namespace dfarm::runtime
