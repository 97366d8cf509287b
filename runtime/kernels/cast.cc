// CAST between float32, int32, int64, uint8, int8, int16 and bool, as
// static_cast does (float to integer truncates toward zero; to bool: != 0).
// float16 is read (widened to float32) but not written.
#include <cstdint>
#include <type_traits>

#include "runtime/fp16.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

bool Castable(DType t, bool as_output) {
  switch (t) {
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUint8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kBool:
      return true;
    case DType::kFloat16:
      return !as_output;
  }
  return false;
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  if (!Castable(input->dtype, false) || !Castable(output->dtype, true)) {
    return Status::Unsupported(std::string("cast from ") + DTypeName(input->dtype) + " to " +
                               DTypeName(output->dtype) + " is not supported");
  }
  return CheckOutputShape(*output, input->shape);
}

template <typename To>
void CastTo(const Tensor& input, To* out) {
  const int64_t n = input.num_elements();
  auto run = [&](auto* in) {
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<To, bool>) {
        out[i] = in[i] != 0;
      } else {
        out[i] = static_cast<To>(in[i]);
      }
    }
  };
  switch (input.dtype) {
    case DType::kFloat32:
      run(input.data_as<float>());
      break;
    case DType::kInt32:
      run(input.data_as<int32_t>());
      break;
    case DType::kInt64:
      run(input.data_as<int64_t>());
      break;
    case DType::kUint8:
      run(input.data_as<uint8_t>());
      break;
    case DType::kInt8:
      run(input.data_as<int8_t>());
      break;
    case DType::kInt16:
      run(input.data_as<int16_t>());
      break;
    case DType::kBool:
      run(input.data_as<bool>());
      break;
    case DType::kFloat16: {
      const uint16_t* in = input.data_as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) {
        const float v = HalfToFloat(in[i]);
        if constexpr (std::is_same_v<To, bool>) {
          out[i] = v != 0.0f;
        } else {
          out[i] = static_cast<To>(v);
        }
      }
      break;
    }
  }
}

Status Eval(Node& node) {
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  switch (output.dtype) {
    case DType::kFloat32:
      CastTo(input, output.data_as<float>());
      break;
    case DType::kInt32:
      CastTo(input, output.data_as<int32_t>());
      break;
    case DType::kInt64:
      CastTo(input, output.data_as<int64_t>());
      break;
    case DType::kUint8:
      CastTo(input, output.data_as<uint8_t>());
      break;
    case DType::kInt8:
      CastTo(input, output.data_as<int8_t>());
      break;
    case DType::kInt16:
      CastTo(input, output.data_as<int16_t>());
      break;
    case DType::kBool:
      CastTo(input, output.data_as<bool>());
      break;
    case DType::kFloat16:
      return Status::Unsupported("cast to float16 is not supported");
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterCast() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
