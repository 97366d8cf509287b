// DENSIFY: expands a sparse constant (TFLite's sparse tensor format, any
// dtype) into its dense tensor of the same shape and dtype. Its input is
// constant, so the interpreter folds it (it runs once in AllocateTensors()).
//
// The format: the dense dims d0..dn-1, blocked with block dims dn..dn+k-1
// (block_map[j] names the dense dim block dim n+j splits), are traversed in
// traversal_order; level i of the traversal (dim_metadata[i]) is DENSE
// (dense_size entries: the dim's size, or its block count for a blocked dim)
// or SPARSE_CSR (the entries of parent position p are array_indices[
// array_segments[p] .. array_segments[p+1]]). The values are stored in
// traversal order.
#include <array>
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

constexpr int kMaxLevels = 12;

struct IndexVector {
  tflite::SparseIndexVector type = tflite::SparseIndexVector::NONE;
  const void* vector = nullptr;

  uint32_t size() const {
    switch (type) {
      case tflite::SparseIndexVector::Int32Vector: {
        auto* v = static_cast<const tflite::Int32Vector*>(vector)->values();
        return v != nullptr ? v->size() : 0;
      }
      case tflite::SparseIndexVector::Uint16Vector: {
        auto* v = static_cast<const tflite::Uint16Vector*>(vector)->values();
        return v != nullptr ? v->size() : 0;
      }
      case tflite::SparseIndexVector::Uint8Vector: {
        auto* v = static_cast<const tflite::Uint8Vector*>(vector)->values();
        return v != nullptr ? v->size() : 0;
      }
      default:
        return 0;
    }
  }
  // Precondition: i < size().
  int64_t operator[](uint32_t i) const {
    switch (type) {
      case tflite::SparseIndexVector::Int32Vector:
        return static_cast<const tflite::Int32Vector*>(vector)->values()->Get(i);
      case tflite::SparseIndexVector::Uint16Vector:
        return static_cast<const tflite::Uint16Vector*>(vector)->values()->Get(i);
      case tflite::SparseIndexVector::Uint8Vector:
        return static_cast<const tflite::Uint8Vector*>(vector)->values()->Get(i);
      default:
        return 0;
    }
  }
};

struct Level {
  bool sparse = false;
  int64_t dense_size = 0;
  IndexVector segments, indices;
  int dense_dim = 0;       // the dense dim this level indexes (of blocks, or inside a block)
  int64_t multiplier = 1;  // coordinate contribution: block size for a blocked dim's outer level
};

struct DensifyData : OpData {
  int num_levels = 0;
  std::array<Level, kMaxLevels> levels{};
  std::array<int64_t, kMaxLevels> dense_strides{};  // element strides of the dense tensor
  int rank = 0;
  size_t element_size = 0;
  int64_t num_values = 0;
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, input->shape));
  const tflite::SparsityParameters* sp = input->sparsity;
  if (sp == nullptr) return Status::Error("input is not sparse");
  if (!input->has_static_value()) {
    return Status::Unsupported("a sparse input computed at run time is not supported");
  }
  const int n = input->rank();
  const auto* order = sp->traversal_order();
  const auto* block_map = sp->block_map();
  const auto* metadata = sp->dim_metadata();
  const int k = block_map != nullptr ? static_cast<int>(block_map->size()) : 0;
  const int levels = n + k;
  if (order == nullptr || metadata == nullptr || static_cast<int>(order->size()) != levels ||
      static_cast<int>(metadata->size()) != levels || levels > kMaxLevels || n > kMaxLevels) {
    return Status::Error("sparsity of a rank-" + std::to_string(n) + " tensor with " +
                         std::to_string(k) + " block dims needs " + std::to_string(levels) +
                         " traversal_order and dim_metadata entries (at most " +
                         std::to_string(kMaxLevels) + ")");
  }
  auto data = std::make_unique<DensifyData>();
  data->num_levels = levels;
  data->rank = n;
  data->element_size = DTypeSize(input->dtype);
  data->num_values = static_cast<int64_t>(input->bytes / data->element_size);
  // Block sizes per dense dim (1 when not blocked), from the block dims' levels.
  std::array<int64_t, kMaxLevels> block_size;
  block_size.fill(1);
  std::array<bool, kMaxLevels * 2> seen{};
  for (int i = 0; i < levels; ++i) {
    const int dim = order->Get(i);
    if (dim < 0 || dim >= levels || seen[dim]) {
      return Status::Error("traversal_order is not a permutation of 0.." +
                           std::to_string(levels - 1));
    }
    seen[dim] = true;
    const tflite::DimensionMetadata* m = metadata->Get(i);
    if (dim >= n) {
      const int original = block_map->Get(dim - n);
      if (original < 0 || original >= n || m->dense_size() <= 0) {
        return Status::Error("block dim " + std::to_string(dim) + " is invalid");
      }
      block_size[original] = m->dense_size();
    }
  }
  for (int i = 0; i < levels; ++i) {
    const int dim = order->Get(i);
    const tflite::DimensionMetadata* m = metadata->Get(i);
    Level& level = data->levels[i];
    level.sparse = m->format() == tflite::DimensionType::SPARSE_CSR;
    level.dense_size = m->dense_size();
    level.segments = {m->array_segments_type(), m->array_segments()};
    level.indices = {m->array_indices_type(), m->array_indices()};
    if (dim < n) {
      level.dense_dim = dim;
      level.multiplier = block_size[dim];
    } else {
      level.dense_dim = block_map->Get(dim - n);
      level.multiplier = 1;
    }
    if (level.sparse && (level.segments.vector == nullptr || level.indices.vector == nullptr)) {
      return Status::Error("sparse level " + std::to_string(i) + " lacks its segments or indices");
    }
  }
  int64_t stride = 1;
  for (int d = n - 1; d >= 0; --d) {
    data->dense_strides[d] = stride;
    stride *= input->shape[d];
  }
  node.data = std::move(data);
  return Status::Ok();
}

// Walks the levels depth-first; `coords` holds each dense dim's coordinate so far.
struct Walker {
  const DensifyData& d;
  const Tensor& output;
  const std::byte* values;
  std::byte* out;
  int64_t next_value = 0;
  std::array<int64_t, kMaxLevels> coords{};

  Status Visit(int level, int64_t parent) {
    if (level == d.num_levels) {
      int64_t offset = 0;
      for (int i = 0; i < d.rank; ++i) {
        if (coords[i] < 0 || coords[i] >= output.shape[i]) {
          return Status::Error("a sparse index lies outside the shape " +
                               ShapeToString(output.shape));
        }
        offset += coords[i] * d.dense_strides[i];
      }
      if (next_value >= d.num_values) {
        return Status::Error("the sparse structure names more values than the " +
                             std::to_string(d.num_values) + " stored");
      }
      std::memcpy(out + offset * d.element_size, values + next_value * d.element_size,
                  d.element_size);
      ++next_value;
      return Status::Ok();
    }
    const Level& l = d.levels[level];
    int64_t& coord = coords[l.dense_dim];
    const int64_t base = coord;
    if (!l.sparse) {
      for (int64_t i = 0; i < l.dense_size; ++i) {
        coord = base + i * l.multiplier;
        DFARM_RETURN_IF_ERROR(Visit(level + 1, parent * l.dense_size + i));
      }
    } else {
      if (parent < 0 || parent + 1 >= l.segments.size()) {
        return Status::Error("sparse level " + std::to_string(level) + " has too few segments");
      }
      const int64_t begin = l.segments[static_cast<uint32_t>(parent)];
      const int64_t end = l.segments[static_cast<uint32_t>(parent + 1)];
      if (begin < 0 || end < begin || end > l.indices.size()) {
        return Status::Error("sparse level " + std::to_string(level) + " has a bad segment");
      }
      for (int64_t j = begin; j < end; ++j) {
        coord = base + l.indices[static_cast<uint32_t>(j)] * l.multiplier;
        DFARM_RETURN_IF_ERROR(Visit(level + 1, j));
      }
    }
    coord = base;
    return Status::Ok();
  }
};

Status Eval(Node& node) {
  const DensifyData& d = *node.data_as<DensifyData>();
  Tensor& output = *node.outputs[0];
  std::memset(output.data, 0, output.bytes);
  Walker walker{d, output, node.inputs[0]->data, output.data};
  return walker.Visit(0, 0);
}

}  // namespace

const OpRegistration* RegisterDensify() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
