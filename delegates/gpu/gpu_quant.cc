#include "delegates/gpu/gpu_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dfarm::delegates::gpu {
namespace {

using runtime::DType;
using runtime::Tensor;

bool PerTensorCodes(const Tensor& t) {
  return (t.dtype == DType::kInt8 || t.dtype == DType::kUint8) && !t.per_channel_quantized;
}

double Code(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kInt8:
      return t.data_as<int8_t>()[i];
    case DType::kUint8:
      return t.data_as<uint8_t>()[i];
    default:
      return t.data_as<int32_t>()[i];
  }
}

}  // namespace

bool IsGpuQuantized(const Tensor& t) {
  if (!t.quantized || !(t.scale > 0.0f) || !std::isfinite(t.scale)) return false;
  if (!t.has_static_value()) return PerTensorCodes(t);
  if (t.dtype != DType::kInt8 && t.dtype != DType::kUint8 && t.dtype != DType::kInt32) {
    return false;
  }
  if (!t.per_channel_quantized) return true;
  const int dim = t.quantized_dimension;
  return dim >= 0 && dim < t.rank() && t.scales.size() == static_cast<size_t>(t.shape[dim]) &&
         t.zero_points.size() == t.scales.size();
}

std::vector<float> RealValues(const Tensor& t) {
  const int64_t n = t.num_elements();
  if (!t.quantized) return std::vector<float>(t.data_as<float>(), t.data_as<float>() + n);
  std::vector<float> real(static_cast<size_t>(n));
  int64_t inner = 1, channels = 1;
  if (t.per_channel_quantized) {
    for (int d = t.quantized_dimension + 1; d < t.rank(); ++d) inner *= t.shape[d];
    channels = t.shape[t.quantized_dimension];
  }
  for (int64_t i = 0; i < n; ++i) {
    const size_t c = t.per_channel_quantized ? static_cast<size_t>((i / inner) % channels) : 0;
    const double scale = t.per_channel_quantized ? t.scales[c] : t.scale;
    const double zp =
        static_cast<double>(t.per_channel_quantized ? t.zero_points[c] : t.zero_point);
    real[static_cast<size_t>(i)] = static_cast<float>(scale * (Code(t, i) - zp));
  }
  return real;
}

void Dequantize(const Tensor& t, float* out) {
  const int64_t n = t.num_elements();
  const float scale = t.scale;
  const int32_t zp = static_cast<int32_t>(t.zero_point);
  if (t.dtype == DType::kInt8) {
    const int8_t* q = t.data_as<int8_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = scale * static_cast<float>(q[i] - zp);
  } else {
    const uint8_t* q = t.data_as<uint8_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = scale * static_cast<float>(q[i] - zp);
  }
}

void Quantize(const float* in, Tensor* t) {
  const int64_t n = t->num_elements();
  const bool s8 = t->dtype == DType::kInt8;
  const float lo = s8 ? -128.0f : 0.0f, hi = s8 ? 127.0f : 255.0f;
  const float zp = static_cast<float>(t->zero_point);
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::round(in[i] / t->scale) + zp;
    const float q = std::isnan(r) ? zp : std::clamp(r, lo, hi);
    if (s8) {
      t->data_as<int8_t>()[i] = static_cast<int8_t>(q);
    } else {
      t->data_as<uint8_t>()[i] = static_cast<uint8_t>(q);
    }
  }
}

}  // namespace dfarm::delegates::gpu
