// DEPTH_TO_SPACE and SPACE_TO_DEPTH, any dtype, NHWC, block size b:
//   depth_to_space: out[n, y, x, c] = in[n, y / b, x / b, ((y % b) * b + x % b) * C_out + c]
//   space_to_depth is its inverse.
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

struct BlockData : OpData {
  int block = 1;
};

template <bool kToSpace>
Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
  int block = 0;
  if (kToSpace) {
    const auto* options = node.options<tflite::DepthToSpaceOptions>();
    if (options == nullptr) return Status::Error("DepthToSpaceOptions are missing");
    block = options->block_size();
  } else {
    const auto* options = node.options<tflite::SpaceToDepthOptions>();
    if (options == nullptr) return Status::Error("SpaceToDepthOptions are missing");
    block = options->block_size();
  }
  if (block <= 0) return Status::Error("block_size must be positive, got " + std::to_string(block));
  if (input->rank() != 4) {
    return Status::Error("input must be 4-D, got " + ShapeToString(input->shape));
  }
  const int32_t n = input->shape[0], h = input->shape[1], w = input->shape[2];
  const int32_t c = input->shape[3];
  std::vector<int32_t> computed;
  if (kToSpace) {
    if (c % (block * block) != 0) {
      return Status::Error("input depth " + std::to_string(c) + " is not a multiple of " +
                           std::to_string(block * block));
    }
    computed = {n, h * block, w * block, c / (block * block)};
  } else {
    if (h % block != 0 || w % block != 0) {
      return Status::Error("input " + ShapeToString(input->shape) +
                           " is not divisible into blocks of " + std::to_string(block));
    }
    computed = {n, h / block, w / block, c * block * block};
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  auto data = std::make_unique<BlockData>();
  data->block = block;
  node.data = std::move(data);
  return Status::Ok();
}

template <bool kToSpace>
Status Eval(Node& node) {
  const int b = node.data_as<BlockData>()->block;
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  // Iterate over the space-side (large) tensor; its pixel (y, x) maps to the
  // depth-side pixel (y / b, x / b) at channel offset ((y % b) * b + x % b) * C.
  const Tensor& space = kToSpace ? output : input;
  const Tensor& depth = kToSpace ? input : output;
  const size_t es = DTypeSize(input.dtype);
  const int batches = space.shape[0], sh = space.shape[1], sw = space.shape[2];
  const int c = space.shape[3];
  const int dh = depth.shape[1], dw = depth.shape[2], dc = depth.shape[3];
  const size_t run = static_cast<size_t>(c) * es;
  for (int n = 0; n < batches; ++n) {
    for (int y = 0; y < sh; ++y) {
      for (int x = 0; x < sw; ++x) {
        const size_t space_off = ((static_cast<size_t>(n) * sh + y) * sw + x) * c;
        const size_t depth_off = ((static_cast<size_t>(n) * dh + y / b) * dw + x / b) * dc +
                                 static_cast<size_t>((y % b) * b + x % b) * c;
        if (kToSpace) {
          std::memcpy(output.data + space_off * es, input.data + depth_off * es, run);
        } else {
          std::memcpy(output.data + depth_off * es, input.data + space_off * es, run);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterDepthToSpace() {
  static const OpRegistration registration = {&Prepare<true>, &Eval<true>};
  return &registration;
}

const OpRegistration* RegisterSpaceToDepth() {
  static const OpRegistration registration = {&Prepare<false>, &Eval<false>};
  return &registration;
}

}  // namespace dfarm::runtime
