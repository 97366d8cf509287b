// TILE (any dtype): output dim d is input dim d repeated multiples[d] times
// (input 1, int32/int64, before Invoke()). Viewed as a gather over
// [m0, d0, m1, d1, ...] with stride 0 on each repeat dim.
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
  const int rank = input->rank();
  if (2 * rank > kMaxStridedRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) + " are not supported");
  }
  std::vector<int64_t> multiples;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "multiples", &multiples));
  if (static_cast<int>(multiples.size()) != rank) {
    return Status::Error("multiples holds " + std::to_string(multiples.size()) +
                         " values for rank " + std::to_string(rank));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(input->shape);
  auto data = std::make_unique<StridedData>();
  data->view.rank = 2 * rank;
  std::vector<int32_t> computed(rank);
  for (int d = 0; d < rank; ++d) {
    if (multiples[d] < 0 || multiples[d] > (1 << 24)) {
      return Status::Error("multiple " + std::to_string(multiples[d]) + " of dimension " +
                           std::to_string(d) + " is out of range");
    }
    computed[d] = static_cast<int32_t>(input->shape[d] * multiples[d]);
    data->view.dims[2 * d] = multiples[d];
    data->view.strides[2 * d] = 0;
    data->view.dims[2 * d + 1] = input->shape[d];
    data->view.strides[2 * d + 1] = in_strides[d];
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  node.data = std::move(data);
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterTile() {
  static const OpRegistration registration = {&Prepare, &EvalStrided};
  return &registration;
}

}  // namespace dfarm::runtime
