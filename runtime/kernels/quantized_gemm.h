// The integer product behind the quantized CONV_2D and FULLY_CONNECTED
// kernels: for activation rows x and weight rows w,
//   acc[p][c] = sum_k x[p][k] * w[c][k]
// on int16 operands (activations with the input offset added, weights with
// their filter offset: both within [-255, 255]), summed in int32, then the
// bias and TFLite's requantization (QuantizedConvParams). Integer sums do
// not depend on their order, so the results have the bits of the plain
// loops (RegisterConv2DReference(), RegisterFullyConnectedReference()).
// With AVX2 (picked at run time) a tile of 4 rows x 2 channels runs on
// VPMADDWD, 16 products an instruction; elsewhere plain loops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/kernels/gemm.h"

namespace dfarm::runtime {

// Depth of a packed row, rounded up (zeros past the real depth).
constexpr int64_t kQuantizedDepthAlign = 16;
// Activation rows QuantizedGemmTile() takes at most.
constexpr int64_t kQuantizedTileRows = 4;

inline int64_t QuantizedPackedDepth(int64_t depth) {
  return (depth + kQuantizedDepthAlign - 1) / kQuantizedDepthAlign * kQuantizedDepthAlign;
}

// Constant weights [rows][depth] (int8 or uint8): their own bytes, rows
// QuantizedPackedDepth(depth) apart (the padding's products meet the
// activations' zero padding), and each row's filter offset, added as the
// kernel widens them to int16 (so the copy is no larger than the weights,
// as TFLite's packed ones). `simd`: QuantizedGemmTile() takes the AVX2
// kernel (set where the CPU has it; tests clear it to check the plain loops).
struct QuantizedWeights {
  int64_t rows = 0, depth = 0, stride = 0;
  std::vector<uint8_t> data;
  std::vector<int16_t> offsets;
  bool is_int8 = false;
  bool simd = false;
};
template <typename T>
QuantizedWeights PackQuantizedWeights(const T* w, int64_t rows, int64_t depth,
                                      const std::vector<int32_t>& filter_offsets);
// The same from a constant int8 or uint8 tensor's values.
QuantizedWeights PackQuantizedWeights(const Tensor& weights, int64_t rows, int64_t depth,
                                      const std::vector<int32_t>& filter_offsets);

// Whether this CPU runs the AVX2 kernel.
bool QuantizedGemmHasSimd();

// out[i] = x[i] + offset as int16, for i < n.
template <typename T>
void WidenWithOffset(const T* x, int64_t n, int32_t offset, int16_t* out);

// Rows [0, rows) (1 <= rows <= kQuantizedTileRows) of x, each w.stride
// int16 apart and zero past w.depth, times every row of w: writes
// out[p * out_stride + c] = q.Requantize(acc + q.bias[c], c) as T. `sums`:
// QuantizedSumsSize(w) int32 of workspace.
template <typename T>
void QuantizedGemmTile(const int16_t* x, int64_t rows, const QuantizedWeights& w,
                       const QuantizedConvParams& q, int32_t* sums, T* out, int64_t out_stride);
inline int64_t QuantizedSumsSize(const QuantizedWeights& w) { return kQuantizedTileRows * w.rows; }

// A thread's scratch for QuantizedGemmTile() with `w`: one tile of
// activation rows, then their int32 sums. QuantizedScratchBytes() is what a
// kernel asks for (Node::scratch_bytes), QuantizedScratch() splits it.
struct QuantizedScratchParts {
  int16_t* rows;
  int32_t* sums;
};
inline size_t QuantizedScratchBytes(const QuantizedWeights& w) {
  return static_cast<size_t>(kQuantizedTileRows * w.stride) * sizeof(int16_t) +
         static_cast<size_t>(QuantizedSumsSize(w)) * sizeof(int32_t);
}
inline QuantizedScratchParts QuantizedScratch(std::byte* scratch, const QuantizedWeights& w) {
  auto* rows = reinterpret_cast<int16_t*>(scratch);
  return {rows, reinterpret_cast<int32_t*>(rows + kQuantizedTileRows * w.stride)};
}

// out[c] = q.Requantize(acc[c] + q.bias[c], c) for c < channels, 8 channels
// at a time on AVX2 where `simd` (the same integer steps: the same codes).
template <typename T>
void RequantizeRow(const int32_t* acc, int64_t channels, const QuantizedConvParams& q, bool simd,
                   T* out);

}  // namespace dfarm::runtime
