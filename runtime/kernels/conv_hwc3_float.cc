#include "runtime/kernels/conv_hwc3_float.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/parallel.h"

// Vec8 lives in registers only (every function taking it is inlined), so the
// note that passing it by value has another ABI without AVX does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace dfarm::runtime {
namespace {

constexpr int kLanes = 8;
constexpr int kInC = 3;

#if defined(__GNUC__) && !defined(__clang__)
typedef float Vec8 __attribute__((vector_size(32)));
// Sixteen floats (one AVX-512 register), in the DFARM_KERNEL_V4 variant only.
#if defined(DFARM_KERNEL_WIDE)
typedef float Vec16 __attribute__((vector_size(64)));
DFARM_KERNEL_INLINE Vec16 Splat16(float v) {
  return Vec16{v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v};
}
#endif
DFARM_KERNEL_INLINE Vec8 Splat(float v) { return Vec8{v, v, v, v, v, v, v, v}; }
DFARM_KERNEL_INLINE Vec8 Zero() { return Splat(0.0f); }
// NaN passes, as the GEMM epilogue's max / min and Clamp() let it.
template <typename V>
DFARM_KERNEL_INLINE V ClampVec(V v, V lo, V hi) {
  v = v < lo ? lo : v;
  return hi < v ? hi : v;
}
// x broadcast by the scalar-vector product itself: a Splat() inlined from
// outside the clone would build the vector lane by lane.
// In the x86-64-v3 clone (and the v4 variant) this contracts into one FMA,
// as the GEMM kernel computes the same sum.
template <typename V>
DFARM_KERNEL_INLINE void MulAdd(V& acc, float x, V w) {
  acc += x * w;
}
template <typename V>
DFARM_KERNEL_INLINE V Add(V a, V b) {
  return a + b;
}
#else
struct Vec8 {
  float f[8];
};
inline Vec8 Splat(float v) { return Vec8{{v, v, v, v, v, v, v, v}}; }
inline Vec8 Zero() { return Splat(0.0f); }
inline Vec8 ClampVec(Vec8 v, Vec8 lo, Vec8 hi) {
  for (int i = 0; i < 8; ++i) v.f[i] = std::min(std::max(v.f[i], lo.f[i]), hi.f[i]);
  return v;
}
inline void MulAdd(Vec8& acc, float x, Vec8 w) {
  for (int i = 0; i < 8; ++i) acc.f[i] += x * w.f[i];
}
inline Vec8 Add(Vec8 a, Vec8 b) {
  for (int i = 0; i < 8; ++i) a.f[i] += b.f[i];
  return a;
}
#endif
template <typename V = Vec8>
DFARM_KERNEL_INLINE V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// What one output row of one channel block reads: the image of its batch,
// the filter block and bias at its first channel, and the activation.
struct RowArgs {
  const float* image;   // [H][W][3]
  const float* filter;  // the block's [KH][KW][3][8 * V]
  const float* bias;    // the block's first channel
  float* out;           // the row's first pixel, the block's first channel
  int ky0, ky1;         // the filter rows inside the input
  int iy0;              // the input row of filter row 0
  int cols;             // channels of the block to store (<= 8 * V)
  Vec8 lo, hi;
#if defined(DFARM_KERNEL_WIDE)
  Vec16 lo16, hi16;  // the same in 16 lanes (the DFARM_KERNEL_V4 variant)
#endif
  // The folded ADD (null: none) at the row's first pixel, its stride per
  // pixel, and the block's channels [addend_lo, addend_hi) it has values
  // for, counted from the block's first channel.
  const float* addend;
  int64_t addend_stride;
  int addend_lo, addend_hi;
};

// v plus the addend's values of the block's channels [first, first + L)
// of one pixel (L: the lanes of a V; +0.0f in the lanes it has none for), as
// the GEMM epilogue adds them.
template <typename V>
DFARM_KERNEL_INLINE V AddAddend(V v, const float* pixel_addend, const RowArgs& a, int first) {
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(float));
  alignas(sizeof(V)) float add[L];
  for (int l = 0; l < L; ++l) {
    const int x = first + l;
    add[l] = x >= a.addend_lo && x < a.addend_hi ? pixel_addend[x - a.addend_lo] : 0.0f;
  }
  return Add(v, Load<V>(add));
}

// Stores the block's channels [first, first + L) of r at o + first (L: the
// lanes of a V), those below a.cols only.
template <typename V>
DFARM_KERNEL_INLINE void StoreCols(float* o, V r, const RowArgs& a, int first) {
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(float));
  const int keep = a.cols - first;
  if (keep >= L) {
    std::memcpy(o + first, &r, sizeof(r));
  } else if (keep > 0) {
    std::memcpy(o + first, &r, static_cast<size_t>(keep) * sizeof(float));
  }
}

// P output pixels (stride_w apart, the first at input column ix0) x 8*V
// channels, filter columns [kx0, kx1) (inside the input for every pixel).
template <int V, int P, bool kAddend>
DFARM_KERNEL_INLINE void Pixels(const ConvHwc3Params& p, const RowArgs& a, int ox, int kx0,
                                int kx1) {
  const int ix0 = ox * p.stride_w - p.pad_left;
  float* out = a.out + static_cast<ptrdiff_t>(ox) * p.out_c;
  Vec8 acc[P][V];
  DFARM_KERNEL_UNROLL
  for (int i = 0; i < P; ++i) {
    DFARM_KERNEL_UNROLL
    for (int v = 0; v < V; ++v) acc[i][v] = Zero();
  }
  const ptrdiff_t pixel = static_cast<ptrdiff_t>(p.stride_w) * kInC;
  for (int ky = a.ky0; ky < a.ky1; ++ky) {
    const float* x = a.image + (static_cast<ptrdiff_t>(a.iy0 + ky) * p.in_w + ix0 + kx0) * kInC;
    const float* w = a.filter + (static_cast<ptrdiff_t>(ky) * p.kernel_w + kx0) * kInC * kLanes * V;
    for (int kx = kx0; kx < kx1; ++kx, x += kInC, w += kInC * kLanes * V) {
      DFARM_KERNEL_UNROLL
      for (int c = 0; c < kInC; ++c) {
        Vec8 wv[V];
        DFARM_KERNEL_UNROLL
        for (int v = 0; v < V; ++v) wv[v] = Load(w + (c * V + v) * kLanes);
        DFARM_KERNEL_UNROLL
        for (int i = 0; i < P; ++i) {
          const float xv = x[i * pixel + c];
          DFARM_KERNEL_UNROLL
          for (int v = 0; v < V; ++v) MulAdd(acc[i][v], xv, wv[v]);
        }
      }
    }
  }
  DFARM_KERNEL_UNROLL
  for (int i = 0; i < P; ++i) {
    float* o = out + static_cast<ptrdiff_t>(i) * p.out_c;
    DFARM_KERNEL_UNROLL
    for (int v = 0; v < V; ++v) {
      Vec8 r = Add(Load(a.bias + v * kLanes), acc[i][v]);
      if constexpr (kAddend) {
        r = AddAddend(r, a.addend + (ox + i) * a.addend_stride, a, v * kLanes);
      }
      StoreCols(o, ClampVec(r, a.lo, a.hi), a, v * kLanes);
    }
  }
}

#if defined(DFARM_KERNEL_WIDE)
// Pixels() in the DFARM_KERNEL_V4 variant: the block's 8*V channels as V/2
// Vec16 and, for an odd V, a last Vec8 (the packed filter's layout is the
// same). Each lane's sum is Pixels()'s.
template <int V, int P, bool kAddend>
DFARM_KERNEL_INLINE void WidePixels(const ConvHwc3Params& p, const RowArgs& a, int ox, int kx0,
                                    int kx1) {
  constexpr int kWide = V / 2;       // Vec16 per pixel
  constexpr bool kOdd = V % 2 != 0;  // and a last Vec8
  constexpr int kTail = kWide * 2 * kLanes;
  static_assert(kWide > 0, "a block of 8 channels has no Vec16");
  const int ix0 = ox * p.stride_w - p.pad_left;
  float* out = a.out + static_cast<ptrdiff_t>(ox) * p.out_c;
  Vec16 acc[P][kWide];
  Vec8 tail[P];
  DFARM_KERNEL_UNROLL
  for (int i = 0; i < P; ++i) {
    DFARM_KERNEL_UNROLL
    for (int v = 0; v < kWide; ++v) acc[i][v] = Vec16{};
    tail[i] = Vec8{};
  }
  const ptrdiff_t pixel = static_cast<ptrdiff_t>(p.stride_w) * kInC;
  for (int ky = a.ky0; ky < a.ky1; ++ky) {
    const float* x = a.image + (static_cast<ptrdiff_t>(a.iy0 + ky) * p.in_w + ix0 + kx0) * kInC;
    const float* w = a.filter + (static_cast<ptrdiff_t>(ky) * p.kernel_w + kx0) * kInC * kLanes * V;
    for (int kx = kx0; kx < kx1; ++kx, x += kInC, w += kInC * kLanes * V) {
      DFARM_KERNEL_UNROLL
      for (int c = 0; c < kInC; ++c) {
        const float* wc = w + c * V * kLanes;
        Vec16 wv[kWide];
        DFARM_KERNEL_UNROLL
        for (int v = 0; v < kWide; ++v) wv[v] = Load<Vec16>(wc + v * 2 * kLanes);
        Vec8 wt{};
        if constexpr (kOdd) wt = Load(wc + kTail);
        DFARM_KERNEL_UNROLL
        for (int i = 0; i < P; ++i) {
          const float xv = x[i * pixel + c];
          if constexpr (kOdd) {
            // One broadcast of x for both, its low half for the Vec8 (x - 0
            // is x; the empty asm keeps GCC from folding a broadcast into
            // each product's memory operand, two loads per pixel).
            Vec16 xb = xv - Vec16{};
            asm("" : "+v"(xb));
            DFARM_KERNEL_UNROLL
            for (int v = 0; v < kWide; ++v) acc[i][v] += xb * wv[v];
            tail[i] += __builtin_shufflevector(xb, xb, 0, 1, 2, 3, 4, 5, 6, 7) * wt;
          } else {
            DFARM_KERNEL_UNROLL
            for (int v = 0; v < kWide; ++v) MulAdd(acc[i][v], xv, wv[v]);
          }
        }
      }
    }
  }
  DFARM_KERNEL_UNROLL
  for (int i = 0; i < P; ++i) {
    float* o = out + static_cast<ptrdiff_t>(i) * p.out_c;
    const float* pixel_addend = kAddend ? a.addend + (ox + i) * a.addend_stride : nullptr;
    DFARM_KERNEL_UNROLL
    for (int v = 0; v < kWide; ++v) {
      Vec16 r = Add(Load<Vec16>(a.bias + v * 2 * kLanes), acc[i][v]);
      if constexpr (kAddend) r = AddAddend(r, pixel_addend, a, v * 2 * kLanes);
      StoreCols(o, ClampVec(r, a.lo16, a.hi16), a, v * 2 * kLanes);
    }
    if constexpr (kOdd) {
      Vec8 r = Add(Load(a.bias + kTail), tail[i]);
      if constexpr (kAddend) r = AddAddend(r, pixel_addend, a, kTail);
      StoreCols(o, ClampVec(r, a.lo, a.hi), a, kTail);
    }
  }
}
#endif

// P pixels of Pixels() or, in the DFARM_KERNEL_V4 variant (Wide) with 16
// channels or more, WidePixels().
template <bool Wide, int V, int P, bool kAddend>
DFARM_KERNEL_INLINE void AnyPixels(const ConvHwc3Params& p, const RowArgs& a, int ox, int kx0,
                                   int kx1) {
#if defined(DFARM_KERNEL_WIDE)
  if constexpr (Wide && V >= 2) {
    WidePixels<V, P, kAddend>(p, a, ox, kx0, kx1);
    return;
  }
#endif
  Pixels<V, P, kAddend>(p, a, ox, kx0, kx1);
}

// One output row of one block of 8*V channels: pixels with clipped windows
// one at a time, the interior kPixels at a time (3 for 24 channels, else 4;
// 6 in WidePixels(), whose pixel takes at most 2 of the 32 registers).
template <bool Wide, int V, bool kAddend>
DFARM_KERNEL_INLINE void RowBlock(const ConvHwc3Plan& plan, const RowArgs& a) {
  constexpr int kPixels = Wide && V >= 2 ? 6 : V == 3 ? 3 : 4;
  const ConvHwc3Params& p = plan.params;
  const auto single = [&](int ox) {
    const int ix0 = ox * p.stride_w - p.pad_left;
    const int kx0 = std::max(0, -ix0), kx1 = std::min(p.kernel_w, p.in_w - ix0);
    AnyPixels<Wide, V, 1, kAddend>(p, a, ox, kx0, std::max(kx0, kx1));
  };
  for (int ox = 0; ox < plan.ox_begin; ++ox) single(ox);
  int ox = plan.ox_begin;
  for (; ox + kPixels <= plan.ox_end; ox += kPixels) {
    AnyPixels<Wide, V, kPixels, kAddend>(p, a, ox, 0, p.kernel_w);
  }
  for (; ox < p.out_w; ++ox) single(ox);
}

// RowBlock() of v vectors (1 to 3).
template <bool Wide, bool kAddend>
DFARM_KERNEL_INLINE void RowBlocks(const ConvHwc3Plan& plan, const RowArgs& a, int v) {
  if (v == 3) {
    RowBlock<Wide, 3, kAddend>(plan, a);
  } else if (v == 2) {
    RowBlock<Wide, 2, kAddend>(plan, a);
  } else {
    RowBlock<Wide, 1, kAddend>(plan, a);
  }
}

// Output rows [begin, end) of all batches (row r: batch r / OH, row r % OH).
template <bool Wide>
DFARM_KERNEL_INLINE void Rows(const ConvHwc3Plan& plan, const float* input, float* output,
                              const ConvHwc3Addend& addend, int64_t begin, int64_t end) {
  const ConvHwc3Params& p = plan.params;
  const int taps = p.kernel_h * p.kernel_w * kInC;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / p.out_h;
    const int oy = static_cast<int>(r % p.out_h);
    RowArgs a;
    a.image = input + n * p.in_h * p.in_w * kInC;
    a.iy0 = oy * p.stride_h - p.pad_top;
    a.ky0 = std::max(0, -a.iy0);
    a.ky1 = std::max(a.ky0, std::min(p.kernel_h, p.in_h - a.iy0));
    a.lo = Splat(p.act_min);
    a.hi = Splat(p.act_max);
#if defined(DFARM_KERNEL_WIDE)
    if constexpr (Wide) {
      a.lo16 = Splat16(p.act_min);
      a.hi16 = Splat16(p.act_max);
    }
#endif
    float* row = output + r * p.out_w * p.out_c;
    const int64_t addend_stride = addend.end - addend.begin;
    a.addend_stride = addend_stride;
    // Blocks of 24 channels where they divide the rest or more than 32
    // remain, else 16, then 8 (the last one possibly partial).
    int oc = 0;
    while (oc < p.out_c) {
      const int rest = (p.out_c - oc + kLanes - 1) / kLanes;  // vectors left
      const int v = rest % 3 == 0 || rest > 4 ? 3 : rest >= 2 ? 2 : 1;
      a.filter = plan.packed_filter.data() + static_cast<ptrdiff_t>(oc) * taps;
      a.bias = plan.bias.data() + oc;
      a.out = row + oc;
      a.cols = std::min(v * kLanes, p.out_c - oc);
      a.addend = addend.data != nullptr ? addend.data + r * p.out_w * addend_stride : nullptr;
      a.addend_lo = addend.begin - oc;
      a.addend_hi = std::min(addend.end, p.out_c) - oc;
      if (a.addend != nullptr) {
        RowBlocks<Wide, true>(plan, a, v);
      } else {
        RowBlocks<Wide, false>(plan, a, v);
      }
      oc += v * kLanes;
    }
  }
}

DFARM_KERNEL_CLONES void RunRows(const ConvHwc3Plan& plan, const float* input, float* output,
                                 const ConvHwc3Addend& addend, int64_t begin, int64_t end) {
  Rows<false>(plan, input, output, addend, begin, end);
}

#if defined(DFARM_KERNEL_WIDE)
DFARM_KERNEL_V4 void RunRowsWide(const ConvHwc3Plan& plan, const float* input, float* output,
                                 const ConvHwc3Addend& addend, int64_t begin, int64_t end) {
  Rows<true>(plan, input, output, addend, begin, end);
}
#endif

// RunRowsWide() where WideKernels() says so, else RunRows().
using RowsFn = void (*)(const ConvHwc3Plan&, const float*, float*, const ConvHwc3Addend&, int64_t,
                        int64_t);
RowsFn PickRows() {
#if defined(DFARM_KERNEL_WIDE)
  if (WideKernels()) return RunRowsWide;
#endif
  return RunRows;
}

// Tasks of output rows when a layer has at least this many outputs.
constexpr int64_t kMinParallelOutputs = 8192;

}  // namespace

bool ConvHwc3Supported(const ConvHwc3Params& p) {
  return p.kernel_h > 0 && p.kernel_w > 0 && p.kernel_h * p.kernel_w * kInC <= 256 &&
         p.stride_h > 0 && p.stride_w > 0 && p.pad_top >= 0 && p.pad_left >= 0 && p.out_c > 0;
}

ConvHwc3Plan ReplanConvHwc3(ConvHwc3Plan&& from, const ConvHwc3Params& params, const float* bias) {
  ConvHwc3Plan plan;
  const ConvHwc3Params& p = params;
  plan.params = p;
  plan.packed_filter = std::move(from.packed_filter);
  plan.bias.assign((p.out_c + kLanes - 1) / kLanes * kLanes, 0.0f);
  if (bias != nullptr) std::copy_n(bias, p.out_c, plan.bias.begin());
  // Interior columns: ix0 >= 0 and ix0 + KW <= W.
  plan.ox_begin = p.out_w;
  plan.ox_end = p.out_w;
  for (int ox = 0; ox < p.out_w; ++ox) {
    const int ix0 = ox * p.stride_w - p.pad_left;
    if (ix0 >= 0 && ix0 + p.kernel_w <= p.in_w) {
      if (plan.ox_begin == p.out_w) plan.ox_begin = ox;
      plan.ox_end = ox + 1;
    }
  }
  return plan;
}

ConvHwc3Plan PlanConvHwc3(const ConvHwc3Params& params, const float* filter, const float* bias) {
  ConvHwc3Plan plan;
  const ConvHwc3Params& p = params;
  const int padded = (p.out_c + kLanes - 1) / kLanes * kLanes;
  const int taps = p.kernel_h * p.kernel_w * kInC;
  // Block b (channels [oc0, oc0 + 8V)) holds, per tap, its 8V channels; the
  // block widths are RunRows()'s, so pack per channel: block start oc0,
  // width 8V, tap t, lane oc - oc0 at oc0 * taps + t * 8V + (oc - oc0).
  plan.packed_filter.assign(static_cast<size_t>(padded) * taps, 0.0f);
  int oc0 = 0;
  while (oc0 < p.out_c) {
    const int rest = (p.out_c - oc0 + kLanes - 1) / kLanes;
    const int v = rest % 3 == 0 || rest > 4 ? 3 : rest >= 2 ? 2 : 1;
    const int width = v * kLanes;
    for (int oc = oc0; oc < std::min(p.out_c, oc0 + width); ++oc) {
      for (int t = 0; t < taps; ++t) {
        plan.packed_filter[static_cast<size_t>(oc0) * taps + static_cast<size_t>(t) * width +
                           (oc - oc0)] = filter[static_cast<size_t>(oc) * taps + t];
      }
    }
    oc0 += width;
  }
  return ReplanConvHwc3(std::move(plan), params, bias);
}

void RunConvHwc3(const ConvHwc3Plan& plan, const float* input, float* output,
                 const ExecutionContext* context, const ConvHwc3Addend& addend) {
  const ConvHwc3Params& p = plan.params;
  const int64_t rows = static_cast<int64_t>(p.batches) * p.out_h;
  if (rows <= 0 || p.out_w <= 0) return;
  const int threads = context != nullptr ? context->num_threads : 1;
  const bool split =
      threads > 1 && static_cast<int64_t>(p.out_w) * p.out_c * rows >= kMinParallelOutputs;
  const RowsFn run = PickRows();
  if (!split) {
    run(plan, input, output, addend, 0, rows);
    return;
  }
  const int tasks = static_cast<int>(TaskCount(rows, threads));
  ParallelFor(context, static_cast<size_t>(tasks), [&](size_t t, int) {
    const Range r = SplitRange(rows, tasks, static_cast<int>(t));
    if (r.size() > 0) run(plan, input, output, addend, r.begin, r.end);
  });
}

}  // namespace dfarm::runtime
