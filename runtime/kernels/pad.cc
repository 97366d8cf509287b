// PAD: pads any dtype with zeros (the zero point for quantized tensors).
// The paddings input ([rank,2] int32 or int64) must be constant.
#include <array>
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct PadData : OpData {
  // Input dims and the output's element strides and pad_before offsets,
  // right-aligned into kMaxRank dims.
  std::array<int64_t, kMaxRank> in_dims{};
  std::array<int64_t, kMaxRank> out_strides{};
  std::array<int64_t, kMaxRank> before{};
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* input = node.inputs[0];
  const Tensor* paddings = node.inputs[1];
  Tensor* output = node.outputs[0];
  if (output->dtype != input->dtype) {
    return Status::Error(std::string("output dtype ") + DTypeName(output->dtype) +
                         " differs from input dtype " + DTypeName(input->dtype));
  }
  if (input->quantized && input->zero_point != 0) {
    return Status::Unsupported("padding with a non-zero zero point is not supported");
  }
  const int rank = input->rank();
  if (rank > kMaxRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) +
                               " are not supported (at most " + std::to_string(kMaxRank) + ")");
  }
  if (paddings->dtype != DType::kInt32 && paddings->dtype != DType::kInt64) {
    return Status::Error(std::string("paddings must be int32 or int64, got ") +
                         DTypeName(paddings->dtype));
  }
  if (paddings->rank() != 2 || paddings->shape[0] != rank || paddings->shape[1] != 2) {
    return Status::Error("paddings must be [" + std::to_string(rank) + ",2], got " +
                         ShapeToString(paddings->shape));
  }
  if (!paddings->has_static_value()) {
    return Status::Unsupported("paddings computed at run time are not supported");
  }
  auto data = std::make_unique<PadData>();
  data->in_dims.fill(1);
  std::array<int64_t, kMaxRank> out_dims;
  out_dims.fill(1);
  std::vector<int32_t> computed(rank);
  for (int i = 0; i < rank; ++i) {
    int64_t before = paddings->dtype == DType::kInt32 ? paddings->data_as<int32_t>()[2 * i]
                                                      : paddings->data_as<int64_t>()[2 * i];
    int64_t after = paddings->dtype == DType::kInt32 ? paddings->data_as<int32_t>()[2 * i + 1]
                                                     : paddings->data_as<int64_t>()[2 * i + 1];
    if (before < 0 || after < 0 || before > (1 << 24) || after > (1 << 24)) {
      return Status::Error("padding of dimension " + std::to_string(i) + " is " +
                           std::to_string(before) + "," + std::to_string(after) +
                           " (must be in [0, 2^24])");
    }
    const int d = kMaxRank - rank + i;
    data->in_dims[d] = input->shape[i];
    data->before[d] = before;
    out_dims[d] = input->shape[i] + before + after;
    computed[i] = static_cast<int32_t>(out_dims[d]);
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  int64_t stride = 1;
  for (int d = kMaxRank - 1; d >= 0; --d) {
    data->out_strides[d] = stride;
    stride *= out_dims[d];
  }
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const PadData& d = *node.data_as<PadData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  const size_t element = DTypeSize(input.dtype);
  std::memset(output.data, 0, output.bytes);
  if (input.num_elements() == 0) return Status::Ok();

  constexpr int kLast = kMaxRank - 1;
  const size_t row_bytes = static_cast<size_t>(d.in_dims[kLast]) * element;
  const std::byte* in = input.data;
  int64_t out_offset = 0;
  for (int dim = 0; dim < kMaxRank; ++dim) out_offset += d.before[dim] * d.out_strides[dim];
  std::array<int64_t, kMaxRank> index{};
  const int64_t rows = input.num_elements() / d.in_dims[kLast];
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(output.data + out_offset * element, in, row_bytes);
    in += row_bytes;
    for (int dim = kLast - 1; dim >= 0; --dim) {
      out_offset += d.out_strides[dim];
      if (++index[dim] < d.in_dims[dim]) break;
      out_offset -= d.out_strides[dim] * d.in_dims[dim];
      index[dim] = 0;
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterPad() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
