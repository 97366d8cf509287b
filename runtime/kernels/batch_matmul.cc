// BATCH_MATMUL, float32: lhs [..., M, K] (adj_x: [..., K, M]) times rhs
// [..., K, N] (adj_y: [..., N, K]) gives [..., M, N]; the batch dims
// broadcast NumPy-style (up to kMaxBatchRank of them).
// Each batch is one GEMM (adj_x / adj_y read as transposed operands);
// RegisterBatchMatmulReference() keeps the plain loops. int8 (per-tensor)
// uses TFLite's integer arithmetic.
#include <algorithm>
#include <array>
#include <type_traits>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxBatchRank = 4;

struct BatchMatMulData : OpData {
  bool adj_x = false, adj_y = false;
  int64_t m = 0, k = 0, n = 0;
  // Output batch dims and each input's matrix strides per batch dim (0 where
  // broadcast), right-aligned into kMaxBatchRank dims.
  std::array<int64_t, kMaxBatchRank> dims{};
  std::array<int64_t, kMaxBatchRank> lhs_strides{}, rhs_strides{};
  Gemm gemm;
  bool quantized = false;  // int8: TFLite's integer arithmetic, per-tensor
  QuantizedConvParams quant;
};

std::array<int64_t, kMaxBatchRank> BatchStrides(const Tensor& t, int64_t matrix) {
  std::array<int64_t, kMaxBatchRank> strides{};
  int64_t stride = matrix;
  for (int i = t.rank() - 3, d = kMaxBatchRank - 1; i >= 0; --i, --d) {
    strides[d] = t.shape[i] == 1 ? 0 : stride;
    stride *= t.shape[i];
  }
  return strides;
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* lhs = node.inputs[0];
  const Tensor* rhs = node.inputs[1];
  Tensor* output = node.outputs[0];
  const bool quantized = lhs != nullptr && lhs->dtype == DType::kInt8;
  if (!quantized) {
    DFARM_RETURN_IF_ERROR(CheckFloat32(lhs, "lhs"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(rhs, "rhs"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  }
  if (lhs->rank() < 2 || rhs->rank() < 2) {
    return Status::Error("inputs must be at least 2-D, got " + ShapeToString(lhs->shape) + " and " +
                         ShapeToString(rhs->shape));
  }
  const int batch_rank = std::max(lhs->rank(), rhs->rank()) - 2;
  if (batch_rank > kMaxBatchRank) {
    return Status::Unsupported(std::to_string(batch_rank) + " batch dims are not supported");
  }
  const auto* options = node.options<tflite::BatchMatMulOptions>();
  auto data = std::make_unique<BatchMatMulData>();
  data->adj_x = options != nullptr && options->adj_x();
  data->adj_y = options != nullptr && options->adj_y();
  const int lr = lhs->rank(), rr = rhs->rank();
  data->m = data->adj_x ? lhs->shape[lr - 1] : lhs->shape[lr - 2];
  data->k = data->adj_x ? lhs->shape[lr - 2] : lhs->shape[lr - 1];
  const int64_t rhs_k = data->adj_y ? rhs->shape[rr - 1] : rhs->shape[rr - 2];
  data->n = data->adj_y ? rhs->shape[rr - 2] : rhs->shape[rr - 1];
  if (rhs_k != data->k) {
    return Status::Error("cannot multiply " + ShapeToString(lhs->shape) + " by " +
                         ShapeToString(rhs->shape) + " (inner dims " + std::to_string(data->k) +
                         " and " + std::to_string(rhs_k) + ")");
  }
  std::vector<int32_t> computed(batch_rank);
  data->dims.fill(1);
  for (int i = 0; i < batch_rank; ++i) {
    const int li = lr - 2 - batch_rank + i, ri = rr - 2 - batch_rank + i;
    const int32_t l = li >= 0 ? lhs->shape[li] : 1, r = ri >= 0 ? rhs->shape[ri] : 1;
    if (l != r && l != 1 && r != 1) {
      return Status::Error("cannot broadcast the batch dims of " + ShapeToString(lhs->shape) +
                           " and " + ShapeToString(rhs->shape));
    }
    computed[i] = l == 1 ? r : l;
    data->dims[kMaxBatchRank - batch_rank + i] = computed[i];
  }
  computed.push_back(static_cast<int32_t>(data->m));
  computed.push_back(static_cast<int32_t>(data->n));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  data->lhs_strides = BatchStrides(*lhs, data->m * data->k);
  data->rhs_strides = BatchStrides(*rhs, data->k * data->n);
  if (quantized) {
    data->quantized = true;
    if (rhs->per_channel_quantized) {
      return Status::Unsupported("a per-channel quantized rhs is not supported");
    }
    DFARM_RETURN_IF_ERROR(PrepareQuantizedConv(*lhs, *rhs, nullptr, *output, 1, 0,
                                               tflite::ActivationFunctionType::NONE, &data->quant));
    // TFLite 2.9 computes quantized BATCH_MATMUL with its optimized GEMM (ruy).
    data->quant.round_half_up = true;
    node.data = std::move(data);
    return Status::Ok();
  }
  data->gemm.Plan(data->m, data->n, data->k);
  node.scratch_bytes = data->gemm.workspace_bytes();
  node.data = std::move(data);
  return Status::Ok();
}

Status EvalReference(Node& node);

Status Eval(Node& node) {
  const BatchMatMulData& d = *node.data_as<BatchMatMulData>();
  if (d.quantized) return EvalReference(node);
  DFARM_RETURN_IF_ERROR(CheckScratch(node));
  const float* lhs = node.inputs[0]->data_as<float>();
  const float* rhs = node.inputs[1]->data_as<float>();
  float* out = node.outputs[0]->data_as<float>();
  std::array<int64_t, kMaxBatchRank> index{};
  int64_t batches = 1;
  for (int64_t dim : d.dims) batches *= dim;
  std::fill(out, out + batches * d.m * d.n, 0.0f);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t lo = 0, ro = 0;
    for (int i = 0; i < kMaxBatchRank; ++i) {
      lo += index[i] * d.lhs_strides[i];
      ro += index[i] * d.rhs_strides[i];
    }
    d.gemm.RunParallel(d.m, d.n, d.k, {lhs + lo, d.adj_x ? d.m : d.k, d.adj_x},
                       {rhs + ro, d.adj_y ? d.k : d.n, d.adj_y}, out + b * d.m * d.n, d.n,
                       node.context, 0);
    for (int i = kMaxBatchRank - 1; i >= 0; --i) {
      if (++index[i] < d.dims[i]) break;
      index[i] = 0;
    }
  }
  return Status::Ok();
}

// The plain loops; int8 as TFLite's reference_ops::BatchMatMul: int32 sums
// of (lhs - lhs_zp) * (rhs - rhs_zp), requantized and clamped to int8.
template <typename T, typename Acc>
void EvalLoops(const BatchMatMulData& d, const T* lhs, const T* rhs, T* out) {
  // lhs(m, k) and rhs(k, n) element strides.
  const int64_t lm = d.adj_x ? 1 : d.k, lk = d.adj_x ? d.m : 1;
  const int64_t rk = d.adj_y ? 1 : d.n, rn = d.adj_y ? d.k : 1;
  std::array<int64_t, kMaxBatchRank> index{};
  int64_t batches = 1;
  for (int64_t dim : d.dims) batches *= dim;
  for (int64_t b = 0; b < batches; ++b) {
    int64_t lo = 0, ro = 0;
    for (int i = 0; i < kMaxBatchRank; ++i) {
      lo += index[i] * d.lhs_strides[i];
      ro += index[i] * d.rhs_strides[i];
    }
    for (int64_t m = 0; m < d.m; ++m) {
      for (int64_t n = 0; n < d.n; ++n) {
        Acc acc = 0;
        if constexpr (std::is_same_v<T, float>) {
          for (int64_t k = 0; k < d.k; ++k)
            acc += lhs[lo + m * lm + k * lk] * rhs[ro + k * rk + n * rn];
          *out++ = acc;
        } else {
          const QuantizedConvParams& q = d.quant;
          for (int64_t k = 0; k < d.k; ++k) {
            acc += (static_cast<int32_t>(lhs[lo + m * lm + k * lk]) + q.input_offset) *
                   (static_cast<int32_t>(rhs[ro + k * rk + n * rn]) + q.filter_offsets[0]);
          }
          *out++ = static_cast<T>(q.Requantize(acc, 0));
        }
      }
    }
    for (int i = kMaxBatchRank - 1; i >= 0; --i) {
      if (++index[i] < d.dims[i]) break;
      index[i] = 0;
    }
  }
}

Status EvalReference(Node& node) {
  const BatchMatMulData& d = *node.data_as<BatchMatMulData>();
  if (d.quantized) {
    EvalLoops<int8_t, int32_t>(d, node.inputs[0]->data_as<int8_t>(),
                               node.inputs[1]->data_as<int8_t>(),
                               node.outputs[0]->data_as<int8_t>());
  } else {
    EvalLoops<float, float>(d, node.inputs[0]->data_as<float>(), node.inputs[1]->data_as<float>(),
                            node.outputs[0]->data_as<float>());
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterBatchMatmul() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

const OpRegistration* RegisterBatchMatmulReference() {
  static const OpRegistration registration = {&Prepare, &EvalReference};
  return &registration;
}

}  // namespace dfarm::runtime
