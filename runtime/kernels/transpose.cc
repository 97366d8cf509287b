// TRANSPOSE (any dtype): output dim d is input dim perm[d]; perm (input 1,
// int32/int64, before Invoke()) may count from the end.
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
  if (rank > kMaxStridedRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) + " are not supported");
  }
  std::vector<int64_t> perm;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "perm", &perm));
  if (static_cast<int>(perm.size()) != rank) {
    return Status::Error("perm holds " + std::to_string(perm.size()) + " values for rank " +
                         std::to_string(rank));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(input->shape);
  auto data = std::make_unique<StridedData>();
  data->view.rank = rank;
  std::vector<bool> used(rank, false);
  std::vector<int32_t> computed(rank);
  for (int d = 0; d < rank; ++d) {
    int axis = 0;
    DFARM_RETURN_IF_ERROR(NormalizeAxis(perm[d], rank, "perm value", &axis));
    if (used[axis]) return Status::Error("perm repeats dimension " + std::to_string(axis));
    used[axis] = true;
    computed[d] = input->shape[axis];
    data->view.dims[d] = input->shape[axis];
    data->view.strides[d] = in_strides[axis];
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  node.data = std::move(data);
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterTranspose() {
  static const OpRegistration registration = {&Prepare, &EvalStrided};
  return &registration;
}

}  // namespace dfarm::runtime
