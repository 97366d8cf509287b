#include "runtime/kernels/quantized_gemm.h"

#include <algorithm>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DFARM_QGEMM_AVX2 1
#endif

namespace dfarm::runtime {
namespace {

// Channels a tile computes at once.
constexpr int64_t kTileChannels = 2;

// sums[p * 2 + c] = x_p . w_c over `depth` int16 (a multiple of
// kQuantizedDepthAlign), for 4 rows x_p and 2 rows w_c.
void DotTilePlain(const int16_t* const (&x)[kQuantizedTileRows],
                  const int16_t* const (&w)[kTileChannels], int64_t depth, int32_t* sums) {
  for (int64_t p = 0; p < kQuantizedTileRows; ++p) {
    for (int64_t c = 0; c < kTileChannels; ++c) {
      int32_t acc = 0;
      for (int64_t k = 0; k < depth; ++k) {
        acc += static_cast<int32_t>(x[p][k]) * static_cast<int32_t>(w[c][k]);
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

// The same sums on AVX2: VPMADDWD multiplies 16 int16 pairs and adds
// neighbouring products into 8 int32 lanes (|x|, |w| <= 255, so a pair sums
// to at most 130050), one accumulator per (row, channel); the 8 lanes of
// each are added at the end.
__attribute__((target("avx2"))) void DotTileAvx2(const int16_t* const (&x)[kQuantizedTileRows],
                                                 const int16_t* const (&w)[kTileChannels],
                                                 int64_t depth, int32_t* sums) {
  __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00;
  __m256i a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  for (int64_t k = 0; k < depth; k += kQuantizedDepthAlign) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[0] + k));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[1] + k));
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
#endif

}  // namespace

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
  packed.simd = QuantizedGemmHasSimd();
  for (int64_t r = 0; r < rows; ++r) {
    WidenWithOffset(w + r * depth, depth, filter_offsets[r],
                    packed.data.data() + r * packed.stride);
  }
  return packed;
}

template <typename T>
void WidenWithOffset(const T* x, int64_t n, int32_t offset, int16_t* out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<int16_t>(static_cast<int32_t>(x[i]) + offset);
}

template <typename T>
void QuantizedGemmTile(const int16_t* x, int64_t rows, const QuantizedWeights& w,
                       const QuantizedConvParams& q, T* out, int64_t out_stride) {
  // Rows past `rows` read the last one again; their sums are dropped.
  const int16_t* xs[kQuantizedTileRows];
  for (int64_t p = 0; p < kQuantizedTileRows; ++p) xs[p] = x + std::min(p, rows - 1) * w.stride;
  for (int64_t c = 0; c < w.rows; c += kTileChannels) {
    const int16_t* ws[kTileChannels] = {w.data.data() + c * w.stride,
                                        w.data.data() + std::min(c + 1, w.rows - 1) * w.stride};
    int32_t sums[kQuantizedTileRows * kTileChannels];
#ifdef DFARM_QGEMM_AVX2
    if (w.simd) {
      DotTileAvx2(xs, ws, w.stride, sums);
    } else {
      DotTilePlain(xs, ws, w.stride, sums);
    }
#else
    DotTilePlain(xs, ws, w.stride, sums);
#endif
    const int64_t channels = std::min(kTileChannels, w.rows - c);
    for (int64_t p = 0; p < rows; ++p) {
      for (int64_t j = 0; j < channels; ++j) {
        const int ch = static_cast<int>(c + j);
        out[p * out_stride + ch] =
            static_cast<T>(q.Requantize(sums[p * kTileChannels + j] + q.bias[ch], ch));
      }
    }
  }
}

#define DFARM_QGEMM_INSTANTIATE(T)                                                     \
  template QuantizedWeights PackQuantizedWeights<T>(const T*, int64_t, int64_t,        \
                                                    const std::vector<int32_t>&);      \
  template void WidenWithOffset<T>(const T*, int64_t, int32_t, int16_t*);              \
  template void QuantizedGemmTile<T>(const int16_t*, int64_t, const QuantizedWeights&, \
                                     const QuantizedConvParams&, T*, int64_t);
DFARM_QGEMM_INSTANTIATE(int8_t)
DFARM_QGEMM_INSTANTIATE(uint8_t)
#undef DFARM_QGEMM_INSTANTIATE

}  // namespace dfarm::runtime
