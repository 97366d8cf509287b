#include "runtime/tensor.h"

#include <algorithm>

namespace dfarm::runtime {

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int32_t d : shape) n *= d;
  return n;
}

bool DeclaredShapeAdmits(const Tensor& tensor, std::span<const int32_t> computed) {
  if (std::equal(tensor.shape.begin(), tensor.shape.end(), computed.begin(), computed.end())) {
    return true;
  }
  if (tensor.shape_signature.empty()) return tensor.shape.empty();
  if (tensor.shape_signature.size() != computed.size()) return false;
  for (size_t i = 0; i < computed.size(); ++i) {
    const int32_t declared = tensor.shape_signature[i];
    if (declared != -1 && declared != computed[i]) return false;
  }
  return true;
}

bool DeclaredShapeIsOpen(const Tensor& tensor) {
  return tensor.shape.empty() ||
         std::find(tensor.shape_signature.begin(), tensor.shape_signature.end(), -1) !=
             tensor.shape_signature.end();
}

void SetShape(std::span<const int32_t> shape, Tensor* tensor) {
  tensor->shape.assign(shape.begin(), shape.end());
  tensor->bytes = static_cast<size_t>(tensor->num_elements()) * DTypeSize(tensor->dtype);
}

Status ReadQuantization(const tflite::QuantizationParameters* q, Tensor* tensor) {
  if (q == nullptr || q->scale() == nullptr || q->scale()->size() == 0) return Status::Ok();
  const size_t n = q->scale()->size();
  const size_t num_zero_points = q->zero_point() != nullptr ? q->zero_point()->size() : 0;
  if (num_zero_points != 0 && num_zero_points != n) {
    return Status::Error("quantization has " + std::to_string(n) + " scales but " +
                         std::to_string(num_zero_points) + " zero points");
  }
  tensor->quantized = true;
  tensor->per_channel_quantized = n > 1;
  tensor->scales.assign(q->scale()->begin(), q->scale()->end());
  tensor->zero_points.assign(n, 0);
  for (size_t i = 0; i < num_zero_points; ++i) tensor->zero_points[i] = q->zero_point()->Get(i);
  tensor->scale = tensor->scales[0];
  tensor->zero_point = tensor->zero_points[0];
  tensor->quantized_dimension = q->quantized_dimension();
  if (n > 1) {
    const int dim = tensor->quantized_dimension;
    if (dim < 0 || dim >= tensor->rank()) {
      return Status::Error("quantized_dimension " + std::to_string(dim) +
                           " is out of range for shape " + ShapeToString(tensor->shape));
    }
    if (static_cast<int64_t>(n) != tensor->shape[dim]) {
      return Status::Error("quantization has " + std::to_string(n) +
                           " per-channel scales, but dimension " + std::to_string(dim) +
                           " of shape " + ShapeToString(tensor->shape) + " has size " +
                           std::to_string(tensor->shape[dim]));
    }
  }
  return Status::Ok();
}

std::string ShapeToString(std::span<const int32_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string DescribeTensor(const Tensor& tensor) {
  return std::string(DTypeName(tensor.dtype)) + " " + ShapeToString(tensor.shape);
}

}  // namespace dfarm::runtime
