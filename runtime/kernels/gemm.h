// The float GEMM used by CONV_2D, FULLY_CONNECTED, BATCH_MATMUL and the
// transposed convolutions: C[m,n] += A[m,k] * B[k,n] on a packing workspace
// the caller lends (the interpreter's shared scratch, ExecutionContext), so
// Run() allocates nothing. On x86-64 CPUs with AVX2 and FMA (checked at run
// time) a blocked kernel of ours with a 6x16 register tile runs (12x16 with
// AVX-512 where the CPU has it, for a row-major A: the same FMA chain per
// element, so the same bits); elsewhere Eigen's cache-blocked product (GEBP) with our
// workspace as its blocking buffers; a product planned for 1 row is Eigen's
// GEMV.
// RunParallel() splits the rows (or, for few rows, the columns) of C across
// the context's threads; each element of C is computed by one thread in the
// same order as by Run(), so the result does not depend on the thread count.
// A constant B (a filter, weights) may be packed once at Prepare
// (SetConstantB(); the Gemm then owns that copy), and a GemmEpilogue (bias,
// clamp) is applied while C's tile is in registers, so a convolution makes
// one pass over its output.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/kernels/aligned_vector.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {

// One operand of a product: element (row, col) of the logical matrix lies at
// data[row * stride + col], or at data[col * stride + row] when `transposed`
// (the buffer holds the matrix's transpose, row-major).
struct GemmOperand {
  const float* data = nullptr;
  int64_t stride = 0;
  bool transposed = false;
};

// What a product does with C: without a bias C += A·B; with one,
// C = bias + A·B (C's old values are not read). Then each element is clamped
// to [min, max] (a fused activation; NaN passes as in Clamp()).
struct GemmEpilogue {
  const float* bias = nullptr;  // [n] (the columns of the call), or null
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
  // A float ADD folded into the product (Node::folded_addend), applied after
  // the bias and before the clamp: element (i, j) of C gets
  // addend[i * addend_stride + j - addend_begin] added when addend_begin <= j
  // < addend_end (columns counted as the bias's), +0.0f elsewhere (an ADD's
  // folded channel padding): the bits of a separate ADD of the product.
  // Null: nothing added. Must not alias C.
  const float* addend = nullptr;
  int64_t addend_stride = 0;
  int64_t addend_begin = 0, addend_end = 0;

  // This epilogue for the product's rows from `row` on (the addend moved
  // down with C).
  GemmEpilogue FromRow(int64_t row) const {
    GemmEpilogue e = *this;
    if (e.addend != nullptr) e.addend += row * addend_stride;
    return e;
  }
};

class Gemm {
 public:
  // RunParallel()'s row split: rows in multiples of both register tiles'
  // heights (ours 6, Eigen's 4), or of ours alone (kOwnRowAlign) where only
  // ours runs. A caller that cuts rows for Run() itself (a fused depthwise
  // conv) cuts at the same multiples.
  static constexpr int64_t kRowAlign = 12, kOwnRowAlign = 6;
  // Products smaller than this many multiply-adds stay on one thread
  // (waking the pool costs more than it saves).
  static constexpr int64_t kMinParallelMacs = int64_t{1} << 16;

  // Plans products up to m x n x k (call it from Prepare()); allocates
  // nothing. May be called again with other sizes.
  void Plan(int64_t m, int64_t n, int64_t k);

  // Bytes of workspace one thread of Run() / RunParallel() needs for the
  // planned sizes, a multiple of 64 (0 when none is needed).
  size_t workspace_bytes() const { return workspace_bytes_; }

  // c[i * c_stride + j] += sum_p A(i, p) * B(p, j) for i < m, j < n, with
  // m, n, k no larger than Plan()'s, on the calling thread. `workspace`:
  // workspace_bytes() bytes, 64-byte aligned, used only during the call.
  // Allocates nothing; c must not alias a or b.
  void Run(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
           int64_t c_stride, std::byte* workspace) const {
    Run(m, n, k, a, b, c, c_stride, GemmEpilogue{}, workspace);
  }
  // The same with an epilogue (bias, clamp).
  void Run(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
           int64_t c_stride, const GemmEpilogue& epilogue, std::byte* workspace) const;

  // Whether RunParallel() splits an m x n product across `threads` threads
  // by rows (else by column panels, or not at all).
  bool SplitsRows(int64_t m, int64_t n, int threads) const;

  // The same product split across `context`'s threads (one thread when it is
  // null or the product is small); thread t's workspace is
  // context->ThreadScratch(t) + workspace_offset, so the node's
  // scratch_bytes must cover workspace_offset + workspace_bytes().
  void RunParallel(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                   int64_t c_stride, const ExecutionContext* context,
                   size_t workspace_offset) const {
    RunParallel(m, n, k, a, b, c, c_stride, GemmEpilogue{}, context, workspace_offset);
  }
  void RunParallel(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                   int64_t c_stride, const GemmEpilogue& epilogue, const ExecutionContext* context,
                   size_t workspace_offset) const;

  // Packs B (k x n, the planned n and k) once, when the AVX2/FMA kernel runs
  // (else it does nothing); later Run() / RunParallel() calls must pass this
  // same operand with the planned n and k (their rows of A and C vary) and
  // read the packed copy, which this Gemm owns. Call it after Plan(), from
  // Prepare() (it allocates).
  void SetConstantB(GemmOperand b);
  // Instead of SetConstantB() of the same B: moves the packed copy of
  // `from`, which was planned with this n and k and given that B, here.
  // False, leaving both as they were, when `from` holds no packed copy that
  // fits this plan.
  bool TakeConstantB(Gemm& from);
  // Whether Run() reads the packed copy of SetConstantB() / TakeConstantB()
  // instead of its B operand's data.
  bool has_constant_b() const { return !packed_b_.empty(); }

  // Uses Eigen's portable kernel even where the AVX2/FMA one would run (so
  // tests cover both on an AVX2 machine). Call it before Plan().
  void set_generic_only(bool generic_only) { generic_only_ = generic_only; }
  // Whether a row-major A may take the AVX-512 kernel (12x16 tiles) where
  // the CPU has it (default); false keeps the AVX2/FMA one, so tests can
  // check that both give the same bits.
  void set_avx512(bool avx512) { avx512_ = avx512; }

 private:
  // RunParallel()'s split of a few rows, whole 6-row tiles a thread (our
  // AVX2/AVX-512 kernel with B packed once).
  bool FewRows(int64_t m, int threads) const;
  bool UsesAvx2() const;
  // Columns [col0, col0 + n) of B (the whole operand b) into C's columns
  // [0, n) at c; the epilogue's bias is the whole operand's.
  void RunColumns(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                  int64_t col0, float* c, int64_t c_stride, const GemmEpilogue& epilogue,
                  std::byte* workspace) const;
  // Eigen's GEMV or GEBP (C += A·B).
  void RunEigen(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                float* c, int64_t c_stride, std::byte* workspace) const;

  bool generic_only_ = false;
  bool avx512_ = true;
  bool gemv_ = false;  // planned for one row: Eigen's GEMV
  // Eigen's blocking of the column-major (transposed) problem.
  int64_t kc_ = 0, mc_ = 0, nc_ = 0;
  size_t workspace_bytes_ = 0;
  // SetConstantB(): the packed panels (per depth block, 16-column panels
  // padded with zeros) and the planned sizes.
  AlignedFloats packed_b_;  // 64-byte aligned: the kernels load whole lines
  int64_t plan_n_ = 0, plan_k_ = 0;
};

// The same product as three plain loops (the reference the tests compare with).
void ReferenceGemm(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                   int64_t c_stride);

// The integer arithmetic of the quantized conv / matmul kernels, as TFLite's
// reference_integer_ops do it: per output channel c,
//   acc = sum (x + input_offset) * (w + filter_offset[c]) + bias[c]
//   out = clamp(MultiplyByQuantizedMultiplier(acc, multiplier[c], shift[c])
//               + output_offset, act_min, act_max)
// with offsets the negated zero points and multiplier/shift from
// input_scale * filter_scale[c] / output_scale.
struct QuantizedConvParams {
  int32_t input_offset = 0;
  int32_t output_offset = 0;
  int32_t act_min = 0, act_max = 0;
  // One entry per output channel (a per-tensor filter repeats its values).
  std::vector<int32_t> filter_offsets;
  std::vector<int32_t> multipliers;
  std::vector<int> shifts;
  std::vector<int32_t> bias;  // zeros when the op has no bias
  // Round as TFLite's optimized GEMM (MultiplyByQuantizedMultiplierHalfUp)
  // instead of its reference kernels: CONV_2D, FULLY_CONNECTED and BATCH_MATMUL
  // set it; DEPTHWISE_CONV_2D and TRANSPOSE_CONV (TFLite requantizes them in
  // its own loops) keep rounding away from zero.
  bool round_half_up = false;

  int32_t Requantize(int32_t acc, int channel) const {
    int32_t v =
        round_half_up
            ? MultiplyByQuantizedMultiplierHalfUp(acc, multipliers[channel], shifts[channel])
            : MultiplyByQuantizedMultiplier(acc, multipliers[channel], shifts[channel]);
    v += output_offset;
    return std::min(std::max(v, act_min), act_max);
  }
};

// Checks the dtypes and quantization of a quantized conv / matmul: input and
// output int8 or uint8, per-tensor, same dtype; filter that dtype, per-tensor
// or (int8 only) per-channel along `channel_dim` with `channels` scales; bias
// (may be null) int32 with `channels` constant values. Unsupported for other
// dtypes; Error naming the tensor for bad parameters. Fills `params_out`.
Status PrepareQuantizedConv(const Tensor& input, const Tensor& filter, const Tensor* bias,
                            const Tensor& output, int channels, int channel_dim,
                            tflite::ActivationFunctionType activation,
                            QuantizedConvParams* params_out);

// True for int8 and uint8 (the quantized paths of these kernels).
inline bool IsQuantized8(const Tensor& t) {
  return t.dtype == DType::kInt8 || t.dtype == DType::kUint8;
}

// The plain-loop kernels of the ops built on Gemm (CONV_2D, FULLY_CONNECTED,
// BATCH_MATMUL, TRANSPOSE_CONV), same Prepare() checks; tests compare the
// GEMM kernels with them.
const OpRegistration* RegisterConv2DReference();
const OpRegistration* RegisterFullyConnectedReference();
const OpRegistration* RegisterBatchMatmulReference();
const OpRegistration* RegisterTransposeConvReference();

}  // namespace dfarm::runtime
