// SPLIT (inputs axis, input; num_splits equal parts), SPLIT_V (inputs input,
// size_splits, axis; one size may be -1 for the rest) and UNPACK (input;
// options num and axis; each output drops the axis), any dtype. Each output is
// a strided view of the input; axes and sizes must hold their values before
// Invoke(). PACK stacks its inputs along a new axis.
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct SplitData : OpData {
  std::vector<StridedView> views;  // one per output
};

// Fills `data` with one view per entry of `sizes` along `axis`; drop_axis for
// UNPACK. Checks each output's declared shape.
Status MakeViews(const Node& node, const Tensor& input, int axis, const std::vector<int64_t>& sizes,
                 bool drop_axis, SplitData* data) {
  if (sizes.size() != node.outputs.size()) {
    return Status::Error("the op makes " + std::to_string(sizes.size()) + " outputs, but has " +
                         std::to_string(node.outputs.size()));
  }
  const int rank = input.rank();
  if (rank > kMaxStridedRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) + " are not supported");
  }
  const std::vector<int64_t> strides = RowMajorStrides(input.shape);
  int64_t start = 0;
  for (size_t o = 0; o < sizes.size(); ++o) {
    DFARM_RETURN_IF_ERROR(CheckSameDType(&input, "input", node.outputs[o], "output"));
    StridedView view;
    std::vector<int32_t> computed;
    for (int d = 0; d < rank; ++d) {
      const int64_t len = d == axis ? sizes[o] : input.shape[d];
      if (d == axis && drop_axis) continue;
      view.dims[view.rank] = len;
      view.strides[view.rank] = strides[d];
      ++view.rank;
      computed.push_back(static_cast<int32_t>(len));
    }
    view.offset = start * strides[axis];
    start += sizes[o];
    DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[o], computed));
    data->views.push_back(view);
  }
  if (start != input.shape[axis]) {
    return Status::Error("the sizes add up to " + std::to_string(start) + ", but dimension " +
                         std::to_string(axis) + " has " + std::to_string(input.shape[axis]));
  }
  return Status::Ok();
}

Status PrepareSplit(Node& node) {
  const auto* options = node.options<tflite::SplitOptions>();
  const int n = options != nullptr ? options->num_splits() : 0;
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, static_cast<int>(node.outputs.size())));
  const Tensor& input = *node.inputs[1];
  std::vector<int64_t> axis_value;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[0], "axis", &axis_value));
  if (axis_value.size() != 1) return Status::Error("axis must hold one value");
  int axis = 0;
  DFARM_RETURN_IF_ERROR(NormalizeAxis(axis_value[0], input.rank(), "axis", &axis));
  if (n <= 0 || input.shape[axis] % n != 0) {
    return Status::Error("dimension " + std::to_string(axis) + " of " + ShapeToString(input.shape) +
                         " does not split into " + std::to_string(n) + " equal parts");
  }
  auto data = std::make_unique<SplitData>();
  DFARM_RETURN_IF_ERROR(MakeViews(node, input, axis, std::vector<int64_t>(n, input.shape[axis] / n),
                                  false, data.get()));
  node.data = std::move(data);
  return Status::Ok();
}

Status PrepareSplitV(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 3, 3, static_cast<int>(node.outputs.size())));
  const Tensor& input = *node.inputs[0];
  std::vector<int64_t> sizes, axis_value;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "size_splits", &sizes));
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[2], "axis", &axis_value));
  if (axis_value.size() != 1) return Status::Error("axis must hold one value");
  int axis = 0;
  DFARM_RETURN_IF_ERROR(NormalizeAxis(axis_value[0], input.rank(), "axis", &axis));
  int64_t known = 0;
  int unknown = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && unknown < 0) {
      unknown = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return Status::Error("size_splits value " + std::to_string(sizes[i]) + " is invalid");
    } else {
      known += sizes[i];
    }
  }
  if (unknown >= 0) sizes[unknown] = input.shape[axis] - known;
  auto data = std::make_unique<SplitData>();
  DFARM_RETURN_IF_ERROR(MakeViews(node, input, axis, sizes, false, data.get()));
  node.data = std::move(data);
  return Status::Ok();
}

Status PrepareUnpack(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, static_cast<int>(node.outputs.size())));
  const auto* options = node.options<tflite::UnpackOptions>();
  if (options == nullptr) return Status::Error("UnpackOptions are missing");
  const Tensor& input = *node.inputs[0];
  int axis = 0;
  DFARM_RETURN_IF_ERROR(NormalizeAxis(options->axis(), input.rank(), "axis", &axis));
  if (options->num() != input.shape[axis]) {
    return Status::Error("num is " + std::to_string(options->num()) + ", but dimension " +
                         std::to_string(axis) + " has " + std::to_string(input.shape[axis]));
  }
  auto data = std::make_unique<SplitData>();
  DFARM_RETURN_IF_ERROR(
      MakeViews(node, input, axis, std::vector<int64_t>(options->num(), 1), true, data.get()));
  node.data = std::move(data);
  return Status::Ok();
}

template <int kInput>
Status EvalSplit(Node& node) {
  const SplitData& d = *node.data_as<SplitData>();
  const Tensor& input = *node.inputs[kInput];
  for (size_t o = 0; o < d.views.size(); ++o) {
    StridedCopy(d.views[o], input.data, node.outputs[o]->data, DTypeSize(input.dtype));
  }
  return Status::Ok();
}

struct PackData : OpData {
  int64_t outer = 1;       // product of the dims before the axis
  size_t block_bytes = 0;  // one input's elements from the axis on
};

Status PreparePack(Node& node) {
  const auto* options = node.options<tflite::PackOptions>();
  if (options == nullptr) return Status::Error("PackOptions are missing");
  const int n = static_cast<int>(node.inputs.size());
  DFARM_RETURN_IF_ERROR(CheckArity(node, n, n, 1));
  if (n < 1 || options->values_count() != n) {
    return Status::Error("values_count is " + std::to_string(options->values_count()) +
                         ", but the op has " + std::to_string(n) + " inputs");
  }
  const Tensor& first = *node.inputs[0];
  for (int i = 1; i < n; ++i) {
    DFARM_RETURN_IF_ERROR(CheckSameDType(&first, "input 0", node.inputs[i], "input"));
    if (node.inputs[i]->shape != first.shape) {
      return Status::Error("input " + std::to_string(i) + " " +
                           ShapeToString(node.inputs[i]->shape) + " differs from input 0 " +
                           ShapeToString(first.shape));
    }
  }
  DFARM_RETURN_IF_ERROR(CheckSameDType(&first, "input 0", node.outputs[0], "output"));
  int axis = 0;
  DFARM_RETURN_IF_ERROR(NormalizeAxis(options->axis(), first.rank() + 1, "axis", &axis));
  std::vector<int32_t> computed = first.shape;
  computed.insert(computed.begin() + axis, n);
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], computed));
  auto data = std::make_unique<PackData>();
  int64_t inner = 1;
  for (int d = 0; d < first.rank(); ++d) (d < axis ? data->outer : inner) *= first.shape[d];
  data->block_bytes = static_cast<size_t>(inner) * DTypeSize(first.dtype);
  node.data = std::move(data);
  return Status::Ok();
}

Status EvalPack(Node& node) {
  const PackData& d = *node.data_as<PackData>();
  std::byte* out = node.outputs[0]->data;
  for (int64_t o = 0; o < d.outer; ++o) {
    for (const Tensor* in : node.inputs) {
      std::memcpy(out, in->data + o * d.block_bytes, d.block_bytes);
      out += d.block_bytes;
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterSplit() {
  static const OpRegistration registration = {&PrepareSplit, &EvalSplit<1>};
  return &registration;
}

const OpRegistration* RegisterSplitV() {
  static const OpRegistration registration = {&PrepareSplitV, &EvalSplit<0>};
  return &registration;
}

const OpRegistration* RegisterUnpack() {
  static const OpRegistration registration = {&PrepareUnpack, &EvalSplit<0>};
  return &registration;
}

const OpRegistration* RegisterPack() {
  static const OpRegistration registration = {&PreparePack, &EvalPack};
  return &registration;
}

}  // namespace dfarm::runtime
