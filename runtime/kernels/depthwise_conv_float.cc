#include "runtime/kernels/depthwise_conv_float.h"

#include <algorithm>
#include <cstddef>

namespace dfarm::runtime {
namespace {

// Everything below is inlined into RunDispatch() so that each of its clones
// (AVX2 and the baseline) compiles the whole kernel for its own target.
#if defined(__GNUC__)
#define DFARM_DW_INLINE inline __attribute__((always_inline))
#else
#define DFARM_DW_INLINE inline
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define DFARM_DW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DFARM_DW_CLONES
#endif

// One output pixel's B channels from taps [0, taps_h) x [0, taps_w): x is the
// input at the first tap and the block's first channel, w the filter there;
// row and col step the input by one row and one column, filter_row steps the
// filter by one row (col steps it by one column). The accumulators live in
// registers over all taps; the sum is bias + taps in row-major order, as the
// plain loops add them.
template <int B>
DFARM_DW_INLINE void Block(const float* __restrict x, const float* __restrict w, const float* bias,
                           float* __restrict out, int taps_h, int taps_w, ptrdiff_t row,
                           ptrdiff_t col, ptrdiff_t filter_row, float lo, float hi) {
  float acc[B];
  for (int j = 0; j < B; ++j) acc[j] = bias != nullptr ? bias[j] : 0.0f;
  for (int ky = 0; ky < taps_h; ++ky) {
    for (int kx = 0; kx < taps_w; ++kx) {
      const float* __restrict xt = x + ky * row + kx * col;
      const float* __restrict wt = w + ky * filter_row + kx * col;
      for (int j = 0; j < B; ++j) acc[j] += xt[j] * wt[j];
    }
  }
  for (int j = 0; j < B; ++j) out[j] = std::min(std::max(acc[j], lo), hi);
}

// All channels of one output pixel, in blocks of 16, 8, 4 and 1.
DFARM_DW_INLINE void Pixel(const float* x, const float* w, const float* bias, float* out,
                           int taps_h, int taps_w, ptrdiff_t row, int channels,
                           ptrdiff_t filter_row, float lo, float hi) {
  const ptrdiff_t col = channels;
  int c = 0;
  for (; c + 16 <= channels; c += 16) {
    Block<16>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c, taps_h, taps_w, row, col,
              filter_row, lo, hi);
  }
  if (c + 8 <= channels) {
    Block<8>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c, taps_h, taps_w, row, col,
             filter_row, lo, hi);
    c += 8;
  }
  if (c + 4 <= channels) {
    Block<4>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c, taps_h, taps_w, row, col,
             filter_row, lo, hi);
    c += 4;
  }
  for (; c < channels; ++c) {
    Block<1>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c, taps_h, taps_w, row, col,
             filter_row, lo, hi);
  }
}

// Output pixel (oy, ox) of a batch whose input starts at `in`, with the taps
// clipped to the input.
template <int KH, int KW>
DFARM_DW_INLINE void BorderPixel(const DepthwiseFloatParams& p, const float* in,
                                 const float* filter, const float* bias, float* out, int oy,
                                 int ox) {
  const int iy0 = oy * p.stride_h - p.pad_top, ix0 = ox * p.stride_w - p.pad_left;
  const int ky0 = std::max(0, -iy0), ky1 = std::min(KH, p.in_h - iy0);
  const int kx0 = std::max(0, -ix0), kx1 = std::min(KW, p.in_w - ix0);
  if (ky1 <= ky0 || kx1 <= kx0) {
    Pixel(in, filter, bias, out, 0, 0, 0, p.in_c, 0, p.act_min, p.act_max);
    return;
  }
  const ptrdiff_t row = static_cast<ptrdiff_t>(p.in_w) * p.in_c;
  const float* x = in + (iy0 + ky0) * row + static_cast<ptrdiff_t>(ix0 + kx0) * p.in_c;
  const float* w = filter + static_cast<ptrdiff_t>(ky0 * KW + kx0) * p.in_c;
  Pixel(x, w, bias, out, ky1 - ky0, kx1 - kx0, row, p.in_c, static_cast<ptrdiff_t>(KW) * p.in_c,
        p.act_min, p.act_max);
}

// One output row: border columns, then the interior (constant tap counts, no
// clipping) when the row is an interior row, then border columns.
template <int KH, int KW>
DFARM_DW_INLINE void OutputRow(const DepthwiseFloatPlan& plan, const float* in, const float* filter,
                               const float* bias, float* out_row, int oy) {
  const DepthwiseFloatParams& p = plan.params;
  const ptrdiff_t row = static_cast<ptrdiff_t>(p.in_w) * p.in_c;
  const ptrdiff_t filter_row = static_cast<ptrdiff_t>(KW) * p.in_c;
  int ox = 0;
  if (oy >= plan.oy_begin && oy < plan.oy_end) {
    for (; ox < plan.ox_begin; ++ox) {
      BorderPixel<KH, KW>(p, in, filter, bias, out_row + static_cast<ptrdiff_t>(ox) * p.in_c, oy,
                          ox);
    }
    const float* x_row = in + (oy * p.stride_h - p.pad_top) * row;
    for (; ox < plan.ox_end; ++ox) {
      const float* x = x_row + static_cast<ptrdiff_t>(ox * p.stride_w - p.pad_left) * p.in_c;
      Pixel(x, filter, bias, out_row + static_cast<ptrdiff_t>(ox) * p.in_c, KH, KW, row, p.in_c,
            filter_row, p.act_min, p.act_max);
    }
  }
  for (; ox < p.out_w; ++ox) {
    BorderPixel<KH, KW>(p, in, filter, bias, out_row + static_cast<ptrdiff_t>(ox) * p.in_c, oy, ox);
  }
}

template <int KH, int KW>
DFARM_DW_INLINE void RunVariant(const DepthwiseFloatPlan& plan, const float* input,
                                const float* filter, const float* bias, float* output) {
  const DepthwiseFloatParams& p = plan.params;
  const ptrdiff_t in_batch = static_cast<ptrdiff_t>(p.in_h) * p.in_w * p.in_c;
  const ptrdiff_t out_row = static_cast<ptrdiff_t>(p.out_w) * p.out_c;
  for (int n = 0; n < p.batches; ++n) {
    for (int oy = 0; oy < p.out_h; ++oy) {
      OutputRow<KH, KW>(plan, input + n * in_batch, filter, bias,
                        output + (static_cast<ptrdiff_t>(n) * p.out_h + oy) * out_row, oy);
    }
  }
}

DFARM_DW_CLONES void RunDispatch(const DepthwiseFloatPlan& plan, const float* input,
                                 const float* filter, const float* bias, float* output) {
  switch (plan.variant) {
    case DepthwiseFloatPlan::Variant::k3x3:
      RunVariant<3, 3>(plan, input, filter, bias, output);
      break;
    case DepthwiseFloatPlan::Variant::k5x5:
      RunVariant<5, 5>(plan, input, filter, bias, output);
      break;
    case DepthwiseFloatPlan::Variant::kNone:
      break;
  }
}

// [begin, end) of the outputs along one axis whose window [o*stride - pad,
// o*stride - pad + kernel) lies inside [0, in); begin <= end <= out.
void InteriorRange(int in, int out, int kernel, int stride, int pad, int* begin, int* end) {
  *begin = std::min(out, (pad + stride - 1) / stride);
  const int last_start = in - kernel + pad;  // the largest o*stride allowed
  *end = last_start < 0 ? *begin : std::clamp(last_start / stride + 1, *begin, out);
}

}  // namespace

DepthwiseFloatPlan PlanDepthwiseFloat(const DepthwiseFloatParams& params) {
  DepthwiseFloatPlan plan;
  const DepthwiseFloatParams& p = params;
  const bool square3 = p.kernel_h == 3 && p.kernel_w == 3;
  const bool square5 = p.kernel_h == 5 && p.kernel_w == 5;
  if ((!square3 && !square5) || p.dilation_h != 1 || p.dilation_w != 1 || p.in_c != p.out_c ||
      p.in_c <= 0 || p.stride_h <= 0 || p.stride_w <= 0 || p.pad_top < 0 || p.pad_left < 0) {
    return plan;
  }
  plan.variant = square3 ? DepthwiseFloatPlan::Variant::k3x3 : DepthwiseFloatPlan::Variant::k5x5;
  plan.params = params;
  InteriorRange(p.in_h, p.out_h, p.kernel_h, p.stride_h, p.pad_top, &plan.oy_begin, &plan.oy_end);
  InteriorRange(p.in_w, p.out_w, p.kernel_w, p.stride_w, p.pad_left, &plan.ox_begin, &plan.ox_end);
  return plan;
}

void RunDepthwiseFloat(const DepthwiseFloatPlan& plan, const float* input, const float* filter,
                       const float* bias, float* output) {
  RunDispatch(plan, input, filter, bias, output);
}

}  // namespace dfarm::runtime
