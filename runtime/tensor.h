// Tensor: one tensor of the interpreter's graph, with its storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/status.h"

namespace dfarm::runtime {

// Where a tensor's data lives.
enum class Allocation {
  kNone,      // not used by the graph; data is null
  kConstant,  // read-only, inside the model's buffer
  kFolded,    // computed once in AllocateTensors() from constants; read-only afterwards
              // (null once no node reads it, InterpreterOptions::free_kept_folded)
  kArena,     // planned in the arena; valid only during its lifetime in Invoke()
};

struct Tensor {
  int index = -1;
  std::string name;
  DType dtype = DType::kFloat32;
  // The declared shape until the op writing the tensor is prepared; then the
  // shape it computes (see DeclaredShapeAdmits).
  std::vector<int32_t> shape;
  // The model's shape_signature: the shape with -1 for each dimension known
  // only once the op writing the tensor is prepared; empty when absent.
  std::vector<int32_t> shape_signature;
  // True when that op replaced a declared [] or -1 shape at Prepare.
  bool shape_set_by_op = false;
  size_t bytes = 0;
  // Owned by the Model (kConstant) or the Interpreter's arena (kFolded, kArena).
  // Constant tensors are never written (the model loader refuses a graph that
  // writes one), which is why the pointer is not const.
  std::byte* data = nullptr;
  Allocation allocation = Allocation::kNone;
  // Affine quantization: real = scale * (q - zero_point). Per-tensor: scale
  // and zero_point. Per-channel (per_channel_quantized, e.g. conv weights):
  // slice c along quantized_dimension has scales[c] and zero_points[c];
  // scale/zero_point then hold entry 0. scales/zero_points are filled for
  // per-tensor quantization too (one entry). Only kernels that say so accept
  // per-channel tensors.
  bool quantized = false;
  bool per_channel_quantized = false;
  float scale = 0.0f;
  int64_t zero_point = 0;
  std::vector<float> scales;
  std::vector<int64_t> zero_points;
  int quantized_dimension = 0;
  // Non-null for a sparse constant (in the Model): data holds the tensor's
  // non-zero values in TFLite's sparse format and bytes their size; only
  // DENSIFY reads such a tensor.
  const tflite::SparsityParameters* sparsity = nullptr;

  // True when the data holds its values before Invoke() (constant or folded).
  bool has_static_value() const {
    return allocation == Allocation::kConstant || allocation == Allocation::kFolded;
  }
  int64_t num_elements() const;
  int rank() const { return static_cast<int>(shape.size()); }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(data);
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data);
  }
};

// Sets the quantization fields of `tensor` (whose shape is set) from the
// model's parameters; `q` may be null or carry no scale (not quantized).
// Error when the zero points do not match the scales in number, the
// quantized dimension is out of range, or the number of per-channel scales is
// not that dimension's size.
Status ReadQuantization(const tflite::QuantizationParameters* q, Tensor* tensor);

// Whether `computed`, the shape the op writing `tensor` computes at Prepare,
// may become its shape, as TensorFlow Lite sizes an op's outputs in Prepare:
// it equals the declared shape; or the declared shape is [] (what converters
// write for outputs only the op can size, e.g. TFLite_Detection_PostProcess);
// or shape_signature has computed's rank and every dimension where they differ
// is -1 in it. A fully known declared shape must match, which keeps a corrupt
// model's wrong shape an error.
bool DeclaredShapeAdmits(const Tensor& tensor, std::span<const int32_t> computed);

// True when the declared shape leaves something to the op: it is [] or
// shape_signature has a -1 (before the op's Prepare).
bool DeclaredShapeIsOpen(const Tensor& tensor);

// Sets `tensor`'s shape and its byte size (shape x dtype size).
void SetShape(std::span<const int32_t> shape, Tensor* tensor);

// "[1,128,128,3]"
std::string ShapeToString(std::span<const int32_t> shape);

// "float32 [1,128,128,3]"
std::string DescribeTensor(const Tensor& tensor);

}  // namespace dfarm::runtime
