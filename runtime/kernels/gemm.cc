#include "runtime/kernels/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quant_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DFARM_GEMM_AVX2 1
#endif

namespace dfarm::runtime {
namespace {

using Index = Eigen::Index;

// Eigen's blocking parameters with the packing buffers pointing at our
// workspace; GEBP then uses them instead of allocating its own per call.
class FixedBlocking : public Eigen::internal::level3_blocking<float, float> {
 public:
  FixedBlocking(Index kc, Index mc, Index nc, float* block_a, float* block_b) {
    this->m_kc = kc;
    this->m_mc = mc;
    this->m_nc = nc;
    this->m_blockA = block_a;
    this->m_blockB = block_b;
  }
};

float At(const GemmOperand& op, int64_t row, int64_t col) {
  return op.transposed ? op.data[col * op.stride + row] : op.data[row * op.stride + col];
}

template <int kLhsOrder, int kRhsOrder>
void RunGebp(Index m, Index n, Index k, const GemmOperand& a, const GemmOperand& b, float* c,
             Index c_stride, FixedBlocking& blocking) {
  Eigen::internal::general_matrix_matrix_product<Index, float, kLhsOrder, false, float, kRhsOrder,
                                                 false, Eigen::RowMajor, 1>::run(m, n, k, a.data,
                                                                                 a.stride, b.data,
                                                                                 b.stride, c, 1,
                                                                                 c_stride, 1.0f,
                                                                                 blocking);
}

#ifdef DFARM_GEMM_AVX2
// A Goto-style blocked product with a 6x16 AVX2/FMA register tile, used when
// the CPU has AVX2 and FMA (the default build targets plain x86-64, where
// Eigen's kernels are SSE only). Packing pads the edges with zeros.
constexpr int64_t kMr = 6, kNr = 16, kKc = 256, kMc = 144;

bool CpuHasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The AVX-512 tile: 12 rows x 16 columns (one zmm register per row), on the
// same 16-column B panels; every element's sum is the same chain of FMAs as
// in the AVX2 kernels, so both give the same bits.
constexpr int64_t kMr512 = 12;

// What a micro tile does with C after its product: add C's old values (or
// the bias, on the first depth block of a product with one) and, on the
// last depth block, clamp.
struct TileEpilogue {
  const float* bias = nullptr;  // at the tile's first column; null: add C
  bool clamp = false;
  float min = 0.0f, max = 0.0f;
  // On the last depth block, GemmEpilogue::addend's row of the tile's first
  // row (null: none), its stride, and the tile columns [addend_lo,
  // addend_hi) it has values for: tile column x adds addend[x - addend_lo].
  const float* addend = nullptr;
  int64_t addend_stride = 0;
  int64_t addend_lo = 0, addend_hi = 0;

  // Addend value of tile row r, column x: 0.0f outside the addend's columns.
  float AddendAt(int64_t r, int64_t x) const {
    return x >= addend_lo && x < addend_hi ? addend[r * addend_stride + x - addend_lo] : 0.0f;
  }
};

// Lanes [0, count) of an 8-float vector, count in [0, 8].
__attribute__((target("avx2,fma"))) inline __m256i LaneMask(int64_t count) {
  static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - count));
}

// `acc` (tile row r, columns [x0, x0 + 8), `cols` of them kept) plus the
// addend's values there (0.0f in the lanes it has none for).
__attribute__((target("avx2,fma"))) inline __m256 AddAddend(__m256 acc, int64_t r, int64_t x0,
                                                            int64_t cols, const TileEpilogue& e) {
  // Lanes [lo, hi) have addend values.
  const int64_t lo = std::max<int64_t>(e.addend_lo - x0, 0);
  const int64_t hi = std::min(e.addend_hi - x0, std::min<int64_t>(cols, 8));
  if (hi <= lo) return _mm256_add_ps(acc, _mm256_setzero_ps());
  if (lo == 0) {  // from the addend's element of column x0 on
    const float* src = e.addend + r * e.addend_stride + x0 - e.addend_lo;
    return _mm256_add_ps(acc,
                         hi == 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, LaneMask(hi)));
  }
  alignas(32) float v[8];  // the addend starts inside the vector (a channel pad)
  for (int64_t x = 0; x < 8; ++x) v[x] = x < cols ? e.AddendAt(r, x0 + x) : 0.0f;
  return _mm256_add_ps(acc, _mm256_load_ps(v));
}

// Stores one 8-column vector of a tile row (row r, columns from x0): acc
// plus C (or the bias), plus the addend (kAddend), clamped when asked; only
// `cols` (<= 8) columns.
template <bool kAddend>
__attribute__((target("avx2,fma"))) inline void StoreVector(__m256 acc, float* c, int64_t cols,
                                                            const float* bias,
                                                            const TileEpilogue& e, int64_t r,
                                                            int64_t x0) {
  if (cols >= 8) {
    acc = _mm256_add_ps(bias != nullptr ? _mm256_loadu_ps(bias) : _mm256_loadu_ps(c), acc);
    if constexpr (kAddend) acc = AddAddend(acc, r, x0, cols, e);
    if (e.clamp) {
      acc = _mm256_min_ps(_mm256_set1_ps(e.max), _mm256_max_ps(_mm256_set1_ps(e.min), acc));
    }
    _mm256_storeu_ps(c, acc);
    return;
  }
  if (cols <= 0) return;
  const __m256i mask = LaneMask(cols);
  acc = _mm256_add_ps(_mm256_maskload_ps(bias != nullptr ? bias : c, mask), acc);
  if constexpr (kAddend) acc = AddAddend(acc, r, x0, cols, e);
  if (e.clamp) {
    acc = _mm256_min_ps(_mm256_set1_ps(e.max), _mm256_max_ps(_mm256_set1_ps(e.min), acc));
  }
  _mm256_maskstore_ps(c, mask, acc);
}

// Row r of a row-major tile of A (stride lda) with mr rows kept: rows past
// mr read row mr - 1, whose results the store drops.
inline const float* TileRow(const float* a, int64_t lda, int64_t r, int64_t mr) {
  return a + std::min(r, mr - 1) * lda;
}

// A 6 x (8 * kVectors) tile of C (mr <= 6 rows, nr <= 8 * kVectors columns
// kept) from a kc-deep product of A and a packed 16-column panel of B. A is
// a packed 6-row panel (element (r, p) at a[p * 6 + r]) when kPackedA, else
// row-major with stride lda (rows past mr read row mr - 1, results dropped).
// kAddend: e.addend is set (a template argument, so that the common
// epilogue has no test for it).
template <bool kPackedA, int kVectors, bool kAddend>
__attribute__((target("avx2,fma"))) void MicroKernel(int64_t kc, const float* a, int64_t lda,
                                                     const float* b, float* c, int64_t ldc,
                                                     int64_t mr, int64_t nr,
                                                     const TileEpilogue& epilogue) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  // Unused with a packed A.
  const float *a0 = a, *a1 = TileRow(a, lda, 1, mr), *a2 = TileRow(a, lda, 2, mr);
  const float *a3 = TileRow(a, lda, 3, mr), *a4 = TileRow(a, lda, 4, mr);
  const float* a5 = TileRow(a, lda, 5, mr);
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b + p * kNr);
    const __m256 b1 = kVectors == 2 ? _mm256_loadu_ps(b + p * kNr + 8) : b0;
    __m256 av;
#define DFARM_GEMM_ROW(R, ACC0, ACC1)                                                   \
  av = kPackedA ? _mm256_broadcast_ss(a + p * kMr + R) : _mm256_broadcast_ss(a##R + p); \
  ACC0 = _mm256_fmadd_ps(av, b0, ACC0);                                                 \
  if (kVectors == 2) ACC1 = _mm256_fmadd_ps(av, b1, ACC1);
    DFARM_GEMM_ROW(0, c00, c01)
    DFARM_GEMM_ROW(1, c10, c11)
    DFARM_GEMM_ROW(2, c20, c21)
    DFARM_GEMM_ROW(3, c30, c31)
    DFARM_GEMM_ROW(4, c40, c41)
    DFARM_GEMM_ROW(5, c50, c51)
#undef DFARM_GEMM_ROW
  }
  // A copy the stores to C cannot alias, so its fields stay in registers
  // (taken after the product, which needs every register).
  const TileEpilogue e = epilogue;
  const __m256 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  for (int64_t r = 0; r < mr; ++r) {
    float* row = c + r * ldc;
    StoreVector<kAddend>(acc[r][0], row, nr, e.bias, e, r, 0);
    if (kVectors == 2) {
      StoreVector<kAddend>(acc[r][1], row + 8, nr - 8, e.bias != nullptr ? e.bias + 8 : nullptr, e,
                           r, 8);
    }
  }
}

// Rows [i0, i0 + mc) x depth [p0, p0 + kc) of a transposed A into 6-row
// panels (p-major); a row-major A is read in place by the micro kernel.
void PackA(const GemmOperand& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out) {
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    const int64_t rows = std::min(kMr, mc - ir);
    for (int64_t p = 0; p < kc; ++p) {
      const float* col = a.data + (p0 + p) * a.stride + i0 + ir;
      for (int64_t r = 0; r < kMr; ++r) out[p * kMr + r] = r < rows ? col[r] : 0.0f;
    }
    out += kc * kMr;
  }
}

// Depth [p0, p0 + kc) x columns [j0, j0 + n) of B into 16-column panels
// (p-major), zeros past n.
void PackB(const GemmOperand& b, int64_t j0, int64_t n, int64_t p0, int64_t kc, float* out) {
  for (int64_t jr = 0; jr < n; jr += kNr) {
    const int64_t cols = std::min(kNr, n - jr);
    if (!b.transposed && cols == kNr) {
      for (int64_t p = 0; p < kc; ++p) {
        std::memcpy(out + p * kNr, b.data + (p0 + p) * b.stride + j0 + jr, kNr * sizeof(float));
      }
    } else if (b.transposed) {
      // Column j of B is row j of b.data: read each contiguously.
      for (int64_t j = 0; j < kNr; ++j) {
        if (j < cols) {
          const float* src = b.data + (j0 + jr + j) * b.stride + p0;
          for (int64_t p = 0; p < kc; ++p) out[p * kNr + j] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) out[p * kNr + j] = 0.0f;
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < kNr; ++j) {
          out[p * kNr + j] = j < cols ? b.data[(p0 + p) * b.stride + j0 + jr + j] : 0.0f;
        }
      }
    }
    out += kc * kNr;
  }
}

// StoreTile512() with its per-tile choices as template arguments (kBias:
// add the bias, loaded once, else C's old values; kClamp), so that the
// unrolled rows test only the row count and `acc` stays in registers.
template <bool kAddend, bool kBias, bool kClamp, int kRows>
__attribute__((target("avx512f"), always_inline)) inline void StoreRows512(
    const __m512 (&acc)[kRows], float* c, int64_t ldc, int64_t mr, int64_t nr, __mmask16 mask,
    const TileEpilogue& e) {
  const __m512 lo = _mm512_set1_ps(e.min), hi = _mm512_set1_ps(e.max);
  const __m512 bias = kBias ? _mm512_maskz_loadu_ps(mask, e.bias) : _mm512_setzero_ps();
  // Addend lanes [first, end) have values, read from its element of column
  // `first` on (expanded into place when first > 0: a channel pad).
  const int64_t first = kAddend ? std::max<int64_t>(e.addend_lo, 0) : 0;
  const int64_t end = kAddend ? std::min(e.addend_hi, std::min<int64_t>(nr, 16)) : 0;
  const auto lanes =
      first < end ? static_cast<__mmask16>(((1u << (end - first)) - 1) << first) : __mmask16{0};
  const float* src = kAddend ? e.addend + first - e.addend_lo : nullptr;
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
    if (r >= mr) break;
    float* row = c + r * ldc;
    __m512 v = _mm512_add_ps(kBias ? bias : _mm512_maskz_loadu_ps(mask, row), acc[r]);
    if constexpr (kAddend) {
      __m512 add = _mm512_setzero_ps();
      if (lanes != 0) {
        const float* at = src + r * e.addend_stride;
        add =
            first == 0 ? _mm512_maskz_loadu_ps(lanes, at) : _mm512_maskz_expandloadu_ps(lanes, at);
      }
      v = _mm512_add_ps(v, add);
    }
    // The all-lanes maskz forms: the same vminps/vmaxps, without the plain
    // forms' undefined source that GCC 12 warns about once inlined here.
    if constexpr (kClamp) v = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, v));
    _mm512_mask_storeu_ps(row, mask, v);
  }
}

// Rows [0, mr) of an AVX-512 tile's accumulators `acc` into C: plus C (or
// the bias), plus the addend (kAddend), clamped when asked; nr <= 16 columns.
template <bool kAddend, int kRows>
__attribute__((target("avx512f"), always_inline)) inline void StoreTile512(
    const __m512 (&acc)[kRows], float* c, int64_t ldc, int64_t mr, int64_t nr,
    const TileEpilogue& epilogue) {
  const TileEpilogue e = epilogue;  // as in MicroKernel
  const __mmask16 mask = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
  if (e.bias != nullptr) {
    if (e.clamp) {
      StoreRows512<kAddend, true, true>(acc, c, ldc, mr, nr, mask, e);
    } else {
      StoreRows512<kAddend, true, false>(acc, c, ldc, mr, nr, mask, e);
    }
  } else if (e.clamp) {
    StoreRows512<kAddend, false, true>(acc, c, ldc, mr, nr, mask, e);
  } else {
    StoreRows512<kAddend, false, false>(acc, c, ldc, mr, nr, mask, e);
  }
}

// A 12 x 16 tile of C (mr <= 12 rows, nr <= 16 columns kept) from a
// kc-deep product of a row-major A (stride lda; rows past mr read row
// mr - 1, results dropped) and a packed 16-column panel of B. kAddend as
// MicroKernel's.
template <bool kAddend>
__attribute__((target("avx512f"))) void MicroKernel512(int64_t kc, const float* a, int64_t lda,
                                                       const float* b, float* c, int64_t ldc,
                                                       int64_t mr, int64_t nr,
                                                       const TileEpilogue& epilogue) {
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  __m512 c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
  __m512 bv;
#define DFARM_GEMM_ROW512(A, C) C = _mm512_fmadd_ps(_mm512_set1_ps(A), bv, C)
  if (mr == kMr512) {
    // A whole tile: its rows read from three pointers at 1, 2 and 3 row
    // strides (twelve row pointers do not fit the registers: they spill
    // inside the loop). The same FMAs in the same order.
    const float* q0 = a;
    const float* q4 = a + 4 * lda;
    const float* q8 = a + 8 * lda;
    const int64_t s2 = 2 * lda, s3 = 3 * lda;
    for (int64_t p = 0; p < kc; ++p, ++q0, ++q4, ++q8) {
      bv = _mm512_loadu_ps(b + p * kNr);
      DFARM_GEMM_ROW512(q0[0], c0);
      DFARM_GEMM_ROW512(q0[lda], c1);
      DFARM_GEMM_ROW512(q0[s2], c2);
      DFARM_GEMM_ROW512(q0[s3], c3);
      DFARM_GEMM_ROW512(q4[0], c4);
      DFARM_GEMM_ROW512(q4[lda], c5);
      DFARM_GEMM_ROW512(q4[s2], c6);
      DFARM_GEMM_ROW512(q4[s3], c7);
      DFARM_GEMM_ROW512(q8[0], c8);
      DFARM_GEMM_ROW512(q8[lda], c9);
      DFARM_GEMM_ROW512(q8[s2], c10);
      DFARM_GEMM_ROW512(q8[s3], c11);
    }
  } else {
    const float* rows[kMr512];
    for (int64_t r = 0; r < kMr512; ++r) rows[r] = TileRow(a, lda, r, mr);
    const float *a0 = rows[0], *a1 = rows[1], *a2 = rows[2], *a3 = rows[3], *a4 = rows[4];
    const float *a5 = rows[5], *a6 = rows[6], *a7 = rows[7], *a8 = rows[8], *a9 = rows[9];
    const float *a10 = rows[10], *a11 = rows[11];
    for (int64_t p = 0; p < kc; ++p) {
      bv = _mm512_loadu_ps(b + p * kNr);
      DFARM_GEMM_ROW512(a0[p], c0);
      DFARM_GEMM_ROW512(a1[p], c1);
      DFARM_GEMM_ROW512(a2[p], c2);
      DFARM_GEMM_ROW512(a3[p], c3);
      DFARM_GEMM_ROW512(a4[p], c4);
      DFARM_GEMM_ROW512(a5[p], c5);
      DFARM_GEMM_ROW512(a6[p], c6);
      DFARM_GEMM_ROW512(a7[p], c7);
      DFARM_GEMM_ROW512(a8[p], c8);
      DFARM_GEMM_ROW512(a9[p], c9);
      DFARM_GEMM_ROW512(a10[p], c10);
      DFARM_GEMM_ROW512(a11[p], c11);
    }
  }
#undef DFARM_GEMM_ROW512
  const __m512 acc[kMr512] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};
  StoreTile512<kAddend, kMr512>(acc, c, ldc, mr, nr, epilogue);
}

// The same for a tile of at most 6 rows (a row range's last, or each of a
// few rows split across threads): half the FMAs of a 12-row tile that
// drops half its rows. Rows past mr read row mr - 1, results dropped.
template <bool kAddend>
__attribute__((target("avx512f"))) void MicroKernel512Half(int64_t kc, const float* a, int64_t lda,
                                                           const float* b, float* c, int64_t ldc,
                                                           int64_t mr, int64_t nr,
                                                           const TileEpilogue& epilogue) {
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  const float *a0 = a, *a1 = TileRow(a, lda, 1, mr), *a2 = TileRow(a, lda, 2, mr);
  const float *a3 = TileRow(a, lda, 3, mr), *a4 = TileRow(a, lda, 4, mr);
  const float* a5 = TileRow(a, lda, 5, mr);
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 bv = _mm512_loadu_ps(b + p * kNr);
    c0 = _mm512_fmadd_ps(_mm512_set1_ps(a0[p]), bv, c0);
    c1 = _mm512_fmadd_ps(_mm512_set1_ps(a1[p]), bv, c1);
    c2 = _mm512_fmadd_ps(_mm512_set1_ps(a2[p]), bv, c2);
    c3 = _mm512_fmadd_ps(_mm512_set1_ps(a3[p]), bv, c3);
    c4 = _mm512_fmadd_ps(_mm512_set1_ps(a4[p]), bv, c4);
    c5 = _mm512_fmadd_ps(_mm512_set1_ps(a5[p]), bv, c5);
  }
  const __m512 acc[kMr] = {c0, c1, c2, c3, c4, c5};
  StoreTile512<kAddend, kMr>(acc, c, ldc, mr, nr, epilogue);
}

// One micro tile, the kernel picked by A's layout and the tile's width.
template <bool kAddend>
void RunTileWith(bool packed_a, int64_t kc, const float* a, int64_t lda, const float* b, float* c,
                 int64_t ldc, int64_t mr, int64_t nr, const TileEpilogue& e) {
  if (packed_a) {
    if (nr > 8) {
      MicroKernel<true, 2, kAddend>(kc, a, lda, b, c, ldc, mr, nr, e);
    } else {
      MicroKernel<true, 1, kAddend>(kc, a, lda, b, c, ldc, mr, nr, e);
    }
  } else if (nr > 8) {
    MicroKernel<false, 2, kAddend>(kc, a, lda, b, c, ldc, mr, nr, e);
  } else {
    MicroKernel<false, 1, kAddend>(kc, a, lda, b, c, ldc, mr, nr, e);
  }
}

void RunTile(bool packed_a, int64_t kc, const float* a, int64_t lda, const float* b, float* c,
             int64_t ldc, int64_t mr, int64_t nr, const TileEpilogue& e) {
  if (e.addend != nullptr) {
    RunTileWith<true>(packed_a, kc, a, lda, b, c, ldc, mr, nr, e);
  } else {
    RunTileWith<false>(packed_a, kc, a, lda, b, c, ldc, mr, nr, e);
  }
}

// Depth below which PrefetchTileA() does nothing: a tile this shallow
// mostly reads what the op before just wrote, and leaves the prefetch
// little time (AVX2, 2 threads: face_detection_full_range's 96x96 convs of depth
// 8 and 32 read 3-4 µs slower with it, near the noise; no gain seen).
constexpr int64_t kPrefetchMinDepth = 64;

// Asks the CPU to fetch rows [row, min(row + rows, end)) x depth [p0, p0 +
// kc) of a row-major A, the tile two tiles ahead, while the tile before it
// computes: on the first column panel of a row block A comes from memory
// or the other core's cache (a feature map written long before, as an FPN's
// lateral 1x1 conv reads; 2 threads: 94 -> 71 µs on face_detection_full_
// range's 48x48x64 -> 48 conv), the later panels find it in the cache.
void PrefetchTileA(const GemmOperand& a, int64_t row, int64_t end, int64_t rows, int64_t p0,
                   int64_t kc) {
  if (kc < kPrefetchMinDepth) return;
  for (const int64_t last = std::min(row + rows, end); row < last; ++row) {
    const float* r = a.data + row * a.stride + p0;
    for (int64_t q = 0; q < kc; q += 16) __builtin_prefetch(r + q);
  }
}

// Asks the CPU to fetch part `part` of `parts` of a packed B panel of depth
// `kc` (kc lines of 64 bytes, one per depth step): the panel the next column
// (or depth) step reads, while this panel's row tiles compute. A filter
// packed once (SetConstantB) was last read in the previous Invoke(), and a
// model's filters do not stay in the cache between runs: a product of few
// rows then waited for memory on the first row tile of every panel
// (BM_Gemm/49x1152x192/simd_packed_cold, one core: 169 -> 121 µs; 105 µs
// with B in the cache).
void PrefetchPanelPart(const float* panel, int64_t kc, int64_t part, int64_t parts) {
  const int64_t per = (kc + parts - 1) / parts;
  const int64_t end = std::min(kc, (part + 1) * per);
  for (int64_t q = part * per; q < end; ++q) __builtin_prefetch(panel + q * kNr);
}

// Columns [col0, col0 + n) of B; `constant_b`: SetConstantB()'s panels of the
// whole B (n_padded columns), else packed here per depth block into packed_b;
// `avx512`: 12-row AVX-512 tiles for a row-major A.
void RunAvx2(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
             int64_t col0, const float* constant_b, int64_t n_padded, float* c, int64_t ldc,
             const GemmEpilogue& epilogue, bool has_epilogue, bool avx512, float* packed_a,
             float* packed_b) {
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    const float* panels;
    if (constant_b != nullptr) {
      panels = constant_b + p0 * n_padded + (col0 / kNr) * kc * kNr;
    } else {
      PackB(b, col0, n, p0, kc, packed_b);
      panels = packed_b;
    }
    TileEpilogue e;
    const bool last = p0 + kc >= k;
    e.clamp = has_epilogue && last;
    e.min = epilogue.min;
    e.max = epilogue.max;
    e.addend_stride = epilogue.addend_stride;
    const bool with_addend = last && epilogue.addend != nullptr;
    const bool with_bias = p0 == 0 && epilogue.bias != nullptr;
    for (int64_t i0 = 0; i0 < m; i0 += kMc) {
      const int64_t mc = std::min(kMc, m - i0);
      if (a.transposed) PackA(a, i0, mc, p0, kc, packed_a);
      for (int64_t jr = 0; jr < n; jr += kNr) {
        const float* bp = panels + (jr / kNr) * kc * kNr;
        e.bias = with_bias ? epilogue.bias + col0 + jr : nullptr;
        e.addend_lo = epilogue.addend_begin - (col0 + jr);
        e.addend_hi = epilogue.addend_end - (col0 + jr);
        // The addend row of tile row `row` of this block.
        auto addend_row = [&](int64_t row) {
          return with_addend ? epilogue.addend + (i0 + row) * epilogue.addend_stride : nullptr;
        };
        const int64_t nr = std::min(kNr, n - jr);
        // The next panel of a filter packed once (past this block's last,
        // the next depth block's first), a part before each row tile; on
        // the first row block only (the later ones find B in the cache).
        const float* next_panel = nullptr;
        int64_t next_kc = kc;
        const bool fetch = constant_b != nullptr && i0 == 0;
        if (fetch && jr + kNr < n) {
          next_panel = bp + kc * kNr;
        } else if (fetch && p0 + kc < k) {
          next_kc = std::min(kKc, k - p0 - kc);
          next_panel = constant_b + (p0 + kc) * n_padded + (col0 / kNr) * next_kc * kNr;
        }
        if (avx512 && !a.transposed) {
          const int64_t tiles = (mc + kMr512 - 1) / kMr512;
          for (int64_t ir = 0; ir < mc; ir += kMr512) {
            if (next_panel != nullptr) PrefetchPanelPart(next_panel, next_kc, ir / kMr512, tiles);
            e.addend = addend_row(ir);
            const float* tile_a = a.data + (i0 + ir) * a.stride + p0;
            if (jr == 0) PrefetchTileA(a, i0 + ir + 2 * kMr512, i0 + mc, kMr512, p0, kc);
            float* tile = c + (i0 + ir) * ldc + jr;
            const int64_t mr = std::min(kMr512, mc - ir);
            if (mr <= kMr) {
              if (with_addend) {
                MicroKernel512Half<true>(kc, tile_a, a.stride, bp, tile, ldc, mr, nr, e);
              } else {
                MicroKernel512Half<false>(kc, tile_a, a.stride, bp, tile, ldc, mr, nr, e);
              }
            } else if (with_addend) {
              MicroKernel512<true>(kc, tile_a, a.stride, bp, tile, ldc, mr, nr, e);
            } else {
              MicroKernel512<false>(kc, tile_a, a.stride, bp, tile, ldc, mr, nr, e);
            }
          }
          continue;
        }
        const int64_t tiles = (mc + kMr - 1) / kMr;
        for (int64_t ir = 0; ir < mc; ir += kMr) {
          if (next_panel != nullptr) PrefetchPanelPart(next_panel, next_kc, ir / kMr, tiles);
          const int64_t mr = std::min(kMr, mc - ir);
          e.addend = addend_row(ir);
          float* tile = c + (i0 + ir) * ldc + jr;
          if (!a.transposed && jr == 0) PrefetchTileA(a, i0 + ir + 2 * kMr, i0 + mc, kMr, p0, kc);
          if (a.transposed) {
            RunTile(true, kc, packed_a + (ir / kMr) * kc * kMr, 0, bp, tile, ldc, mr, nr, e);
          } else {
            RunTile(false, kc, a.data + (i0 + ir) * a.stride + p0, a.stride, bp, tile, ldc, mr, nr,
                    e);
          }
        }
      }
    }
  }
}
#endif  // DFARM_GEMM_AVX2

// RunParallel()'s column split: whole 16-column panels (the row split:
// Gemm::kRowAlign).
constexpr int64_t kColumnAlign = 16;

size_t AlignUp64(size_t bytes) { return (bytes + 63) & ~size_t{63}; }

// Multiply-adds below which a product is not cut into more tasks.
constexpr int64_t kMinTaskMacs = int64_t{1} << 18;
// Column panels per task below which a column split has one task a thread.
constexpr int64_t kMinPanelsPerTask = 4;

}  // namespace

bool Gemm::UsesAvx2() const {
#ifdef DFARM_GEMM_AVX2
  return !generic_only_ && CpuHasAvx2Fma();
#else
  return false;
#endif
}

void Gemm::Plan(int64_t m, int64_t n, int64_t k) {
  // A row-major result is computed by Eigen as the column-major product
  // C^T = B^T A^T: its rows are our n, its columns our m.
  Index kc = std::max<int64_t>(k, 1), mc = std::max<int64_t>(n, 1), nc = std::max<int64_t>(m, 1);
  Eigen::internal::computeProductBlockingSizes<float, float, 1, Index>(kc, mc, nc, 1);
  kc_ = kc;
  mc_ = mc;
  nc_ = nc;
  plan_n_ = n;
  plan_k_ = k;
  packed_b_.clear();
  gemv_ = m <= 1;
  if (gemv_) {
    workspace_bytes_ = 0;  // Eigen's GEMV reads both operands in place
    return;
  }
#ifdef DFARM_GEMM_AVX2
  if (UsesAvx2()) {
    const int64_t depth = std::min(std::max<int64_t>(k, 1), kKc);
    const int64_t a_floats = std::min(RoundUp(m, kMr), kMc) * depth;
    const int64_t b_floats = depth * RoundUp(std::max<int64_t>(n, 1), kNr);
    workspace_bytes_ = AlignUp64(a_floats * sizeof(float)) + AlignUp64(b_floats * sizeof(float));
    return;
  }
#endif
  workspace_bytes_ = AlignUp64(kc * mc * sizeof(float)) + AlignUp64(kc * nc * sizeof(float));
}

void Gemm::SetConstantB(GemmOperand b) {
  packed_b_.clear();
#ifdef DFARM_GEMM_AVX2
  if (!UsesAvx2() || gemv_) return;
  const int64_t n_padded = RoundUp(plan_n_, kNr);
  packed_b_.assign(static_cast<size_t>(n_padded * plan_k_), 0.0f);
  for (int64_t p0 = 0; p0 < plan_k_; p0 += kKc) {
    PackB(b, 0, plan_n_, p0, std::min(kKc, plan_k_ - p0), packed_b_.data() + p0 * n_padded);
  }
#else
  (void)b;
#endif
}

bool Gemm::TakeConstantB(Gemm& from) {
  if (from.packed_b_.empty() || from.plan_n_ != plan_n_ || from.plan_k_ != plan_k_ || gemv_ ||
      !UsesAvx2()) {
    return false;
  }
  packed_b_ = std::move(from.packed_b_);
  from.packed_b_.clear();
  return true;
}

void Gemm::Run(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
               int64_t c_stride, const GemmEpilogue& epilogue, std::byte* workspace) const {
  RunColumns(m, n, k, a, b, 0, c, c_stride, epilogue, workspace);
}

void Gemm::RunColumns(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                      const GemmOperand& full_b, int64_t col0, float* c, int64_t c_stride,
                      const GemmEpilogue& epilogue, std::byte* workspace) const {
  if (m <= 0 || n <= 0) return;
  const bool has_epilogue = epilogue.bias != nullptr || epilogue.addend != nullptr ||
                            epilogue.min != -std::numeric_limits<float>::infinity() ||
                            epilogue.max != std::numeric_limits<float>::infinity();
#ifdef DFARM_GEMM_AVX2
  if (!gemv_ && k > 0 && UsesAvx2()) {
    float* const ws = reinterpret_cast<float*>(workspace);
    const int64_t depth = std::min(k, kKc);
    const size_t a_bytes =
        a.transposed ? AlignUp64(std::min(RoundUp(m, kMr), kMc) * depth * sizeof(float)) : 0;
    const float* constant_b = packed_b_.empty() ? nullptr : packed_b_.data();
    RunAvx2(m, n, k, a, full_b, col0, constant_b, RoundUp(plan_n_, kNr), c, c_stride, epilogue,
            has_epilogue, avx512_ && CpuHasAvx512(), ws, ws + a_bytes / sizeof(float));
    return;
  }
#endif
  // Eigen: the bias written first, the product added, then the clamp.
  if (epilogue.bias != nullptr) {
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(c + i * c_stride, epilogue.bias + col0, n * sizeof(float));
    }
  }
  const GemmOperand b{full_b.transposed ? full_b.data + col0 * full_b.stride : full_b.data + col0,
                      full_b.stride, full_b.transposed};
  if (k > 0) RunEigen(m, n, k, a, b, c, c_stride, workspace);
  if (has_epilogue) {
    const ActivationRange range{epilogue.min, epilogue.max};
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * c_stride;
      if (epilogue.addend != nullptr) {
        const float* add = epilogue.addend + i * epilogue.addend_stride;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t col = col0 + j;
          row[j] += col >= epilogue.addend_begin && col < epilogue.addend_end
                        ? add[col - epilogue.addend_begin]
                        : 0.0f;
        }
      }
      for (int64_t j = 0; j < n; ++j) row[j] = std::min(std::max(row[j], range.min), range.max);
    }
  }
}

void Gemm::RunEigen(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                    float* c, int64_t c_stride, std::byte* workspace) const {
  if (gemv_) {
    // A row vector times B: Eigen's GEMV reads B in place (no packing). Only
    // for a 1-row plan: one row of a larger plan (an im2col chunk's last)
    // takes the blocked kernel, so its sums do not depend on the chunking.
    Eigen::Map<Eigen::RowVectorXf> out(c, n);
    Eigen::Map<const Eigen::RowVectorXf, 0, Eigen::InnerStride<>> x(
        a.data, k, Eigen::InnerStride<>(a.transposed ? a.stride : 1));
    using RowMajorMap =
        Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                   Eigen::OuterStride<>>;
    if (b.transposed) {
      RowMajorMap bt(b.data, n, k, Eigen::OuterStride<>(b.stride));  // B^T: n x k
      out.transpose().noalias() += bt * x.transpose();
    } else {
      RowMajorMap bm(b.data, k, n, Eigen::OuterStride<>(b.stride));
      out.transpose().noalias() += bm.transpose() * x.transpose();
    }
    return;
  }
  float* const ws = reinterpret_cast<float*>(workspace);
  const size_t a_bytes = AlignUp64(kc_ * mc_ * sizeof(float));
  FixedBlocking blocking(kc_, mc_, nc_, ws, ws + a_bytes / sizeof(float));
  if (!a.transposed && !b.transposed) {
    RunGebp<Eigen::RowMajor, Eigen::RowMajor>(m, n, k, a, b, c, c_stride, blocking);
  } else if (!a.transposed && b.transposed) {
    RunGebp<Eigen::RowMajor, Eigen::ColMajor>(m, n, k, a, b, c, c_stride, blocking);
  } else if (a.transposed && !b.transposed) {
    RunGebp<Eigen::ColMajor, Eigen::RowMajor>(m, n, k, a, b, c, c_stride, blocking);
  } else {
    RunGebp<Eigen::ColMajor, Eigen::ColMajor>(m, n, k, a, b, c, c_stride, blocking);
  }
}

bool Gemm::FewRows(int64_t m, int threads) const {
  const bool own_tiles = UsesAvx2() && !gemv_ && !packed_b_.empty();
  return own_tiles && m < 4 * kRowAlign * threads && m % (kOwnRowAlign * threads) == 0;
}

bool Gemm::SplitsRows(int64_t m, int64_t n, int threads) const {
  return FewRows(m, threads) ||
         (m >= 2 * kRowAlign * threads &&
          ((!packed_b_.empty() && m >= 4 * kRowAlign * threads) || m >= n || n < 2 * kColumnAlign));
}

void Gemm::RunParallel(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                       int64_t c_stride, const GemmEpilogue& epilogue,
                       const ExecutionContext* context, size_t workspace_offset) const {
  const int threads = context != nullptr ? context->num_threads : 1;
  auto workspace = [&](int t) {
    return context != nullptr && context->scratch != nullptr
               ? context->ThreadScratch(t) + workspace_offset
               : nullptr;
  };
  if (threads <= 1 || m * n * k < kMinParallelMacs) {
    RunColumns(m, n, k, a, b, 0, c, c_stride, epilogue, workspace(0));
    return;
  }
  // Rows or columns (whole 16-column panels), whichever packs less again:
  // every row task packs all of B (k x n) unless it is packed once already
  // (SetConstantB), every column task all of A (m x k); both keep each
  // element's summation as Run()'s. Rows also keep each thread on the
  // pixels it wrote in the op before, and reads in the op after (a
  // depthwise conv splits by rows too). With B packed once, our kernel
  // splits even a few rows (6x6 pixels) when they make the same whole
  // 6-row tiles on every thread: one range per thread, each thread's the
  // rows of the ADD folded in (its addend) and of the op after that it
  // wrote or reads (face_detection_full_range on 2 threads: 4% faster than
  // splitting the columns there; 7x7 pixels split 30/19 went 10% slower).
  const bool few_rows = FewRows(m, threads);
  const bool split_rows = SplitsRows(m, n, threads);
  const int64_t row_align = few_rows ? kOwnRowAlign : kRowAlign;
  const int64_t units = few_rows     ? threads
                        : split_rows ? m / (2 * kRowAlign)
                                     : (n + kColumnAlign - 1) / kColumnAlign;
  // No more tasks than kMinTaskMacs of work each (but one per thread). A
  // column task packs all of A, which costs about as much as multiplying it
  // by a few panels: with few panels, one task per thread.
  const int64_t most = split_rows || units >= kMinPanelsPerTask * kTasksPerThread * threads
                           ? m * n * k / kMinTaskMacs
                           : threads;
  // A whole number of tasks per thread: 3 tasks of a 12x12-pixel product on
  // 2 threads left one thread a task idle (1.2x over 1 thread).
  const int tasks = static_cast<int>(
      std::min(TaskCount(units, threads), std::max<int64_t>(threads, most / threads * threads)));
  ParallelFor(context, static_cast<size_t>(tasks), [&](size_t t, int slot) {
    const int part = static_cast<int>(t);
    if (split_rows) {
      const Range r = SplitRange(m, tasks, part, row_align);
      if (r.size() <= 0) return;
      const GemmOperand sub_a{a.transposed ? a.data + r.begin : a.data + r.begin * a.stride,
                              a.stride, a.transposed};
      RunColumns(r.size(), n, k, sub_a, b, 0, c + r.begin * c_stride, c_stride,
                 epilogue.FromRow(r.begin), workspace(slot));
    } else {
      const Range r = SplitRange(n, tasks, part, kColumnAlign);
      if (r.size() <= 0) return;
      RunColumns(m, r.size(), k, a, b, r.begin, c + r.begin, c_stride, epilogue, workspace(slot));
    }
  });
}

void ReferenceGemm(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                   int64_t c_stride) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += At(a, i, p) * At(b, p, j);
      c[i * c_stride + j] += acc;
    }
  }
}

Status PrepareQuantizedConv(const Tensor& input, const Tensor& filter, const Tensor* bias,
                            const Tensor& output, int channels, int channel_dim,
                            tflite::ActivationFunctionType activation,
                            QuantizedConvParams* params_out) {
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
  if (output.dtype != input.dtype || filter.dtype != input.dtype) {
    return Status::Unsupported(std::string("input, filter and output dtypes ") +
                               DTypeName(input.dtype) + ", " + DTypeName(filter.dtype) + ", " +
                               DTypeName(output.dtype) + " differ");
  }
  QuantizedConvParams p;
  std::vector<float> filter_scales(channels);
  p.filter_offsets.assign(channels, 0);
  if (filter.per_channel_quantized) {
    if (filter.dtype != DType::kInt8) {
      return Status::Unsupported("per-channel quantized filter must be int8, got " +
                                 std::string(DTypeName(filter.dtype)));
    }
    if (filter.quantized_dimension != channel_dim ||
        static_cast<int>(filter.scales.size()) != channels) {
      return Status::Error("filter is quantized along dimension " +
                           std::to_string(filter.quantized_dimension) + " with " +
                           std::to_string(filter.scales.size()) + " scales; expected dimension " +
                           std::to_string(channel_dim) + " with " + std::to_string(channels));
    }
    for (int c = 0; c < channels; ++c) {
      filter_scales[c] = filter.scales[c];
      p.filter_offsets[c] = -static_cast<int32_t>(filter.zero_points[c]);
    }
  } else {
    DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(filter, "filter"));
    filter_scales.assign(channels, filter.scale);
    p.filter_offsets.assign(channels, -ZeroPoint(filter));
  }
  for (int c = 0; c < channels; ++c) {
    if (!(std::isfinite(filter_scales[c]) && filter_scales[c] > 0.0f)) {
      return Status::Error("filter scale " + std::to_string(c) + " is " +
                           std::to_string(filter_scales[c]) +
                           ": scale must be finite and positive");
    }
  }
  p.bias.assign(channels, 0);
  if (bias != nullptr) {
    if (bias->dtype != DType::kInt32) {
      return Status::Unsupported(std::string("bias dtype ") + DTypeName(bias->dtype) +
                                 " is not supported with quantized inputs (int32 only)");
    }
    if (bias->num_elements() != channels) {
      return Status::Error("bias must hold " + std::to_string(channels) + " values, got " +
                           ShapeToString(bias->shape));
    }
    if (!bias->has_static_value()) {
      return Status::Unsupported("a bias computed at run time is not supported");
    }
    std::memcpy(p.bias.data(), bias->data, channels * sizeof(int32_t));
  }
  p.input_offset = -ZeroPoint(input);
  p.output_offset = ZeroPoint(output);
  p.multipliers.resize(channels);
  p.shifts.resize(channels);
  for (int c = 0; c < channels; ++c) {
    const double effective = static_cast<double>(input.scale) *
                             static_cast<double>(filter_scales[c]) /
                             static_cast<double>(output.scale);
    QuantizeMultiplier(effective, &p.multipliers[c], &p.shifts[c]);
  }
  DFARM_RETURN_IF_ERROR(
      CalculateActivationRangeQuantized(activation, output, &p.act_min, &p.act_max));
  *params_out = std::move(p);
  return Status::Ok();
}

}  // namespace dfarm::runtime
