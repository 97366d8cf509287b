// SLICE and STRIDED_SLICE, any dtype (float32, int8, uint8, int32, ...: the
// bytes are copied, quantization parameters are not checked, as in TFLite);
// begin/size (or begin/end/strides) are int32/int64 inputs holding their
// values before Invoke().
//   SLICE: out dim d = size[d] (-1: to the end) from begin[d].
//   STRIDED_SLICE, per dim as TFLite: start = begin (begin_mask: the first
//   element in the stride's direction), negative counts from the end, clamped
//   to [0, dim] (stride > 0) or [-1, dim - 1] (stride < 0); stop likewise from
//   end / end_mask (with `offset`: start + end); a shrink_axis dim takes one
//   element and is dropped from the output. The spec is first made dense as
//   TFLite does: a new_axis_mask entry inserts a dim of 1 (ignored where the
//   ellipsis bit is also set), the one ellipsis_mask entry stands for every
//   input dim the other entries leave over (full range), and dims past the
//   spec are taken whole. Unlike TFLite, an ellipsis may stand for no dim.
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

// One dimension of the dense slice spec: the ellipsis and trailing dims
// expanded, new axes inserted (TFLite's BuildStridedSliceParams).
struct DenseDim {
  int64_t size = 1;       // the input dim, or 1 for a new axis
  int64_t in_stride = 0;  // 0 for a new axis
  int64_t begin = 0, end = 0, step = 1;
  bool begin_mask = false, end_mask = false, shrink = false;
};

Status BuildDenseSpec(const Tensor& input, const tflite::StridedSliceOptions& options,
                      const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
                      const std::vector<int64_t>& strides, std::vector<DenseDim>* dims_out) {
  const int count = static_cast<int>(begin.size());
  const int rank = input.rank();
  auto bit = [](int mask, int k) { return ((static_cast<uint32_t>(mask) >> k) & 1u) != 0; };
  int num_new_axes = 0, num_ellipses = 0;
  for (int k = 0; k < count; ++k) {
    if (bit(options.ellipsis_mask(), k)) {
      ++num_ellipses;
    } else if (bit(options.new_axis_mask(), k)) {
      ++num_new_axes;
    }
  }
  if (num_ellipses > 1) return Status::Error("ellipsis_mask has more than one bit set");
  const int dense_rank = rank + num_new_axes;
  if (dense_rank > kMaxStridedRank) {
    return Status::Unsupported("slices of rank " + std::to_string(dense_rank) +
                               " are not supported");
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(input.shape);
  std::vector<DenseDim>& dims = *dims_out;
  dims.clear();
  int in_dim = 0;
  auto add_full = [&]() {
    DenseDim d;
    d.size = input.shape[in_dim];
    d.in_stride = in_strides[in_dim];
    d.begin_mask = d.end_mask = true;
    dims.push_back(d);
    ++in_dim;
  };
  for (int k = 0; k < count; ++k) {
    if (bit(options.ellipsis_mask(), k)) {
      // Covers what the entries after it leave of the dense rank.
      const int covered = dense_rank - static_cast<int>(dims.size()) - (count - k - 1);
      for (int i = 0; i < covered; ++i) {
        if (in_dim >= rank) break;
        add_full();
      }
      continue;
    }
    DenseDim d;
    if (bit(options.new_axis_mask(), k)) {
      d.end = 1;
    } else {
      if (in_dim >= rank) {
        return Status::Error("the slice spec has " + std::to_string(count) +
                             " entries, more than the input's rank " + std::to_string(rank) +
                             " allows");
      }
      d.size = input.shape[in_dim];
      d.in_stride = in_strides[in_dim];
      d.begin = begin[k];
      d.end = end[k];
      d.step = strides[k];
      d.begin_mask = bit(options.begin_mask(), k);
      d.end_mask = bit(options.end_mask(), k);
      d.shrink = bit(options.shrink_axis_mask(), k);
      ++in_dim;
    }
    dims.push_back(d);
  }
  while (in_dim < rank) add_full();
  return Status::Ok();
}

Status PrepareStridedSlice(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 4, 4, 1));
  const auto* options = node.options<tflite::StridedSliceOptions>();
  if (options == nullptr) return Status::Error("StridedSliceOptions are missing");
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
  const int rank = input->rank();
  if (rank > kMaxStridedRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) + " are not supported");
  }
  std::vector<int64_t> begin, end, strides;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "begin", &begin));
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[2], "end", &end));
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[3], "strides", &strides));
  if (end.size() != begin.size() || strides.size() != begin.size()) {
    return Status::Error("begin, end and strides hold " + std::to_string(begin.size()) + ", " +
                         std::to_string(end.size()) + " and " + std::to_string(strides.size()) +
                         " values; they must agree");
  }
  if (begin.size() > 32) {
    return Status::Error("begin holds " + std::to_string(begin.size()) +
                         " values, more than the 32 bits of a mask");
  }
  std::vector<DenseDim> dims;
  DFARM_RETURN_IF_ERROR(BuildDenseSpec(*input, *options, begin, end, strides, &dims));
  auto data = std::make_unique<StridedData>();
  std::vector<int32_t> computed;
  int v = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    const DenseDim& dd = dims[i];
    const int64_t dim = dd.size, step = dd.step;
    if (step == 0) return Status::Error("stride of dimension " + std::to_string(i) + " is 0");
    auto clamp = [&](int64_t x) {
      return step > 0 ? std::clamp<int64_t>(x, 0, dim) : std::clamp<int64_t>(x, -1, dim - 1);
    };
    int64_t start = dd.begin;
    if (dd.begin_mask && !dd.shrink) {
      start = step > 0 ? 0 : dim - 1;
    } else {
      if (start < 0) start += dim;
      if (dd.shrink && (start < 0 || start >= dim)) {
        return Status::Error("shrunk index " + std::to_string(dd.begin) +
                             " is out of range for dimension " + std::to_string(i));
      }
      start = clamp(start);
    }
    int64_t stop;
    if (dd.shrink) {
      stop = start + 1;
    } else if (dd.end_mask) {
      stop = step > 0 ? dim : -1;
    } else {
      stop = options->offset() ? start + dd.end : dd.end;
      if (stop < 0) stop += dim;
      stop = clamp(stop);
    }
    const int64_t len = step > 0 ? std::max<int64_t>(0, (stop - start + step - 1) / step)
                                 : std::max<int64_t>(0, (start - stop + (-step) - 1) / (-step));
    data->view.offset += std::max<int64_t>(0, std::min(start, dim - 1)) * dd.in_stride;
    if (dd.shrink) continue;
    computed.push_back(static_cast<int32_t>(len));
    data->view.dims[v] = len;
    data->view.strides[v] = step * dd.in_stride;
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
