#include "runtime/kernels/depthwise_conv_float.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/parallel.h"

#if defined(DFARM_KERNEL_WIDE)
#include <immintrin.h>
#endif

// Vec8 lives in registers only (every function taking it is inlined), so the
// note that passing it by value has another ABI without AVX does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace dfarm::runtime {
namespace {

// Strides of one node, in floats: `row` and `col` step the input by one row
// and one column (col also steps the filter and the output by one column),
// `filter_row` steps the filter by one row, `pixel` steps the input from one
// output pixel's window to the next one's along the row (stride_w columns).
// lo_lanes, hi_lanes and zeros hold lo, hi and 0.0f in every lane of the
// widest vector, for Load<V>() (a broadcast built inside a kernel clone from
// a function compiled outside it goes lane by lane through memory).
struct Steps {
  ptrdiff_t row, col, filter_row, pixel;
  float lo, hi;  // the activation's clamp
  alignas(64) float lo_lanes[16], hi_lanes[16], zeros[16];
};

// Eight floats. With GCC, a generic vector (not an intrinsic: GCC lowers it
// to one AVX register, two SSE2 or two NEON registers as the target has);
// elsewhere a plain array with the same operations. Vec16: sixteen floats,
// one AVX-512 register, in the DFARM_KERNEL_V4 variant only.
#if defined(__GNUC__) && !defined(__clang__)
typedef float Vec8 __attribute__((vector_size(32)));
#if defined(DFARM_KERNEL_WIDE)
typedef float Vec16 __attribute__((vector_size(64)));
#endif
// std::min(std::max(v, lo), hi) per lane, as the plain loops clamp.
template <typename V>
DFARM_KERNEL_INLINE V ClampVec(V v, V lo, V hi) {
  v = v < lo ? lo : v;
  return hi < v ? hi : v;
}
#else
struct Vec8 {
  float f[8];
  Vec8& operator+=(const Vec8& o) {
    for (int i = 0; i < 8; ++i) f[i] += o.f[i];
    return *this;
  }
  Vec8 operator*(const Vec8& o) const {
    Vec8 r;
    for (int i = 0; i < 8; ++i) r.f[i] = f[i] * o.f[i];
    return r;
  }
};
inline Vec8 ClampVec(Vec8 v, Vec8 lo, Vec8 hi) {
  for (int i = 0; i < 8; ++i) v.f[i] = std::min(std::max(v.f[i], lo.f[i]), hi.f[i]);
  return v;
}
#endif
// The floats of one V (Vec8 or Vec16) at p, and back.
template <typename V>
DFARM_KERNEL_INLINE V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename V>
DFARM_KERNEL_INLINE void Store(float* p, V v) {
  std::memcpy(p, &v, sizeof(v));
}
// Floats in one V.
template <typename V>
constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));

// f(0), ..., f(K - 1) unrolled when K > 0; else f(0), ..., f(n - 1).
template <int K, typename F>
DFARM_KERNEL_INLINE void ForTaps(int n, F f) {
  if constexpr (K > 0) {
    DFARM_KERNEL_UNROLL
    for (int i = 0; i < K; ++i) f(i);
  } else {
    for (int i = 0; i < n; ++i) f(i);
  }
}

// P adjacent output pixels' L*V channels (L: the lanes of a VT): x is the input at the first
// pixel's first tap and the block's first channel, w the filter there, out
// the first pixel's output. The P x V accumulators live in registers over all
// taps (P*V chains of independent adds; each filter load serves P pixels);
// each output's sum is bias + taps in row-major order, as the plain loops add
// them. The taps are KH (or, when KH is 0, taps_h) rows of KW (or taps_w)
// columns: constant inside the input, clipped at its border.
template <typename VT, int P, int V, int KH, int KW>
DFARM_KERNEL_INLINE void VecBlock(const float* x, const float* w, const float* bias, float* out,
                                  int taps_h, int taps_w, const Steps& s) {
  constexpr int L = kLanes<VT>;
  VT acc[P][V];
  DFARM_KERNEL_UNROLL
  for (int v = 0; v < V; ++v) {
    const VT b = bias != nullptr ? Load<VT>(bias + L * v) : Load<VT>(s.zeros);
    DFARM_KERNEL_UNROLL
    for (int p = 0; p < P; ++p) acc[p][v] = b;
  }
  auto tap = [&](int ky, int kx) DFARM_KERNEL_LAMBDA_INLINE {
    DFARM_KERNEL_UNROLL
    for (int v = 0; v < V; ++v) {
      const VT wt = Load<VT>(w + ky * s.filter_row + kx * s.col + L * v);
      DFARM_KERNEL_UNROLL
      for (int p = 0; p < P; ++p) {
        acc[p][v] += Load<VT>(x + ky * s.row + kx * s.col + p * s.pixel + L * v) * wt;
      }
    }
  };
  ForTaps<KH>(taps_h, [&](int ky) DFARM_KERNEL_LAMBDA_INLINE {
    ForTaps<KW>(taps_w, [&](int kx) DFARM_KERNEL_LAMBDA_INLINE { tap(ky, kx); });
  });
  const VT lo = Load<VT>(s.lo_lanes), hi = Load<VT>(s.hi_lanes);
  DFARM_KERNEL_UNROLL
  for (int p = 0; p < P; ++p) {
    DFARM_KERNEL_UNROLL
    for (int v = 0; v < V; ++v) Store(out + p * s.col + L * v, ClampVec(acc[p][v], lo, hi));
  }
}

// One channel of one output pixel from taps_h x taps_w taps (the channels
// past the last multiple of 8).
DFARM_KERNEL_INLINE void ScalarBlock(const float* x, const float* w, const float* bias, float* out,
                                     int taps_h, int taps_w, const Steps& s) {
  float acc = bias != nullptr ? *bias : 0.0f;
  for (int ky = 0; ky < taps_h; ++ky) {
    for (int kx = 0; kx < taps_w; ++kx)
      acc += x[ky * s.row + kx * s.col] * w[ky * s.filter_row + kx * s.col];
  }
  *out = std::min(std::max(acc, s.lo), s.hi);
}

// All channels of P adjacent output pixels: blocks of 16 and 8 channels, then
// the last 8 again for a remainder (single channels below 8 channels). A
// single pixel (P = 1: border columns, and rows too short for a group of
// pixels) first takes blocks of 32 channels, so that its block has four
// independent sums in flight instead of two (each sum waits for the one
// before it: the adds' latency, not the loads, bounds two). Wide (the
// DFARM_KERNEL_V4 variant): first the same with Vec16, blocks of 64 (a
// single pixel), 32 and 16 channels.
template <bool Wide, int P, int KH, int KW>
DFARM_KERNEL_INLINE void Pixels(const float* x, const float* w, const float* bias, float* out,
                                int taps_h, int taps_w, const Steps& s) {
  const int channels = static_cast<int>(s.col);
  int c = 0;
#if defined(DFARM_KERNEL_WIDE)
  if constexpr (Wide) {
    if constexpr (P == 1) {
      for (; c + 64 <= channels; c += 64) {
        VecBlock<Vec16, 1, 4, KH, KW>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c,
                                      taps_h, taps_w, s);
      }
    }
    for (; c + 32 <= channels; c += 32) {
      VecBlock<Vec16, P, 2, KH, KW>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c,
                                    taps_h, taps_w, s);
    }
    if (c + 16 <= channels) {
      VecBlock<Vec16, P, 1, KH, KW>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c,
                                    taps_h, taps_w, s);
      c += 16;
    }
  }
#endif
  if constexpr (P == 1) {
    for (; c + 32 <= channels; c += 32) {
      VecBlock<Vec8, 1, 4, KH, KW>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c,
                                   taps_h, taps_w, s);
    }
  }
  for (; c + 16 <= channels; c += 16) {
    VecBlock<Vec8, P, 2, KH, KW>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c,
                                 taps_h, taps_w, s);
  }
  if (c + 8 <= channels) {
    VecBlock<Vec8, P, 1, KH, KW>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c,
                                 taps_h, taps_w, s);
    c += 8;
  }
  if (c < channels && channels >= 8) {
    // The last channels as one block of the last 8 (overlapping the block
    // before it: each lane's sum is the same, so the rewrite is identical).
    c = channels - 8;
    VecBlock<Vec8, P, 1, KH, KW>(x + c, w + c, bias != nullptr ? bias + c : nullptr, out + c,
                                 taps_h, taps_w, s);
    c = channels;
  }
  for (; c < channels; ++c) {
    for (int p = 0; p < P; ++p) {
      ScalarBlock(x + p * s.pixel + c, w + c, bias != nullptr ? bias + c : nullptr,
                  out + p * s.col + c, KH > 0 ? KH : taps_h, KW > 0 ? KW : taps_w, s);
    }
  }
}

// One block of L channels (L: the lanes of a VT) of P interior output pixels
// stride SW apart: x is the input at the first pixel's first tap and the
// block's first channel, w the filter and bias at that channel, out the first
// pixel's output. For each filter row the KW taps are loaded once and each
// input column of the group once; a column serves every pixel whose window
// holds it (tap kx = j - SW*p of pixel p for column j), so a group of P
// pixels loads KH*(SW*(P-1)+KW) inputs for its KH*KW*P products. Each output
// is bias + taps in row-major order, as the plain loops add them.
template <typename VT, int P, int KH, int KW, int SW>
DFARM_KERNEL_INLINE void InteriorBlock(const float* x, const float* w, const float* bias,
                                       float* out, const Steps& s) {
  constexpr int kColumns = SW * (P - 1) + KW;
  const ptrdiff_t channels = s.col;
  const VT b = bias != nullptr ? Load<VT>(bias) : Load<VT>(s.zeros);
  VT acc[P];
  DFARM_KERNEL_UNROLL
  for (int p = 0; p < P; ++p) acc[p] = b;
  DFARM_KERNEL_UNROLL
  for (int ky = 0; ky < KH; ++ky) {
    VT wt[KW];
    DFARM_KERNEL_UNROLL
    for (int kx = 0; kx < KW; ++kx) wt[kx] = Load<VT>(w + ky * s.filter_row + kx * channels);
    const float* xr = x + ky * s.row;
    DFARM_KERNEL_UNROLL
    for (int j = 0; j < kColumns; ++j) {
      const VT xj = Load<VT>(xr + j * channels);
      DFARM_KERNEL_UNROLL
      for (int p = 0; p < P; ++p) {
        const int kx = j - SW * p;
        if (kx >= 0 && kx < KW) acc[p] += xj * wt[kx];
      }
    }
  }
  const VT lo = Load<VT>(s.lo_lanes), hi = Load<VT>(s.hi_lanes);
  DFARM_KERNEL_UNROLL
  for (int p = 0; p < P; ++p) Store(out + p * channels, ClampVec(acc[p], lo, hi));
}

// The interior columns [ox, ox_end) of an interior output row, P output
// pixels at a time (InteriorBlock()), 8 channels at a time (the last 8
// again for a remainder; channels >= 8; all channels of a group before the
// next group, so that its inputs are read from memory once): x is the input
// at the first pixel's first tap (row and column), w the filter, out the
// first pixel's output. Wide (the DFARM_KERNEL_V4 variant), with 16 channels
// or more: 16 channels at a time, the last 16 again for a remainder (each
// lane's sum is the same as in a block of 8). Returns the first column not
// done.
template <bool Wide, int P, int KH, int KW, int SW>
DFARM_KERNEL_INLINE int InteriorGroups(const float* x, const float* w, const float* bias,
                                       float* out, int ox, int ox_end, const Steps& s) {
  const int groups = (ox_end - ox) / P;
  if (groups <= 0) return ox;
  const ptrdiff_t channels = s.col;
  for (int g = 0; g < groups; ++g, x += P * SW * channels, out += P * channels) {
#if defined(DFARM_KERNEL_WIDE)
    if constexpr (Wide) {
      if (channels >= 16) {
        for (ptrdiff_t c = 0; c < channels; c += 16) {
          if (c + 16 > channels) c = channels - 16;  // overlaps the block before: same sums
          InteriorBlock<Vec16, P, KH, KW, SW>(x + c, w + c, bias != nullptr ? bias + c : nullptr,
                                              out + c, s);
        }
        continue;
      }
    }
#endif
    for (ptrdiff_t c = 0; c < channels; c += 8) {
      if (c + 8 > channels) c = channels - 8;  // overlaps the block before: same sums
      InteriorBlock<Vec8, P, KH, KW, SW>(x + c, w + c, bias != nullptr ? bias + c : nullptr,
                                         out + c, s);
    }
  }
  return ox + groups * P;
}

// Output pixel ox of a row whose taps_h tap rows (TH of them when TH > 0)
// start at input row x_row and filter row w, with the tap columns clipped to
// the input.
template <bool Wide, int TH, int KW>
DFARM_KERNEL_INLINE void ClippedColumn(const DepthwiseFloatParams& p, const Steps& s,
                                       const float* x_row, const float* w, const float* bias,
                                       float* out, int taps_h, int ox) {
  const int ix0 = ox * p.stride_w - p.pad_left;
  const int kx0 = std::max(0, -ix0), kx1 = std::min(KW, p.in_w - ix0);
  if (kx1 <= kx0) {  // no tap inside: bias alone (not with SAME/VALID windows)
    Pixels<Wide, 1, 0, 0>(x_row, w, bias, out, 0, 0, s);
    return;
  }
  Pixels<Wide, 1, TH, 0>(x_row + (ix0 + kx0) * s.col, w + kx0 * s.col, bias, out, taps_h, kx1 - kx0,
                         s);
}

// Output pixels [ox_lo, ox_hi) of one row whose taps_h tap rows (TH when
// TH > 0) start at input row x_row and filter row w: clipped columns, then
// the interior columns kGroup pixels at a time and then one by one, then
// clipped columns. Each pixel's sums are the same whichever way it is
// reached, so a row cut anywhere gives the same bits.
template <bool Wide, int TH, int KW>
DFARM_KERNEL_INLINE void RowSpans(const DepthwiseFloatPlan& plan, const Steps& s,
                                  const float* x_row, const float* w, const float* bias,
                                  float* out_row, int taps_h, int ox_lo, int ox_hi) {
  constexpr int kGroup = 4;
  const DepthwiseFloatParams& p = plan.params;
  const int interior_end = std::min(plan.ox_end, ox_hi);
  int ox = ox_lo;
  for (; ox < plan.ox_begin && ox < ox_hi; ++ox) {
    ClippedColumn<Wide, TH, KW>(p, s, x_row, w, bias, out_row + ox * s.col, taps_h, ox);
  }
  if constexpr (TH > 0) {
    if (s.col >= 8 && p.stride_w <= 2 && ox < interior_end) {
      const float* x = x_row + (ox * s.pixel - p.pad_left * s.col);
      ox = p.stride_w == 1 ? InteriorGroups<Wide, kGroup, TH, KW, 1>(
                                 x, w, bias, out_row + ox * s.col, ox, interior_end, s)
                           : InteriorGroups<Wide, kGroup, TH, KW, 2>(
                                 x, w, bias, out_row + ox * s.col, ox, interior_end, s);
    }
  }
  for (; ox + kGroup <= interior_end; ox += kGroup) {
    Pixels<Wide, kGroup, TH, KW>(x_row + (ox * s.pixel - p.pad_left * s.col), w, bias,
                                 out_row + ox * s.col, taps_h, KW, s);
  }
  for (; ox < interior_end; ++ox) {
    Pixels<Wide, 1, TH, KW>(x_row + (ox * s.pixel - p.pad_left * s.col), w, bias,
                            out_row + ox * s.col, taps_h, KW, s);
  }
  for (ox = std::max(ox, plan.ox_end); ox < ox_hi; ++ox) {
    ClippedColumn<Wide, TH, KW>(p, s, x_row, w, bias, out_row + ox * s.col, taps_h, ox);
  }
}

// Pixels [ox_lo, ox_hi) of output row oy of a batch whose input starts at
// `in`: all KH tap rows in an interior row, the rows inside the input
// otherwise.
template <bool Wide, int KH, int KW>
DFARM_KERNEL_INLINE void OutputRow(const DepthwiseFloatPlan& plan, const Steps& s, const float* in,
                                   const float* filter, const float* bias, float* out_row, int oy,
                                   int ox_lo, int ox_hi) {
  const DepthwiseFloatParams& p = plan.params;
  const int iy0 = oy * p.stride_h - p.pad_top;
  if (oy >= plan.oy_begin && oy < plan.oy_end) {
    RowSpans<Wide, KH, KW>(plan, s, in + iy0 * s.row, filter, bias, out_row, KH, ox_lo, ox_hi);
    return;
  }
  const int ky0 = std::max(0, -iy0), ky1 = std::min(KH, p.in_h - iy0);
  if (ky1 <= ky0) {  // no tap row inside: bias alone (not with SAME/VALID windows)
    RowSpans<Wide, 0, KW>(plan, s, in, filter, bias, out_row, 0, ox_lo, ox_hi);
    return;
  }
  RowSpans<Wide, 0, KW>(plan, s, in + (iy0 + ky0) * s.row, filter + ky0 * s.filter_row, bias,
                        out_row, ky1 - ky0, ox_lo, ox_hi);
}

// The strides and clamp of a node with KW filter columns.
template <int KW>
DFARM_KERNEL_INLINE Steps MakeSteps(const DepthwiseFloatParams& p) {
  const ptrdiff_t c = p.in_c;
  Steps s = {.row = p.in_w * c,
             .col = c,
             .filter_row = KW * c,
             .pixel = p.stride_w * c,
             .lo = p.act_min,
             .hi = p.act_max,
             .lo_lanes = {},
             .hi_lanes = {},
             .zeros = {}};
  std::fill_n(s.lo_lanes, 16, p.act_min);
  std::fill_n(s.hi_lanes, 16, p.act_max);
  std::fill_n(s.zeros, 16, 0.0f);
  return s;
}

template <bool Wide, int KH, int KW>
DFARM_KERNEL_INLINE void RunVariant(const DepthwiseFloatPlan& plan, const float* input,
                                    const float* filter, const float* bias, float* output,
                                    int64_t pixel_begin, int64_t pixel_end) {
  const DepthwiseFloatParams& p = plan.params;
  const ptrdiff_t c = p.in_c;
  const Steps s = MakeSteps<KW>(p);
  const ptrdiff_t in_batch = p.in_h * s.row;
  const ptrdiff_t out_row = p.out_w * c;
  for (int64_t row = pixel_begin / p.out_w; row * p.out_w < pixel_end; ++row) {
    const int n = static_cast<int>(row / p.out_h), oy = static_cast<int>(row % p.out_h);
    const int64_t first = row * p.out_w;
    const int ox_lo = static_cast<int>(std::max<int64_t>(0, pixel_begin - first));
    const int ox_hi = static_cast<int>(std::min<int64_t>(p.out_w, pixel_end - first));
    OutputRow<Wide, KH, KW>(plan, s, input + n * in_batch, filter, bias, output + row * out_row, oy,
                            ox_lo, ox_hi);
  }
}

#if defined(DFARM_KERNEL_WIDE)
// `p` moved by `bytes`, as an address only (on the way to a tap, it may lie
// outside the input).
DFARM_KERNEL_INLINE const float* Moved(const float* p, ptrdiff_t bytes) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(p) +
                                        static_cast<uintptr_t>(bytes));
}

// Output pixels [ox, ox + n) (n <= P) of row oy of one block of 16 channels,
// the block's KH*KW filter vectors `wt` in registers: in is the batch's
// input at the block's first channel, out pixel ox's output there. A pixel
// whose window row lies inside the input takes its KW taps as plain FMAs; a
// border pixel's taps outside the input are masked loads and FMAs that keep
// nothing (from `in`, never from an address outside the input: a masked
// load there can take a slow path). So each pixel's sum is b plus its
// in-bounds taps in row-major order, as in VecBlock(): the same bits.
template <int KH, int KW, int P>
DFARM_KERNEL_V4 DFARM_KERNEL_INLINE void ResidentGroup(const DepthwiseFloatParams& p,
                                                       const float* in, const __m512 (&wt)[KH * KW],
                                                       __m512 b, Vec16 lo, Vec16 hi, float* out,
                                                       int oy, int ox, int n) {
  const ptrdiff_t col = ptrdiff_t{p.in_c} * ptrdiff_t{sizeof(float)};  // bytes
  const ptrdiff_t row = p.in_w * col, pixel = p.stride_w * col;
  const int iy0 = oy * p.stride_h - p.pad_top;
  const int ky0 = std::max(0, -iy0), ky1 = std::min(KH, p.in_h - iy0);
  constexpr unsigned kAll = (1u << KW) - 1;
  // Bit kx of inside[q]: filter column kx of pixel q lies inside the input.
  unsigned inside[P];
  DFARM_KERNEL_UNROLL
  for (int q = 0; q < P; ++q) {
    const int ix0 = (ox + q) * p.stride_w - p.pad_left;
    const int kx0 = std::max(0, -ix0), kx1 = std::min(KW, p.in_w - ix0);
    inside[q] = q < n && kx1 > kx0 ? ((1u << kx1) - 1) & ~((1u << kx0) - 1) : 0u;
  }
  // Pixel 0's input at filter row 0 and column 0 (an address only).
  const float* x0 = Moved(in, iy0 * row + (ox * p.stride_w - p.pad_left) * col);
  __m512 acc[P];
  DFARM_KERNEL_UNROLL
  for (int q = 0; q < P; ++q) acc[q] = b;
  DFARM_KERNEL_UNROLL
  for (int ky = 0; ky < KH; ++ky) {
    if (ky < ky0 || ky >= ky1) continue;
    const float* xr = Moved(x0, ky * row);
    DFARM_KERNEL_UNROLL
    for (int q = 0; q < P; ++q) {
      const float* xq = Moved(xr, q * pixel);
      if (inside[q] == kAll) {
        DFARM_KERNEL_UNROLL
        for (int kx = 0; kx < KW; ++kx) {
          acc[q] = _mm512_fmadd_ps(_mm512_loadu_ps(Moved(xq, kx * col)), wt[ky * KW + kx], acc[q]);
        }
      } else {
        DFARM_KERNEL_UNROLL
        for (int kx = 0; kx < KW; ++kx) {
          const unsigned on = (inside[q] >> kx) & 1u;
          const __mmask16 keep = _cvtu32_mask16(0u - on);
          const float* at = on != 0 ? Moved(xq, kx * col) : in;
          acc[q] = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(keep, at), wt[ky * KW + kx], acc[q],
                                         keep);
        }
      }
    }
  }
  DFARM_KERNEL_UNROLL
  for (int q = 0; q < P; ++q) {
    if (q < n) Store(out + q * ptrdiff_t{p.in_c}, ClampVec(Vec16(acc[q]), lo, hi));
  }
}

// Whether the 512-bit variant runs `plan` as RunResident().
inline bool Resident(const DepthwiseFloatPlan& plan) {
  return plan.variant == DepthwiseFloatPlan::Variant::k5x5 && plan.params.in_c >= 16;
}

// RunResident()'s blocks of 16 channels (the last one overlapping).
inline int64_t ResidentBlocks(const DepthwiseFloatPlan& plan) {
  return (int64_t{plan.params.in_c} + 15) / 16;
}

// The 5x5 layers of 16 channels or more take RunResident(): 25 filter
// vectors and 7 sums fill the 32 registers, where RunVariant() reloads the
// filter every few pixels (and for every pixel of the clipped border
// columns). BM_Depthwise, 1 thread: 7x7x1152 55 -> 29 µs, 14x14x672 stride
// 2 27 -> 15, 56x56x96 stride 2 47-51 -> 35, 28x28x144 41 -> 39. The 3x3
// layers ran 10-210% slower this way (9 filter vectors leave room for
// RunVariant()'s groups to share each input column), so they keep it.
constexpr int kResidentPixels5x5 = 7;

// Output pixels [pixel_begin, pixel_end) of a node of 16 channels or more,
// blocks [block_begin, block_end) of its ResidentBlocks() (block i starts at
// channel min(16 i, channels - 16): the last one overlaps the one before it
// when 16 does not divide the channels, with the same sums), block by block,
// its filter held in registers while the pixels go by, P of a row at a time
// (ResidentGroup()).
template <int KH, int KW, int P>
DFARM_KERNEL_V4 void RunResident(const DepthwiseFloatPlan& plan, const float* input,
                                 const float* filter, const float* bias, float* output,
                                 int64_t pixel_begin, int64_t pixel_end, int64_t block_begin,
                                 int64_t block_end) {
  const DepthwiseFloatParams& p = plan.params;
  const Steps s = MakeSteps<KW>(p);
  const ptrdiff_t channels = s.col;
  const ptrdiff_t in_batch = p.in_h * s.row;
  const ptrdiff_t out_row = p.out_w * channels;
  const Vec16 lo = Load<Vec16>(s.lo_lanes), hi = Load<Vec16>(s.hi_lanes);
  for (int64_t block = block_begin; block < block_end; ++block) {
    // The last block overlaps the one before it when 16 does not divide
    // the channels: the same sums.
    const ptrdiff_t c = std::min<ptrdiff_t>(16 * block, channels - 16);
    __m512 wt[KH * KW];
    DFARM_KERNEL_UNROLL
    for (int t = 0; t < KH * KW; ++t) {
      wt[t] = _mm512_loadu_ps(filter + (t / KW) * s.filter_row + (t % KW) * channels + c);
    }
    const __m512 b = bias != nullptr ? _mm512_loadu_ps(bias + c) : _mm512_setzero_ps();
    for (int64_t row = pixel_begin / p.out_w; row * p.out_w < pixel_end; ++row) {
      const int n = static_cast<int>(row / p.out_h), oy = static_cast<int>(row % p.out_h);
      const int64_t first = row * p.out_w;
      const int ox_lo = static_cast<int>(std::max<int64_t>(0, pixel_begin - first));
      const int ox_hi = static_cast<int>(std::min<int64_t>(p.out_w, pixel_end - first));
      const float* in = input + n * in_batch + c;
      float* out = output + row * out_row + c;
      for (int ox = ox_lo; ox < ox_hi; ox += P) {
        ResidentGroup<KH, KW, P>(p, in, wt, b, lo, hi, out + ox * channels, oy, ox,
                                 std::min(P, ox_hi - ox));
      }
    }
  }
}
#endif

template <bool Wide>
DFARM_KERNEL_INLINE void Dispatch(const DepthwiseFloatPlan& plan, const float* input,
                                  const float* filter, const float* bias, float* output,
                                  int64_t pixel_begin, int64_t pixel_end) {
  switch (plan.variant) {
    case DepthwiseFloatPlan::Variant::k3x3:
      RunVariant<Wide, 3, 3>(plan, input, filter, bias, output, pixel_begin, pixel_end);
      break;
    case DepthwiseFloatPlan::Variant::k5x5:
#if defined(DFARM_KERNEL_WIDE)
      if constexpr (Wide) {
        if (Resident(plan)) {
          RunResident<5, 5, kResidentPixels5x5>(plan, input, filter, bias, output, pixel_begin,
                                                pixel_end, 0, ResidentBlocks(plan));
          break;
        }
      }
#endif
      RunVariant<Wide, 5, 5>(plan, input, filter, bias, output, pixel_begin, pixel_end);
      break;
    case DepthwiseFloatPlan::Variant::kNone:
      break;
  }
}

DFARM_KERNEL_CLONES void RunDispatch(const DepthwiseFloatPlan& plan, const float* input,
                                     const float* filter, const float* bias, float* output,
                                     int64_t pixel_begin, int64_t pixel_end) {
  Dispatch<false>(plan, input, filter, bias, output, pixel_begin, pixel_end);
}

#if defined(DFARM_KERNEL_WIDE)
DFARM_KERNEL_V4 void RunDispatchWide(const DepthwiseFloatPlan& plan, const float* input,
                                     const float* filter, const float* bias, float* output,
                                     int64_t pixel_begin, int64_t pixel_end) {
  Dispatch<true>(plan, input, filter, bias, output, pixel_begin, pixel_end);
}
#endif

// RunDispatchWide() where WideKernels() says so, else RunDispatch().
using DispatchFn = void (*)(const DepthwiseFloatPlan&, const float*, const float*, const float*,
                            float*, int64_t, int64_t);
DispatchFn PickDispatch() {
#if defined(DFARM_KERNEL_WIDE)
  if (WideKernels()) return RunDispatchWide;
#endif
  return RunDispatch;
}

// Outputs below which a node stays on one thread (BM_Depthwise: 6x6x128 and
// 12x12x48 ran slower on 2 threads than on 1, 6x6x384 and up faster).
constexpr int64_t kMinParallelOutputs = 8192;
// Rows per thread below which tasks are cut inside rows (RunDepthwiseFloat).
constexpr int64_t kRowTasksPerThread = 8;
// With DepthwiseThen: output bytes a band holds at most.
constexpr int64_t kThenBandBytes = int64_t{256} << 10;

// [begin, end) of the outputs along one axis whose window [o*stride - pad,
// o*stride - pad + kernel) lies inside [0, in); begin <= end <= out.
// In 64 bits: a stride or input side near 2^31 must not wrap.
void InteriorRange(int in, int out, int kernel, int stride, int pad, int* begin, int* end) {
  const int64_t first = (int64_t{pad} + stride - 1) / stride;
  *begin = static_cast<int>(std::min<int64_t>(out, first));
  const int64_t last_start = int64_t{in} - kernel + pad;  // the largest o*stride allowed
  *end = last_start < 0
             ? *begin
             : static_cast<int>(std::clamp<int64_t>(last_start / stride + 1, *begin, out));
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

DepthwiseFloatPlan PlanDepthwiseFloat(const Tensor& input, const Tensor& filter,
                                      const Tensor& output, int stride_h, int stride_w,
                                      int dilation_h, int dilation_w, int pad_top, int pad_left,
                                      ActivationRange activation) {
  return PlanDepthwiseFloat({.batches = input.shape[0],
                             .in_h = input.shape[1],
                             .in_w = input.shape[2],
                             .in_c = input.shape[3],
                             .out_h = output.shape[1],
                             .out_w = output.shape[2],
                             .out_c = output.shape[3],
                             .kernel_h = filter.shape[1],
                             .kernel_w = filter.shape[2],
                             .stride_h = stride_h,
                             .stride_w = stride_w,
                             .dilation_h = dilation_h,
                             .dilation_w = dilation_w,
                             .pad_top = pad_top,
                             .pad_left = pad_left,
                             .act_min = activation.min,
                             .act_max = activation.max});
}

void RunDepthwiseFloat(const DepthwiseFloatPlan& plan, const float* input, const float* filter,
                       const float* bias, float* output, const ExecutionContext* context,
                       DepthwiseThen then) {
  const int64_t rows = static_cast<int64_t>(plan.params.batches) * plan.params.out_h;
  const int64_t pixels = rows * plan.params.out_w;
  const int threads = context != nullptr ? context->num_threads : 1;
  // A small layer stays on one thread.
  const bool split = threads > 1 && pixels * plan.params.out_c >= kMinParallelOutputs;
  const DispatchFn run = PickDispatch();
  if (then.run != nullptr) {
    // Bands cut where the GEMM cuts its rows (whole 12-row tiles, of 6 rows
    // when there are few), a whole number a thread. The pair splits where
    // either op would alone.
    const bool split_pair = threads > 1 && (split || then.macs >= Gemm::kMinParallelMacs);
    const int64_t align =
        pixels < 4 * Gemm::kRowAlign * threads ? Gemm::kOwnRowAlign : Gemm::kRowAlign;
    const int64_t units = (pixels + align - 1) / align;
    const int64_t bands = pixels * plan.params.out_c * int64_t{sizeof(float)} / kThenBandBytes + 1;
    const int64_t by_threads = split_pair ? TaskCount(units, threads) : 1;
    const int64_t per = split_pair ? threads : 1;
    const int tasks =
        static_cast<int>(std::min(units, (std::max(by_threads, bands) + per - 1) / per * per));
    ParallelFor(split_pair ? context : nullptr, static_cast<size_t>(tasks),
                [&](size_t t, int slot) {
                  const Range r = SplitRange(pixels, tasks, static_cast<int>(t), align);
                  if (r.size() <= 0) return;
                  run(plan, input, filter, bias, output, r.begin, r.end);
                  then.run(then.arg, r.begin, r.end, slot);
                });
    return;
  }
  if (!split) {
    run(plan, input, filter, bias, output, 0, pixels);
    return;
  }
  // Tasks of whole output rows; few rows (the late, wide layers: 14 or 7 of
  // them) are cut at any pixel, so that the threads' shares are even: 7
  // rows of 7 went 4 and 3 rows between 2 threads, now 25 and 24 pixels.
  const bool few_rows = rows < kRowTasksPerThread * threads;
#if defined(DFARM_KERNEL_WIDE)
  // RunResident() takes a row 7 pixels at a time, so a cut inside a row
  // costs both threads a whole group: there, whole blocks of 16 channels a
  // task (16 must divide the channels, or two tasks would write the last,
  // overlapping block).
  if (few_rows && WideKernels() && Resident(plan) && plan.params.in_c % 16 == 0) {
    const int64_t blocks = ResidentBlocks(plan);
    const int tasks = static_cast<int>(TaskCount(blocks, threads));
    ParallelFor(context, static_cast<size_t>(tasks), [&](size_t t, int) {
      const Range r = SplitRange(blocks, tasks, static_cast<int>(t), 1);
      if (r.size() > 0) {
        RunResident<5, 5, kResidentPixels5x5>(plan, input, filter, bias, output, 0, pixels, r.begin,
                                              r.end);
      }
    });
    return;
  }
#endif
  const int64_t align = few_rows ? 1 : plan.params.out_w;
  const int tasks = static_cast<int>(TaskCount((pixels + align - 1) / align, threads));
  ParallelFor(context, static_cast<size_t>(tasks), [&](size_t t, int) {
    const Range r = SplitRange(pixels, tasks, static_cast<int>(t), align);
    if (r.size() > 0) run(plan, input, filter, bias, output, r.begin, r.end);
  });
}

}  // namespace dfarm::runtime
