// PAD: pads any dtype with zeros (for int8/uint8, the output's zero point, as
// TFLite does; input and output must then share scale and zero point).
// PADV2: pads with its input 2, a one-element tensor of the input's dtype
// (zeros when omitted). The paddings input ([rank,2] int32 or int64) must be
// constant, and so must PADV2's value.
#include <array>
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct PadData : OpData {
  // Input dims and the output's element strides and pad_before offsets,
  // right-aligned into kMaxRank dims.
  std::array<int64_t, kMaxRank> in_dims{};
  std::array<int64_t, kMaxRank> out_strides{};
  std::array<int64_t, kMaxRank> before{};
  // PADV2: the padding value's bytes (one element); all zero for PAD.
  std::array<std::byte, 8> fill{};
  bool zero_fill = true;
  // Only the last dimension is padded (as the face detectors pad channels):
  // each output row is the padding before, the input row and the padding
  // after, written in one pass.
  bool last_dim_only = false;
};

// What the padding is filled with: PADV2's one-element constant `value`
// (when given), else the output's zero point when it is not 0 (int8 or uint8,
// per tensor: *pad_with_zero_point), else zeros.
Status CheckFill(const Tensor& input, const Tensor* value, const Tensor& output,
                 bool* pad_with_zero_point) {
  if (value != nullptr) {
    DFARM_RETURN_IF_ERROR(CheckSameDType(&input, "input", value, "constant value"));
    if (value->num_elements() != 1) {
      return Status::Error("constant value must hold one element, got " +
                           ShapeToString(value->shape));
    }
    if (!value->has_static_value()) {
      return Status::Unsupported("a constant value computed at run time is not supported");
    }
  } else if (output.quantized && output.zero_point != 0) {
    if (output.dtype != DType::kInt8 && output.dtype != DType::kUint8) {
      return Status::Unsupported(std::string("padding ") + DTypeName(output.dtype) +
                                 " with a non-zero zero point is not supported");
    }
    DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(output, "output"));
    *pad_with_zero_point = true;
  }
  return Status::Ok();
}

// A constant [rank,2] int32 or int64 paddings tensor.
Status CheckPaddings(const Tensor& paddings, int rank) {
  if (paddings.dtype != DType::kInt32 && paddings.dtype != DType::kInt64) {
    return Status::Error(std::string("paddings must be int32 or int64, got ") +
                         DTypeName(paddings.dtype));
  }
  if (paddings.rank() != 2 || paddings.shape[0] != rank || paddings.shape[1] != 2) {
    return Status::Error("paddings must be [" + std::to_string(rank) + ",2], got " +
                         ShapeToString(paddings.shape));
  }
  if (!paddings.has_static_value()) {
    return Status::Unsupported("paddings computed at run time are not supported");
  }
  return Status::Ok();
}

// Reads the paddings (each in [0, 2^24]), checks the output shape (sets it
// when declared open), and sets the right-aligned in_dims, before and
// out_strides.
Status ComputeLayout(const Tensor& input, const Tensor& paddings, Tensor& output, PadData* data) {
  const int rank = input.rank();
  data->in_dims.fill(1);
  std::array<int64_t, kMaxRank> out_dims;
  out_dims.fill(1);
  std::vector<int32_t> computed(rank);
  for (int i = 0; i < rank; ++i) {
    int64_t before = paddings.dtype == DType::kInt32 ? paddings.data_as<int32_t>()[2 * i]
                                                     : paddings.data_as<int64_t>()[2 * i];
    int64_t after = paddings.dtype == DType::kInt32 ? paddings.data_as<int32_t>()[2 * i + 1]
                                                    : paddings.data_as<int64_t>()[2 * i + 1];
    if (before < 0 || after < 0 || before > (1 << 24) || after > (1 << 24)) {
      return Status::Error("padding of dimension " + std::to_string(i) + " is " +
                           std::to_string(before) + "," + std::to_string(after) +
                           " (must be in [0, 2^24])");
    }
    const int d = kMaxRank - rank + i;
    data->in_dims[d] = input.shape[i];
    data->before[d] = before;
    out_dims[d] = input.shape[i] + before + after;
    computed[i] = static_cast<int32_t>(out_dims[d]);
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(output, computed));
  data->last_dim_only = data->in_dims[kMaxRank - 1] > 0;
  for (int d = 0; d < kMaxRank - 1; ++d) {
    data->last_dim_only = data->last_dim_only && out_dims[d] == data->in_dims[d];
  }
  int64_t stride = 1;
  for (int d = kMaxRank - 1; d >= 0; --d) {
    data->out_strides[d] = stride;
    stride *= out_dims[d];
  }
  return Status::Ok();
}

Status Prepare(Node& node) {
  const bool v2 = node.code == tflite::BuiltinOperator::PADV2;
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, v2 ? 3 : 2, 1));
  const Tensor* input = node.inputs[0];
  const Tensor* paddings = node.inputs[1];
  Tensor* output = node.outputs[0];
  if (output->dtype != input->dtype) {
    return Status::Error(std::string("output dtype ") + DTypeName(output->dtype) +
                         " differs from input dtype " + DTypeName(input->dtype));
  }
  const Tensor* value = v2 && node.inputs.size() > 2 ? node.inputs[2] : nullptr;
  bool pad_with_zero_point = false;
  DFARM_RETURN_IF_ERROR(CheckFill(*input, value, *output, &pad_with_zero_point));
  if (input->quantized && output->quantized &&
      (input->scale != output->scale || input->zero_point != output->zero_point)) {
    return Status::Unsupported(
        "input and output with different scales or zero points are not supported");
  }
  const int rank = input->rank();
  if (rank > kMaxRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) +
                               " are not supported (at most " + std::to_string(kMaxRank) + ")");
  }
  DFARM_RETURN_IF_ERROR(CheckPaddings(*paddings, rank));
  auto data = std::make_unique<PadData>();
  if (value != nullptr) {
    std::memcpy(data->fill.data(), value->data, DTypeSize(value->dtype));
    data->zero_fill = false;
  } else if (pad_with_zero_point) {
    // int8 or uint8: the zero point's byte.
    const auto byte = static_cast<uint8_t>(output->zero_point);
    std::memcpy(data->fill.data(), &byte, 1);
    data->zero_fill = false;
  }
  DFARM_RETURN_IF_ERROR(ComputeLayout(*input, *paddings, *output, data.get()));
  node.data = std::move(data);
  return Status::Ok();
}

// Copies input rows [begin, end) (rows along the last dim) to their place.
void CopyRows(const PadData& d, const std::byte* in, std::byte* out, size_t element, int64_t begin,
              int64_t end) {
  constexpr int kLast = kMaxRank - 1;
  const size_t row_bytes = static_cast<size_t>(d.in_dims[kLast]) * element;
  std::array<int64_t, kMaxRank> index{};
  int64_t out_offset = 0;
  for (int dim = 0; dim < kMaxRank; ++dim) out_offset += d.before[dim] * d.out_strides[dim];
  for (int64_t rest = begin, dim = kLast - 1; dim >= 0; --dim) {
    index[dim] = rest % d.in_dims[dim];
    rest /= d.in_dims[dim];
    out_offset += index[dim] * d.out_strides[dim];
  }
  in += static_cast<size_t>(begin) * row_bytes;
  for (int64_t r = begin; r < end; ++r) {
    std::memcpy(out + out_offset * element, in, row_bytes);
    in += row_bytes;
    for (int dim = kLast - 1; dim >= 0; --dim) {
      out_offset += d.out_strides[dim];
      if (++index[dim] < d.in_dims[dim]) break;
      out_offset -= d.out_strides[dim] * d.in_dims[dim];
      index[dim] = 0;
    }
  }
}

// `count` elements of the padding value at `out`.
void Fill(const PadData& d, std::byte* out, int64_t count, size_t element) {
  if (d.zero_fill) {
    std::memset(out, 0, static_cast<size_t>(count) * element);
    return;
  }
  for (int64_t i = 0; i < count; ++i) std::memcpy(out + i * element, d.fill.data(), element);
}

// Output rows [begin, end) of a last-dimension-only pad.
void PadRows(const PadData& d, const std::byte* in, std::byte* out, size_t element, int64_t begin,
             int64_t end) {
  constexpr int kLast = kMaxRank - 1;
  const int64_t in_row = d.in_dims[kLast], out_row = d.out_strides[kLast - 1];
  const int64_t before = d.before[kLast], after = out_row - before - in_row;
  for (int64_t r = begin; r < end; ++r) {
    std::byte* o = out + static_cast<size_t>(r * out_row) * element;
    Fill(d, o, before, element);
    std::memcpy(o + before * element, in + static_cast<size_t>(r * in_row) * element,
                static_cast<size_t>(in_row) * element);
    Fill(d, o + (before + in_row) * element, after, element);
  }
}

Status Eval(Node& node) {
  const PadData& d = *node.data_as<PadData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  const size_t element = DTypeSize(input.dtype);
  const int64_t elements = output.num_elements();
  if (d.last_dim_only) {
    const int64_t rows = input.num_elements() / d.in_dims[kMaxRank - 1];
    const int tasks =
        static_cast<int>(TaskCount(elements >= kMinParallelElements ? rows : 1, NumThreads(node)));
    ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int) {
      const Range r = SplitRange(rows, tasks, static_cast<int>(t));
      if (r.size() > 0) PadRows(d, input.data, output.data, element, r.begin, r.end);
    });
    return Status::Ok();
  }
  // Fill, then copy the rows: both in contiguous ranges across the threads.
  ParallelRanges(node, elements, kMinParallelElements, [&](int64_t begin, int64_t end) {
    if (d.zero_fill) {
      std::memset(output.data + begin * element, 0, (end - begin) * element);
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(output.data + i * element, d.fill.data(), element);
    }
  });
  if (input.num_elements() == 0) return Status::Ok();
  const int64_t rows = input.num_elements() / d.in_dims[kMaxRank - 1];
  const int64_t row_elements = d.in_dims[kMaxRank - 1];
  const int threads = NumThreads(node);
  if (threads <= 1 || input.num_elements() < kMinParallelElements) {
    CopyRows(d, input.data, output.data, element, 0, rows);
    return Status::Ok();
  }
  const int tasks =
      static_cast<int>(TaskCount(std::max<int64_t>(1, rows * row_elements / 4096), threads));
  ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int) {
    const Range r = SplitRange(rows, tasks, static_cast<int>(t));
    if (r.size() > 0) CopyRows(d, input.data, output.data, element, r.begin, r.end);
  });
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterPad() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

const OpRegistration* RegisterPadV2() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
