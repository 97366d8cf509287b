// MIRROR_PAD, any dtype: paddings [rank,2] (int32/int64, before Invoke());
// REFLECT mirrors without repeating the border (pads < dim), SYMMETRIC
// repeats it (pads <= dim). Output index o of a dim maps to input index
// i = o - before, mirrored: REFLECT -i / 2n-2-i, SYMMETRIC -i-1 / 2n-1-i.
#include <array>
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct MirrorPadData : OpData {
  int rank = 0;
  // Per output dim, the input element offset of each output index.
  std::array<std::vector<int64_t>, kMaxRank> offsets;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const auto* options = node.options<tflite::MirrorPadOptions>();
  if (options == nullptr) return Status::Error("MirrorPadOptions are missing");
  const Tensor* input = node.inputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", node.outputs[0], "output"));
  const int rank = input->rank();
  if (rank > kMaxRank || rank == 0) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) + " are not supported");
  }
  std::vector<int64_t> pads;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "paddings", &pads));
  if (static_cast<int>(pads.size()) != 2 * rank) {
    return Status::Error("paddings must be [" + std::to_string(rank) + ",2]");
  }
  const bool reflect = options->mode() == tflite::MirrorPadMode::REFLECT;
  const std::vector<int64_t> strides = RowMajorStrides(input->shape);
  auto data = std::make_unique<MirrorPadData>();
  data->rank = rank;
  std::vector<int32_t> computed(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t n = input->shape[d], before = pads[2 * d], after = pads[2 * d + 1];
    const int64_t limit = reflect ? n - 1 : n;
    if (before < 0 || after < 0 || before > limit || after > limit) {
      return Status::Error("paddings " + std::to_string(before) + "," + std::to_string(after) +
                           " of dimension " + std::to_string(d) + " exceed " +
                           std::to_string(limit) + " for mode " +
                           (reflect ? "REFLECT" : "SYMMETRIC"));
    }
    computed[d] = static_cast<int32_t>(n + before + after);
    for (int64_t o = 0; o < computed[d]; ++o) {
      int64_t i = o - before;
      if (i < 0) i = reflect ? -i : -i - 1;
      if (i >= n) i = reflect ? 2 * n - 2 - i : 2 * n - 1 - i;
      data->offsets[d].push_back(i * strides[d]);
    }
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], computed));
  node.data = std::move(data);
  return Status::Ok();
}

Status Eval(Node& node) {
  const MirrorPadData& d = *node.data_as<MirrorPadData>();
  const size_t es = DTypeSize(node.inputs[0]->dtype);
  const std::byte* in = node.inputs[0]->data;
  std::byte* out = node.outputs[0]->data;
  const int64_t total = node.outputs[0]->num_elements();
  std::array<size_t, kMaxRank> index{};
  for (int64_t e = 0; e < total; ++e) {
    int64_t offset = 0;
    for (int i = 0; i < d.rank; ++i) offset += d.offsets[i][index[i]];
    std::memcpy(out + e * es, in + offset * es, es);
    for (int i = d.rank - 1; i >= 0; --i) {
      if (++index[i] < d.offsets[i].size()) break;
      index[i] = 0;
    }
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterMirrorPad() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
