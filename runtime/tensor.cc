#include "runtime/tensor.h"

namespace dfarm::runtime {

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int32_t d : shape) n *= d;
  return n;
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
