// ARG_MAX and ARG_MIN, float32, int8 or uint8 input (quantized values are
// compared as stored: a positive scale keeps their order), int32 or int64 output: the index along
// the axis of input 1 (one int32/int64 value, before Invoke()) of the largest
// (smallest) value; the first one on ties. The output drops the axis.
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct ArgData : OpData {
  int64_t outer = 1, axis_size = 0, inner = 1;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  if (input->dtype != DType::kInt8 && input->dtype != DType::kUint8) {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
  }
  if (output->dtype != DType::kInt32 && output->dtype != DType::kInt64) {
    return Status::Unsupported(std::string("output dtype ") + DTypeName(output->dtype) +
                               " is not supported (int32, int64)");
  }
  std::vector<int64_t> axis_value;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "axis", &axis_value));
  if (axis_value.size() != 1) return Status::Error("axis must hold one value");
  int axis = 0;
  DFARM_RETURN_IF_ERROR(NormalizeAxis(axis_value[0], input->rank(), "axis", &axis));
  auto data = std::make_unique<ArgData>();
  std::vector<int32_t> computed;
  for (int d = 0; d < input->rank(); ++d) {
    if (d == axis) continue;
    computed.push_back(input->shape[d]);
    (d < axis ? data->outer : data->inner) *= input->shape[d];
  }
  data->axis_size = input->shape[axis];
  if (data->axis_size <= 0) return Status::Error("the axis is empty");
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  node.data = std::move(data);
  return Status::Ok();
}

template <bool kMax, typename T>
void EvalTyped(const ArgData& d, const T* in, Tensor& output) {
  for (int64_t o = 0; o < d.outer; ++o) {
    for (int64_t i = 0; i < d.inner; ++i) {
      const T* x = in + o * d.axis_size * d.inner + i;
      int64_t best = 0;
      for (int64_t a = 1; a < d.axis_size; ++a) {
        const T v = x[a * d.inner], b = x[best * d.inner];
        if (kMax ? v > b : v < b) best = a;
      }
      if (output.dtype == DType::kInt32) {
        output.data_as<int32_t>()[o * d.inner + i] = static_cast<int32_t>(best);
      } else {
        output.data_as<int64_t>()[o * d.inner + i] = best;
      }
    }
  }
}

template <bool kMax>
Status Eval(Node& node) {
  const ArgData& d = *node.data_as<ArgData>();
  const Tensor& input = *node.inputs[0];
  switch (input.dtype) {
    case DType::kInt8:
      EvalTyped<kMax>(d, input.data_as<int8_t>(), *node.outputs[0]);
      break;
    case DType::kUint8:
      EvalTyped<kMax>(d, input.data_as<uint8_t>(), *node.outputs[0]);
      break;
    default:
      EvalTyped<kMax>(d, input.data_as<float>(), *node.outputs[0]);
      break;
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterArgMax() {
  static const OpRegistration registration = {&Prepare, &Eval<true>};
  return &registration;
}

const OpRegistration* RegisterArgMin() {
  static const OpRegistration registration = {&Prepare, &Eval<false>};
  return &registration;
}

}  // namespace dfarm::runtime
