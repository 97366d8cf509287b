#include "runtime/kernels/quantized_gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DFARM_QGEMM_AVX2 1
#endif

namespace dfarm::runtime {
namespace {

// Channels a tile computes at once.
constexpr int64_t kTileChannels = 2;

// sums[p * 2 + c] = x_p . (w_c + offset_c) over `depth` (a multiple of
// kQuantizedDepthAlign), for 4 rows x_p and 2 weight rows w_c of type W.
template <typename W>
void DotTilePlain(const int16_t* const (&x)[kQuantizedTileRows],
                  const uint8_t* const (&w)[kTileChannels], const int16_t (&offset)[kTileChannels],
                  int64_t depth, int32_t* sums) {
  for (int64_t p = 0; p < kQuantizedTileRows; ++p) {
    for (int64_t c = 0; c < kTileChannels; ++c) {
      const W* row = reinterpret_cast<const W*>(w[c]);
      int32_t acc = 0;
      for (int64_t k = 0; k < depth; ++k) {
        acc += static_cast<int32_t>(x[p][k]) * (static_cast<int32_t>(row[k]) + offset[c]);
      }
      sums[p * kTileChannels + c] = acc;
    }
  }
}

#ifdef DFARM_QGEMM_AVX2
bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// The same sums on AVX2: 16 weights widened to int16 with their row's
// offset added, then VPMADDWD multiplies 16 int16 pairs and adds
// neighbouring products into 8 int32 lanes (|x|, |w| <= 255, so a pair sums
// to at most 130050), one accumulator per (row, channel); the 8 lanes of
// each are added at the end.
template <bool kInt8>
__attribute__((target("avx2"))) inline __m256i LoadWeights16(const uint8_t* w, __m256i offset) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  return _mm256_add_epi16(kInt8 ? _mm256_cvtepi8_epi16(bytes) : _mm256_cvtepu8_epi16(bytes),
                          offset);
}

template <bool kInt8>
__attribute__((target("avx2"))) void DotTileAvx2(const int16_t* const (&x)[kQuantizedTileRows],
                                                 const uint8_t* const (&w)[kTileChannels],
                                                 const int16_t (&offset)[kTileChannels],
                                                 int64_t depth, int32_t* sums) {
  const __m256i offset0 = _mm256_set1_epi16(offset[0]);
  const __m256i offset1 = _mm256_set1_epi16(offset[1]);
  __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00;
  __m256i a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  for (int64_t k = 0; k < depth; k += kQuantizedDepthAlign) {
    const __m256i w0 = LoadWeights16<kInt8>(w[0] + k, offset0);
    const __m256i w1 = LoadWeights16<kInt8>(w[1] + k, offset1);
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[0] + k));
    a00 = _mm256_add_epi32(a00, _mm256_madd_epi16(v, w0));
    a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(v, w1));
    v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[1] + k));
    a10 = _mm256_add_epi32(a10, _mm256_madd_epi16(v, w0));
    a11 = _mm256_add_epi32(a11, _mm256_madd_epi16(v, w1));
    v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[2] + k));
    a20 = _mm256_add_epi32(a20, _mm256_madd_epi16(v, w0));
    a21 = _mm256_add_epi32(a21, _mm256_madd_epi16(v, w1));
    v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[3] + k));
    a30 = _mm256_add_epi32(a30, _mm256_madd_epi16(v, w0));
    a31 = _mm256_add_epi32(a31, _mm256_madd_epi16(v, w1));
  }
  // Pairwise sums down to [a00 a01 a10 a11 | ...] per 128-bit half, then
  // the two halves added: sums in (row, channel) order.
  const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(a00, a01), _mm256_hadd_epi32(a10, a11));
  const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(a20, a21), _mm256_hadd_epi32(a30, a31));
  const __m128i s0 = _mm_add_epi32(_mm256_castsi256_si128(h0), _mm256_extracti128_si256(h0, 1));
  const __m128i s1 = _mm_add_epi32(_mm256_castsi256_si128(h1), _mm256_extracti128_si256(h1, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(sums), s0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + 4), s1);
}

__attribute__((target("avx2"))) inline __m256i LoadI32(const int32_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The doubling high multiply of the even 32-bit lanes of a and b, in the
// low half of each 64-bit lane: the 64-bit product, the nudge, then a
// division by 2^31 that truncates, whose 32 result bits are bits 31..62 of
// the sum (so a logical shift gives them).
__attribute__((target("avx2"))) inline __m256i HighHalf(__m256i a, __m256i b) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i ab = _mm256_mul_epi32(a, b);  // signed 64-bit
  const __m256i negative = _mm256_cmpgt_epi64(zero, ab);
  const __m256i nudge = _mm256_blendv_epi8(_mm256_set1_epi64x(int64_t{1} << 30),
                                           _mm256_set1_epi64x(1 - (int64_t{1} << 30)), negative);
  __m256i sum = _mm256_add_epi64(ab, nudge);
  // The division truncates: a negative sum first gets 2^31 - 1 added.
  const __m256i sum_negative = _mm256_cmpgt_epi64(zero, sum);
  sum = _mm256_add_epi64(
      sum, _mm256_and_si256(sum_negative, _mm256_set1_epi64x((int64_t{1} << 31) - 1)));
  return _mm256_srli_epi64(sum, 31);
}

// Requantize() of 8 channels from `c` on: x = acc + bias, shifted left by
// max(shift, 0); the doubling high multiply (HighHalf() of the even and
// the odd lanes); then the rounding right shift by max(-shift, 0), halves up
// ((t >> 1) + (t & 1) with t = high >> (shift - 1)) or away from zero
// (RoundingDivideByPOT), the output offset and the clamp. The multiplier
// is never negative (QuantizeMultiplier), so the one saturating case of
// the high multiply (both INT32_MIN) cannot occur.
__attribute__((target("avx2"))) void Requantize8(const int32_t* acc, int64_t c,
                                                 const QuantizedConvParams& q, int32_t* out) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i x = _mm256_add_epi32(LoadI32(acc + c), LoadI32(q.bias.data() + c));
  const __m256i shift = LoadI32(q.shifts.data() + c);
  const __m256i left = _mm256_max_epi32(shift, zero);
  const __m256i right = _mm256_max_epi32(_mm256_sub_epi32(zero, shift), zero);
  const __m256i shifted = _mm256_sllv_epi32(x, left);
  const __m256i m = LoadI32(q.multipliers.data() + c);
  const __m256i even = HighHalf(shifted, m);
  const __m256i odd = HighHalf(_mm256_srli_epi64(shifted, 32), _mm256_srli_epi64(m, 32));
  const __m256i high = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  __m256i v;
  if (q.round_half_up) {
    const __m256i t = _mm256_srav_epi32(high, _mm256_max_epi32(_mm256_sub_epi32(right, one), zero));
    const __m256i rounded = _mm256_add_epi32(_mm256_srai_epi32(t, 1), _mm256_and_si256(t, one));
    v = _mm256_blendv_epi8(rounded, high, _mm256_cmpeq_epi32(right, zero));
  } else {
    const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
    const __m256i remainder = _mm256_and_si256(high, mask);
    const __m256i threshold = _mm256_add_epi32(
        _mm256_srai_epi32(mask, 1), _mm256_and_si256(_mm256_cmpgt_epi32(zero, high), one));
    v = _mm256_add_epi32(_mm256_srav_epi32(high, right),
                         _mm256_and_si256(_mm256_cmpgt_epi32(remainder, threshold), one));
  }
  v = _mm256_add_epi32(v, _mm256_set1_epi32(q.output_offset));
  v = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(q.act_min)),
                       _mm256_set1_epi32(q.act_max));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v);
}
#endif

// DotTileAvx2() where w.simd, else DotTilePlain(), for w's weight type.
void DotTile(const QuantizedWeights& w, const int16_t* const (&x)[kQuantizedTileRows],
             const uint8_t* const (&rows)[kTileChannels], const int16_t (&offset)[kTileChannels],
             int32_t* sums) {
#ifdef DFARM_QGEMM_AVX2
  if (w.simd) {
    if (w.is_int8) {
      DotTileAvx2<true>(x, rows, offset, w.stride, sums);
    } else {
      DotTileAvx2<false>(x, rows, offset, w.stride, sums);
    }
    return;
  }
#endif
  if (w.is_int8) {
    DotTilePlain<int8_t>(x, rows, offset, w.stride, sums);
  } else {
    DotTilePlain<uint8_t>(x, rows, offset, w.stride, sums);
  }
}

}  // namespace

template <typename T>
void RequantizeRow(const int32_t* acc, int64_t channels, const QuantizedConvParams& q, bool simd,
                   T* out) {
  int64_t c = 0;
#ifdef DFARM_QGEMM_AVX2
  if (simd) {
    int32_t v[8];
    for (; c + 8 <= channels; c += 8) {
      Requantize8(acc, c, q, v);
      for (int i = 0; i < 8; ++i) out[c + i] = static_cast<T>(v[i]);
    }
  }
#else
  (void)simd;
#endif
  for (; c < channels; ++c) {
    out[c] = static_cast<T>(q.Requantize(acc[c] + q.bias[c], static_cast<int>(c)));
  }
}

bool QuantizedGemmHasSimd() {
#ifdef DFARM_QGEMM_AVX2
  return CpuHasAvx2();
#else
  return false;
#endif
}

template <typename T>
QuantizedWeights PackQuantizedWeights(const T* w, int64_t rows, int64_t depth,
                                      const std::vector<int32_t>& filter_offsets) {
  QuantizedWeights packed;
  packed.rows = rows;
  packed.depth = depth;
  packed.stride = QuantizedPackedDepth(depth);
  packed.data.assign(static_cast<size_t>(rows * packed.stride), 0);
  packed.is_int8 = std::is_same_v<T, int8_t>;
  packed.simd = QuantizedGemmHasSimd();
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(packed.data.data() + r * packed.stride, w + r * depth, static_cast<size_t>(depth));
    packed.offsets.push_back(static_cast<int16_t>(filter_offsets[r]));
  }
  return packed;
}

QuantizedWeights PackQuantizedWeights(const Tensor& weights, int64_t rows, int64_t depth,
                                      const std::vector<int32_t>& filter_offsets) {
  return weights.dtype == DType::kInt8
             ? PackQuantizedWeights(weights.data_as<int8_t>(), rows, depth, filter_offsets)
             : PackQuantizedWeights(weights.data_as<uint8_t>(), rows, depth, filter_offsets);
}

template <typename T>
void WidenWithOffset(const T* x, int64_t n, int32_t offset, int16_t* out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<int16_t>(static_cast<int32_t>(x[i]) + offset);
}

template <typename T>
void QuantizedGemmTile(const int16_t* x, int64_t rows, const QuantizedWeights& w,
                       const QuantizedConvParams& q, int32_t* sums, T* out, int64_t out_stride) {
  // Rows past `rows` read the last one again; their sums are dropped.
  const int16_t* xs[kQuantizedTileRows];
  for (int64_t p = 0; p < kQuantizedTileRows; ++p) xs[p] = x + std::min(p, rows - 1) * w.stride;
  for (int64_t c = 0; c < w.rows; c += kTileChannels) {
    const int64_t c1 = std::min(c + 1, w.rows - 1);
    const uint8_t* ws[kTileChannels] = {w.data.data() + c * w.stride,
                                        w.data.data() + c1 * w.stride};
    const int16_t offsets[kTileChannels] = {w.offsets[c], w.offsets[c1]};
    int32_t tile[kQuantizedTileRows * kTileChannels];
    DotTile(w, xs, ws, offsets, tile);
    const int64_t channels = std::min(kTileChannels, w.rows - c);
    for (int64_t p = 0; p < rows; ++p) {
      for (int64_t j = 0; j < channels; ++j) sums[p * w.rows + c + j] = tile[p * kTileChannels + j];
    }
  }
  for (int64_t p = 0; p < rows; ++p) {
    RequantizeRow(sums + p * w.rows, w.rows, q, w.simd, out + p * out_stride);
  }
}

#define DFARM_QGEMM_INSTANTIATE(T)                                                       \
  template QuantizedWeights PackQuantizedWeights<T>(const T*, int64_t, int64_t,          \
                                                    const std::vector<int32_t>&);        \
  template void WidenWithOffset<T>(const T*, int64_t, int32_t, int16_t*);                \
  template void QuantizedGemmTile<T>(const int16_t*, int64_t, const QuantizedWeights&,   \
                                     const QuantizedConvParams&, int32_t*, T*, int64_t); \
  template void RequantizeRow<T>(const int32_t*, int64_t, const QuantizedConvParams&, bool, T*);
DFARM_QGEMM_INSTANTIATE(int8_t)
DFARM_QGEMM_INSTANTIATE(uint8_t)
#undef DFARM_QGEMM_INSTANTIATE

}  // namespace dfarm::runtime
