// Elementwise binary ops, float32, with NumPy-style broadcasting (up to
// kMaxRank dimensions): ADD, SUB, MUL, DIV (with a fused activation, as their
// options allow), MAXIMUM, MINIMUM, SQUARED_DIFFERENCE and PRELU (input 1 is
// alpha: x >= 0 ? x : alpha * x), which have none.
#include <algorithm>
#include <array>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct BinaryData : OpData {
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

// The fused activation of the node's options (NONE for ops without one).
tflite::ActivationFunctionType FusedActivation(const Node& node) {
  using Op = tflite::BuiltinOperator;
  switch (node.code) {
    case Op::ADD:
      if (const auto* o = node.options<tflite::AddOptions>()) return o->fused_activation_function();
      break;
    case Op::SUB:
      if (const auto* o = node.options<tflite::SubOptions>()) return o->fused_activation_function();
      break;
    case Op::MUL:
      if (const auto* o = node.options<tflite::MulOptions>()) return o->fused_activation_function();
      break;
    case Op::DIV:
      if (const auto* o = node.options<tflite::DivOptions>()) return o->fused_activation_function();
      break;
    default:
      break;
  }
  return tflite::ActivationFunctionType::NONE;
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* lhs = node.inputs[0];
  const Tensor* rhs = node.inputs[1];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat32(lhs, "input 0"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(rhs, "input 1"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  auto data = std::make_unique<BinaryData>();
  DFARM_RETURN_IF_ERROR(GetActivationRange(FusedActivation(node), &data->activation));

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
    data->kind = BinaryData::Kind::kSameShape;
  } else if (lhs->num_elements() == 1) {
    data->kind = BinaryData::Kind::kScalarLhs;
  } else if (rhs->num_elements() == 1) {
    data->kind = BinaryData::Kind::kScalarRhs;
  } else {
    data->kind = BinaryData::Kind::kBroadcast;
    data->dims.fill(1);
    for (int i = 0; i < rank; ++i) data->dims[kMaxRank - rank + i] = shape[i];
    data->lhs_strides = BroadcastStrides(lhs->shape);
    data->rhs_strides = BroadcastStrides(rhs->shape);
  }
  node.data = std::move(data);
  return Status::Ok();
}

struct AddOp {
  static float Apply(float a, float b) { return a + b; }
};
struct SubOp {
  static float Apply(float a, float b) { return a - b; }
};
struct MulOp {
  static float Apply(float a, float b) { return a * b; }
};
struct DivOp {
  static float Apply(float a, float b) { return a / b; }
};
struct MaximumOp {
  static float Apply(float a, float b) { return a > b ? a : b; }
};
struct MinimumOp {
  static float Apply(float a, float b) { return a < b ? a : b; }
};
struct SquaredDifferenceOp {
  static float Apply(float a, float b) { return (a - b) * (a - b); }
};

struct PreluOp {
  static float Apply(float x, float alpha) { return x >= 0.0f ? x : x * alpha; }
};

template <typename Op>
Status Eval(Node& node) {
  const BinaryData& d = *node.data_as<BinaryData>();
  const float* __restrict a = node.inputs[0]->data_as<float>();
  const float* __restrict b = node.inputs[1]->data_as<float>();
  float* __restrict out = node.outputs[0]->data_as<float>();
  const int64_t n = node.outputs[0]->num_elements();
  const ActivationRange act = d.activation;
  switch (d.kind) {
    case BinaryData::Kind::kSameShape:
      for (int64_t i = 0; i < n; ++i) out[i] = Clamp(Op::Apply(a[i], b[i]), act);
      break;
    case BinaryData::Kind::kScalarLhs: {
      const float s = a[0];
      for (int64_t i = 0; i < n; ++i) out[i] = Clamp(Op::Apply(s, b[i]), act);
      break;
    }
    case BinaryData::Kind::kScalarRhs: {
      const float s = b[0];
      for (int64_t i = 0; i < n; ++i) out[i] = Clamp(Op::Apply(a[i], s), act);
      break;
    }
    case BinaryData::Kind::kBroadcast: {
      // Odometer over the outer kMaxRank-1 dims; the last dim is a tight loop.
      constexpr int kLast = kMaxRank - 1;
      std::array<int64_t, kMaxRank> index{};
      const int64_t inner = d.dims[kLast];
      const int64_t ls = d.lhs_strides[kLast], rs = d.rhs_strides[kLast];
      int64_t lhs_offset = 0, rhs_offset = 0;
      for (int64_t o = 0; o < n; o += inner) {
        const float* pa = a + lhs_offset;
        const float* pb = b + rhs_offset;
        for (int64_t i = 0; i < inner; ++i)
          out[o + i] = Clamp(Op::Apply(pa[i * ls], pb[i * rs]), act);
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
  static const OpRegistration registration = {&Prepare, &Eval<AddOp>};
  return &registration;
}

const OpRegistration* RegisterSub() {
  static const OpRegistration registration = {&Prepare, &Eval<SubOp>};
  return &registration;
}

const OpRegistration* RegisterMul() {
  static const OpRegistration registration = {&Prepare, &Eval<MulOp>};
  return &registration;
}

const OpRegistration* RegisterDiv() {
  static const OpRegistration registration = {&Prepare, &Eval<DivOp>};
  return &registration;
}

const OpRegistration* RegisterMaximum() {
  static const OpRegistration registration = {&Prepare, &Eval<MaximumOp>};
  return &registration;
}

const OpRegistration* RegisterMinimum() {
  static const OpRegistration registration = {&Prepare, &Eval<MinimumOp>};
  return &registration;
}

const OpRegistration* RegisterSquaredDifference() {
  static const OpRegistration registration = {&Prepare, &Eval<SquaredDifferenceOp>};
  return &registration;
}

const OpRegistration* RegisterPrelu() {
  static const OpRegistration registration = {&Prepare, &Eval<PreluOp>};
  return &registration;
}

}  // namespace dfarm::runtime
