#include "runtime/kernels/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// C[mr x nr] += Apanel (kc x 6) * Bpanel (kc x 16); mr <= 6, nr <= 16.
__attribute__((target("avx2,fma"))) void MicroKernel(int64_t kc, const float* a, const float* b,
                                                     float* c, int64_t ldc, int64_t mr,
                                                     int64_t nr) {
  // Twelve named accumulators (an array would live on the stack).
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b + p * kNr);
    const __m256 b1 = _mm256_loadu_ps(b + p * kNr + 8);
    const float* ap = a + p * kMr;
    __m256 av = _mm256_broadcast_ss(ap + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(ap + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(ap + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(ap + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(ap + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(ap + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
  }
  const __m256 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == kMr && nr == kNr) {
    for (int r = 0; r < kMr; ++r) {
      float* row = c + r * ldc;
      _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[r][0]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[r][1]));
    }
    return;
  }
  alignas(32) float tile[kMr * kNr];
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_ps(tile + r * kNr, acc[r][0]);
    _mm256_store_ps(tile + r * kNr + 8, acc[r][1]);
  }
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t j = 0; j < nr; ++j) c[r * ldc + j] += tile[r * kNr + j];
  }
}

// Rows [i0, i0 + mc) x depth [p0, p0 + kc) of A into 6-row panels (p-major).
void PackA(const GemmOperand& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out) {
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    const int64_t rows = std::min(kMr, mc - ir);
    if (a.transposed) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* col = a.data + (p0 + p) * a.stride + i0 + ir;
        for (int64_t r = 0; r < kMr; ++r) out[p * kMr + r] = r < rows ? col[r] : 0.0f;
      }
    } else {
      for (int64_t r = 0; r < kMr; ++r) {
        const float* row = a.data + (i0 + ir + r) * a.stride + p0;
        for (int64_t p = 0; p < kc; ++p) out[p * kMr + r] = r < rows ? row[p] : 0.0f;
      }
    }
    out += kc * kMr;
  }
}

// Depth [p0, p0 + kc) x all n columns of B into 16-column panels (p-major).
void PackB(const GemmOperand& b, int64_t n, int64_t p0, int64_t kc, float* out) {
  for (int64_t jr = 0; jr < n; jr += kNr) {
    const int64_t cols = std::min(kNr, n - jr);
    if (!b.transposed && cols == kNr) {
      for (int64_t p = 0; p < kc; ++p) {
        std::memcpy(out + p * kNr, b.data + (p0 + p) * b.stride + jr, kNr * sizeof(float));
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < kNr; ++j) {
          out[p * kNr + j] = j < cols ? At(b, p0 + p, jr + j) : 0.0f;
        }
      }
    }
    out += kc * kNr;
  }
}

void RunAvx2(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b, float* c,
             int64_t ldc, float* packed_a, float* packed_b) {
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    PackB(b, n, p0, kc, packed_b);
    for (int64_t i0 = 0; i0 < m; i0 += kMc) {
      const int64_t mc = std::min(kMc, m - i0);
      PackA(a, i0, mc, p0, kc, packed_a);
      for (int64_t jr = 0; jr < n; jr += kNr) {
        const float* bp = packed_b + (jr / kNr) * kc * kNr;
        for (int64_t ir = 0; ir < mc; ir += kMr) {
          MicroKernel(kc, packed_a + (ir / kMr) * kc * kMr, bp, c + (i0 + ir) * ldc + jr, ldc,
                      std::min(kMr, mc - ir), std::min(kNr, n - jr));
        }
      }
    }
  }
}
#endif  // DFARM_GEMM_AVX2

// RunParallel()'s split: rows in multiples of both register tiles' heights
// (ours 6, Eigen's 4), columns in whole 16-column panels.
constexpr int64_t kRowAlign = 12, kColumnAlign = 16;

size_t AlignUp64(size_t bytes) { return (bytes + 63) & ~size_t{63}; }

// Products smaller than this many multiply-adds stay on one thread (waking
// the pool costs more than it saves).
constexpr int64_t kMinParallelMacs = int64_t{1} << 16;
// Multiply-adds below which a product is not cut into more tasks.
constexpr int64_t kMinTaskMacs = int64_t{1} << 18;

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

void Gemm::Run(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
               int64_t c_stride, std::byte* workspace) const {
  if (m <= 0 || n <= 0 || k <= 0) return;
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
#ifdef DFARM_GEMM_AVX2
  if (UsesAvx2()) {
    const int64_t depth = std::min(k, kKc);
    const size_t a_bytes = AlignUp64(std::min(RoundUp(m, kMr), kMc) * depth * sizeof(float));
    RunAvx2(m, n, k, a, b, c, c_stride, ws, ws + a_bytes / sizeof(float));
    return;
  }
#endif
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

void Gemm::RunParallel(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                       int64_t c_stride, const ExecutionContext* context,
                       size_t workspace_offset) const {
  const int threads = context != nullptr ? context->num_threads : 1;
  auto workspace = [&](int t) {
    return context != nullptr && context->scratch != nullptr
               ? context->ThreadScratch(t) + workspace_offset
               : nullptr;
  };
  if (threads <= 1 || m * n * k < kMinParallelMacs) {
    Run(m, n, k, a, b, c, c_stride, workspace(0));
    return;
  }
  // Rows or columns (whole 16-column panels), whichever packs less again:
  // every row task packs all of B (k x n), every column task all of A
  // (m x k); both keep each element's summation as Run()'s.
  const bool split_rows = m >= 2 * kRowAlign * threads && (m >= n || n < 2 * kColumnAlign);
  const int64_t units = split_rows ? m / (2 * kRowAlign) : (n + kColumnAlign - 1) / kColumnAlign;
  // No more tasks than kMinTaskMacs of work each (but one per thread).
  const int tasks = static_cast<int>(
      std::min(TaskCount(units, threads), std::max<int64_t>(threads, m * n * k / kMinTaskMacs)));
  ParallelFor(context, static_cast<size_t>(tasks), [&](size_t t, int slot) {
    const int part = static_cast<int>(t);
    if (split_rows) {
      const Range r = SplitRange(m, tasks, part, kRowAlign);
      if (r.size() <= 0) return;
      const GemmOperand sub_a{a.transposed ? a.data + r.begin : a.data + r.begin * a.stride,
                              a.stride, a.transposed};
      Run(r.size(), n, k, sub_a, b, c + r.begin * c_stride, c_stride, workspace(slot));
    } else {
      const Range r = SplitRange(n, tasks, part, kColumnAlign);
      if (r.size() <= 0) return;
      const GemmOperand sub_b{b.transposed ? b.data + r.begin * b.stride : b.data + r.begin,
                              b.stride, b.transposed};
      Run(m, r.size(), k, a, sub_b, c + r.begin, c_stride, workspace(slot));
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

int32_t QuantizedConvParams::Requantize(int32_t acc, int channel) const {
  int32_t v = round_half_up
                  ? MultiplyByQuantizedMultiplierHalfUp(acc, multipliers[channel], shifts[channel])
                  : MultiplyByQuantizedMultiplier(acc, multipliers[channel], shifts[channel]);
  v += output_offset;
  return std::min(std::max(v, act_min), act_max);
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
