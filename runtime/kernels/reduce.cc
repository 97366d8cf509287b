// MEAN, SUM and REDUCE_MAX, float32, over the axes of input 1 (int32/int64,
// holding its values before Invoke(); negative axes count from the end,
// repeats are ignored), with ReducerOptions.keep_dims. As in TFLite, the sums
// are accumulated in float32 and MEAN divides by the reduced element count.
#include <array>
#include <limits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxRank = 6;

struct ReduceData : OpData {
  // Input dims and the output's element strides (0 on reduced dims),
  // right-aligned into kMaxRank dims.
  std::array<int64_t, kMaxRank> in_dims{};
  std::array<int64_t, kMaxRank> out_strides{};
  int64_t reduced_count = 1;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
  DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  const int rank = input->rank();
  if (rank > kMaxRank) {
    return Status::Unsupported("inputs of rank " + std::to_string(rank) +
                               " are not supported (at most " + std::to_string(kMaxRank) + ")");
  }
  std::vector<int64_t> axes;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "axis", &axes));
  std::array<bool, kMaxRank> reduced{};
  for (int64_t a : axes) {
    int axis = 0;
    DFARM_RETURN_IF_ERROR(NormalizeAxis(a, rank, "axis", &axis));
    reduced[axis] = true;
  }
  const auto* options = node.options<tflite::ReducerOptions>();
  const bool keep_dims = options != nullptr && options->keep_dims();

  auto data = std::make_unique<ReduceData>();
  data->in_dims.fill(1);
  std::vector<int32_t> computed;
  std::array<int64_t, kMaxRank> out_dims;
  out_dims.fill(1);
  for (int i = 0; i < rank; ++i) {
    const int d = kMaxRank - rank + i;
    data->in_dims[d] = input->shape[i];
    if (reduced[i]) {
      data->reduced_count *= input->shape[i];
      if (keep_dims) computed.push_back(1);
    } else {
      out_dims[d] = input->shape[i];
      computed.push_back(input->shape[i]);
    }
  }
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  int64_t stride = 1;
  for (int d = kMaxRank - 1; d >= 0; --d) {
    const int i = d - (kMaxRank - rank);
    data->out_strides[d] = i >= 0 && reduced[i] ? 0 : stride;
    stride *= out_dims[d];
  }
  node.data = std::move(data);
  return Status::Ok();
}

enum class Kind { kSum, kMean, kMax };

template <Kind kKind>
Status Eval(Node& node) {
  const ReduceData& d = *node.data_as<ReduceData>();
  const float* in = node.inputs[0]->data_as<float>();
  float* out = node.outputs[0]->data_as<float>();
  const int64_t out_n = node.outputs[0]->num_elements();
  const float init = kKind == Kind::kMax ? std::numeric_limits<float>::lowest() : 0.0f;
  for (int64_t i = 0; i < out_n; ++i) out[i] = init;

  // Odometer over the outer dims; the last dim is a tight loop.
  constexpr int kLast = kMaxRank - 1;
  const int64_t inner = d.in_dims[kLast];
  const int64_t inner_stride = d.out_strides[kLast];
  const int64_t in_n = node.inputs[0]->num_elements();
  std::array<int64_t, kMaxRank> index{};
  int64_t out_offset = 0;
  for (int64_t o = 0; o < in_n; o += inner) {
    const float* px = in + o;
    float* acc = out + out_offset;
    for (int64_t i = 0; i < inner; ++i) {
      if constexpr (kKind == Kind::kMax) {
        acc[i * inner_stride] = px[i] > acc[i * inner_stride] ? px[i] : acc[i * inner_stride];
      } else {
        acc[i * inner_stride] += px[i];
      }
    }
    for (int dim = kLast - 1; dim >= 0; --dim) {
      out_offset += d.out_strides[dim];
      if (++index[dim] < d.in_dims[dim]) break;
      out_offset -= d.out_strides[dim] * d.in_dims[dim];
      index[dim] = 0;
    }
  }
  if constexpr (kKind == Kind::kMean) {
    const float count = static_cast<float>(d.reduced_count);
    for (int64_t i = 0; i < out_n; ++i) out[i] /= count;
  }
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterMean() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kMean>};
  return &registration;
}

const OpRegistration* RegisterSum() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kSum>};
  return &registration;
}

const OpRegistration* RegisterReduceMax() {
  static const OpRegistration registration = {&Prepare, &Eval<Kind::kMax>};
  return &registration;
}

}  // namespace dfarm::runtime
