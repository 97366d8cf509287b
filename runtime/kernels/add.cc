// ADD, float32, with NumPy-style broadcasting (up to kMaxRank dimensions)
// and a fused activation.
#include <algorithm>
#include <array>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct AddData : OpData {
  enum class Kind { kSameShape, kScalarLhs, kScalarRhs, kBroadcast } kind = Kind::kSameShape;
  ActivationRange activation{};
  // kBroadcast: output dims and element strides of each input (0 where the
  // input is broadcast), right-aligned into kMaxRank dimensions.
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> lhs_strides{};
  std::array<int64_t, kMaxRank> rhs_strides{};
};

// Right-aligned element strides of `shape` within `rank` dims, 0 where size 1.
std::array<int64_t, kMaxRank> BroadcastStrides(const std::vector<int32_t>& shape) {
  std::array<int64_t, kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1, d = kMaxRank - 1; i >= 0; --i, --d) {
    strides[d] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const auto* options = node.options<tflite::AddOptions>();
  const Tensor* lhs = node.inputs[0];
  const Tensor* rhs = node.inputs[1];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat32(lhs, "input 0"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(rhs, "input 1"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  auto data = std::make_unique<AddData>();
  DFARM_RETURN_IF_ERROR(GetActivationRange(options != nullptr
                                               ? options->fused_activation_function()
                                               : tflite::ActivationFunctionType::NONE,
                                           &data->activation));

  const int rank = std::max(lhs->rank(), rhs->rank());
  if (rank > kMaxRank) {
    return Status::Unsupported("broadcasting over " + std::to_string(rank) +
                               " dimensions is not supported (at most " + std::to_string(kMaxRank) +
                               ")");
  }
  std::vector<int32_t> shape(rank);
  for (int i = 0; i < rank; ++i) {
    int li = lhs->rank() - rank + i, ri = rhs->rank() - rank + i;
    int32_t l = li >= 0 ? lhs->shape[li] : 1;
    int32_t r = ri >= 0 ? rhs->shape[ri] : 1;
    if (l != r && l != 1 && r != 1) {
      return Status::Error("cannot broadcast " + ShapeToString(lhs->shape) + " with " +
                           ShapeToString(rhs->shape));
    }
    shape[i] = l == 1 ? r : l;
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, shape));

  if (lhs->shape == rhs->shape) {
    data->kind = AddData::Kind::kSameShape;
  } else if (lhs->num_elements() == 1) {
    data->kind = AddData::Kind::kScalarLhs;
  } else if (rhs->num_elements() == 1) {
    data->kind = AddData::Kind::kScalarRhs;
  } else {
    data->kind = AddData::Kind::kBroadcast;
    data->dims.fill(1);
    for (int i = 0; i < rank; ++i) data->dims[kMaxRank - rank + i] = shape[i];
    data->lhs_strides = BroadcastStrides(lhs->shape);
    data->rhs_strides = BroadcastStrides(rhs->shape);
  }
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const AddData& d = *node.data_as<AddData>();
  const float* __restrict a = node.inputs[0]->data_as<float>();
  const float* __restrict b = node.inputs[1]->data_as<float>();
  float* __restrict out = node.outputs[0]->data_as<float>();
  const int64_t n = node.outputs[0]->num_elements();
  const ActivationRange act = d.activation;
  switch (d.kind) {
    case AddData::Kind::kSameShape:
      for (int64_t i = 0; i < n; ++i) out[i] = Clamp(a[i] + b[i], act);
      break;
    case AddData::Kind::kScalarLhs: {
      const float s = a[0];
      for (int64_t i = 0; i < n; ++i) out[i] = Clamp(s + b[i], act);
      break;
    }
    case AddData::Kind::kScalarRhs: {
      const float s = b[0];
      for (int64_t i = 0; i < n; ++i) out[i] = Clamp(a[i] + s, act);
      break;
    }
    case AddData::Kind::kBroadcast: {
      // Odometer over the outer kMaxRank-1 dims; the last dim is a tight loop.
      constexpr int kLast = kMaxRank - 1;
      std::array<int64_t, kMaxRank> index{};
      const int64_t inner = d.dims[kLast];
      const int64_t ls = d.lhs_strides[kLast], rs = d.rhs_strides[kLast];
      int64_t lhs_offset = 0, rhs_offset = 0;
      for (int64_t o = 0; o < n; o += inner) {
        const float* pa = a + lhs_offset;
        const float* pb = b + rhs_offset;
        for (int64_t i = 0; i < inner; ++i) out[o + i] = Clamp(pa[i * ls] + pb[i * rs], act);
        for (int dim = kLast - 1; dim >= 0; --dim) {
          lhs_offset += d.lhs_strides[dim];
          rhs_offset += d.rhs_strides[dim];
          if (++index[dim] < d.dims[dim]) break;
          lhs_offset -= d.lhs_strides[dim] * d.dims[dim];
          rhs_offset -= d.rhs_strides[dim] * d.dims[dim];
          index[dim] = 0;
        }
      }
      break;
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterAdd() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
