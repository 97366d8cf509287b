#include "runtime/tensor.h"

namespace dfarm::runtime {

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int32_t d : shape) n *= d;
  return n;
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
