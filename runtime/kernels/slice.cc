// SLICE and STRIDED_SLICE, any dtype; begin/size (or begin/end/strides) are
// int32/int64 inputs holding their values before Invoke().
//   SLICE: out dim d = size[d] (-1: to the end) from begin[d].
//   STRIDED_SLICE, per dim as TFLite: start = begin (begin_mask: the first
//   element in the stride's direction), negative counts from the end, clamped
//   to [0, dim] (stride > 0) or [-1, dim - 1] (stride < 0); stop likewise from
//   end / end_mask, or begin + end with `offset`; a shrink_axis dim takes one
//   element and is dropped from the output. ellipsis_mask and new_axis_mask
//   are unsupported.
#include <algorithm>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

Status PrepareSlice(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 3, 3, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
  const int rank = input->rank();
  if (rank > kMaxStridedRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) + " are not supported");
  }
  std::vector<int64_t> begin, size;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "begin", &begin));
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[2], "size", &size));
  if (static_cast<int>(begin.size()) != rank || static_cast<int>(size.size()) != rank) {
    return Status::Error("begin and size must hold " + std::to_string(rank) + " values");
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(input->shape);
  auto data = std::make_unique<StridedData>();
  data->view.rank = rank;
  std::vector<int32_t> computed(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = input->shape[d];
    const int64_t len = size[d] == -1 ? dim - begin[d] : size[d];
    if (begin[d] < 0 || len < 0 || begin[d] + len > dim) {
      return Status::Error("slice begin " + std::to_string(begin[d]) + " size " +
                           std::to_string(size[d]) + " does not fit dimension " +
                           std::to_string(d) + " of size " + std::to_string(dim));
    }
    computed[d] = static_cast<int32_t>(len);
    data->view.dims[d] = len;
    data->view.strides[d] = in_strides[d];
    data->view.offset += begin[d] * in_strides[d];
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  node.data = std::move(data);
  return Status::Ok();
}

Status PrepareStridedSlice(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 4, 4, 1));
  const auto* options = node.options<tflite::StridedSliceOptions>();
  if (options == nullptr) return Status::Error("StridedSliceOptions are missing");
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
  if (options->ellipsis_mask() != 0 || options->new_axis_mask() != 0) {
    return Status::Unsupported("ellipsis_mask and new_axis_mask are not supported");
  }
  const int rank = input->rank();
  if (rank > kMaxStridedRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) + " are not supported");
  }
  std::vector<int64_t> begin, end, strides;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "begin", &begin));
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[2], "end", &end));
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[3], "strides", &strides));
  if (static_cast<int>(begin.size()) != rank || static_cast<int>(end.size()) != rank ||
      static_cast<int>(strides.size()) != rank) {
    return Status::Error("begin, end and strides must hold " + std::to_string(rank) + " values");
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(input->shape);
  auto data = std::make_unique<StridedData>();
  std::vector<int32_t> computed;
  int v = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = input->shape[d], step = strides[d];
    if (step == 0) return Status::Error("stride of dimension " + std::to_string(d) + " is 0");
    auto clamp = [&](int64_t i) {
      return step > 0 ? std::clamp<int64_t>(i, 0, dim) : std::clamp<int64_t>(i, -1, dim - 1);
    };
    const bool shrink = (options->shrink_axis_mask() >> d) & 1;
    int64_t start = begin[d];
    if ((options->begin_mask() >> d) & 1 && !shrink) {
      start = step > 0 ? 0 : dim - 1;
    } else {
      if (start < 0) start += dim;
      if (shrink && (start < 0 || start >= dim)) {
        return Status::Error("shrunk index " + std::to_string(begin[d]) +
                             " is out of range for dimension " + std::to_string(d));
      }
      start = clamp(start);
    }
    int64_t stop;
    if (shrink) {
      stop = start + 1;
    } else if ((options->end_mask() >> d) & 1) {
      stop = step > 0 ? dim : -1;
    } else if (options->offset()) {
      stop = clamp(start + end[d]);
    } else {
      stop = end[d] < 0 ? end[d] + dim : end[d];
      stop = clamp(stop);
    }
    const int64_t len = step > 0 ? std::max<int64_t>(0, (stop - start + step - 1) / step)
                                 : std::max<int64_t>(0, (start - stop + (-step) - 1) / (-step));
    data->view.offset += std::max<int64_t>(0, std::min(start, dim - 1)) * in_strides[d];
    if (shrink) continue;
    computed.push_back(static_cast<int32_t>(len));
    data->view.dims[v] = len;
    data->view.strides[v] = step * in_strides[d];
    ++v;
  }
  data->view.rank = v;
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  node.data = std::move(data);
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterSlice() {
  static const OpRegistration registration = {&PrepareSlice, &EvalStrided};
  return &registration;
}

const OpRegistration* RegisterStridedSlice() {
  static const OpRegistration registration = {&PrepareStridedSlice, &EvalStrided};
  return &registration;
}

}  // namespace dfarm::runtime
