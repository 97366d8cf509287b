#include "agent/runner/accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "runtime/fp16.h"

namespace dfarm::runner {
namespace {

template <typename T>
void Append(const runtime::Tensor& t, std::vector<double>& out) {
  const int64_t n = t.num_elements();
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.data + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<double>(v));
  }
}

// snr_db and psnr_db from the sums over the compared elements; unset where
// the ratio is not a finite positive number (see OutputAccuracy).
void SetDecibels(OutputAccuracy& a, double error_sum_sq) {
  a.snr_db.reset();
  a.psnr_db.reset();
  if (a.compared <= 0 || !(error_sum_sq > 0)) return;
  if (a.reference_sum_sq > 0) {
    const double snr = 10.0 * std::log10(a.reference_sum_sq / error_sum_sq);
    if (std::isfinite(snr)) a.snr_db = snr;
  }
  const double peak = a.reference_max - a.reference_min;
  const double rmse = std::sqrt(error_sum_sq / static_cast<double>(a.compared));
  if (peak > 0 && rmse > 0) {
    const double psnr = 20.0 * std::log10(peak / rmse);
    if (std::isfinite(psnr)) a.psnr_db = psnr;
  }
}

}  // namespace

std::vector<size_t> Ranking(const std::vector<double>& values, size_t k) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto key = [&](size_t i) { return std::isnan(values[i]) ? -INFINITY : values[i]; };
  k = std::min(k, order.size());
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
      [&](size_t a, size_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
  order.resize(k);
  return order;
}

std::vector<double> TensorValues(const runtime::Tensor& t) {
  std::vector<double> v;
  if (t.data == nullptr) return v;
  switch (t.dtype) {
    case runtime::DType::kFloat32:
      Append<float>(t, v);
      break;
    case runtime::DType::kFloat16: {
      const int64_t n = t.num_elements();
      v.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + i * 2, 2);
        v.push_back(runtime::HalfToFloat(h));
      }
      break;
    }
    case runtime::DType::kInt32:
      Append<int32_t>(t, v);
      break;
    case runtime::DType::kUint8:
      Append<uint8_t>(t, v);
      break;
    case runtime::DType::kInt64:
      Append<int64_t>(t, v);
      break;
    case runtime::DType::kBool:
      Append<uint8_t>(t, v);
      break;
    case runtime::DType::kInt16:
      Append<int16_t>(t, v);
      break;
    case runtime::DType::kInt8:
      Append<int8_t>(t, v);
      break;
  }
  if (t.quantized) {
    for (double& x : v) x = t.scale * (x - static_cast<double>(t.zero_point));
  }
  return v;
}

OutputAccuracy CompareOutput(size_t index, const runtime::Tensor& got,
                             const runtime::Tensor& reference) {
  OutputAccuracy a;
  a.index = static_cast<int64_t>(index);
  a.name = got.name;
  const std::vector<double> g = TensorValues(got);
  const std::vector<double> r = TensorValues(reference);
  const size_t n = std::min(g.size(), r.size());
  double sum = 0, sum_sq = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(g[i])) ++a.nan_count;
    if (std::isinf(g[i])) ++a.inf_count;
    if (std::isnan(r[i])) ++a.reference_nan_count;
    if (std::isinf(r[i])) ++a.reference_inf_count;
    if (!std::isfinite(g[i]) || !std::isfinite(r[i])) continue;
    const double e = std::fabs(g[i] - r[i]);
    a.reference_sum_sq += r[i] * r[i];
    a.reference_min = a.compared == 0 ? r[i] : std::min(a.reference_min, r[i]);
    a.reference_max = a.compared == 0 ? r[i] : std::max(a.reference_max, r[i]);
    ++a.compared;
    sum += e;
    sum_sq += e * e;
    a.max_abs_error = std::max(a.max_abs_error, e);
  }
  if (a.compared > 0) {
    const double c = static_cast<double>(a.compared);
    a.mean_abs_error = sum / c;
    a.rmse = std::sqrt(sum_sq / c);
    double var = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(g[i]) || !std::isfinite(r[i])) continue;
      const double d = std::fabs(g[i] - r[i]) - a.mean_abs_error;
      var += d * d;
    }
    a.std_abs_error = std::sqrt(var / c);
  }
  SetDecibels(a, sum_sq);
  const bool lsb = (got.dtype == runtime::DType::kInt8 || got.dtype == runtime::DType::kUint8) &&
                   got.dtype == reference.dtype && got.quantized && reference.quantized &&
                   !got.per_channel_quantized && got.scale > 0.0f && got.scale == reference.scale &&
                   got.zero_point == reference.zero_point;
  if (lsb) {
    // Quantized values are (real / scale) + zero_point; the errors are multiples of scale.
    a.max_abs_error_lsb = Number(static_cast<int64_t>(std::llround(a.max_abs_error / got.scale)));
  }
  if (got.rank() == 2 && got.shape[0] == 1 && got.shape[1] >= 2 && g.size() == r.size()) {
    const std::vector<size_t> top_got = Ranking(g, 5);
    const size_t top_ref = Ranking(r, 1).front();
    a.top1_agree = top_got.front() == top_ref;
    a.top5_agree = std::find(top_got.begin(), top_got.end(), top_ref) != top_got.end();
  }
  return a;
}

OutputAccuracy AggregateOutputAccuracy(const std::vector<OutputAccuracy>& per_set) {
  OutputAccuracy a;
  if (per_set.empty()) return a;
  a.index = per_set.front().index;
  a.name = per_set.front().name;
  double sum = 0, sum_sq = 0;  // of |error| and error^2 over every compared element
  bool lsb = true;
  int64_t lsb_max = 0;
  int64_t top1 = 0, top5 = 0, ranked = 0;
  for (const OutputAccuracy& s : per_set) {
    a.compared += s.compared;
    a.nan_count += s.nan_count;
    a.inf_count += s.inf_count;
    a.reference_nan_count += s.reference_nan_count;
    a.reference_inf_count += s.reference_inf_count;
    if (s.compared > 0) {
      const double c = static_cast<double>(s.compared);
      sum += s.mean_abs_error * c;
      sum_sq += s.rmse * s.rmse * c;
      a.max_abs_error = std::max(a.max_abs_error, s.max_abs_error);
      a.reference_sum_sq += s.reference_sum_sq;
      const bool first = a.compared == s.compared;  // the first set with compared elements
      a.reference_min = first ? s.reference_min : std::min(a.reference_min, s.reference_min);
      a.reference_max = first ? s.reference_max : std::max(a.reference_max, s.reference_max);
    }
    if (s.max_abs_error_lsb) {
      lsb_max = std::max<int64_t>(lsb_max, std::llround(ToDouble(*s.max_abs_error_lsb)));
    } else {
      lsb = false;
    }
    if (s.top1_agree && s.top5_agree) {
      ++ranked;
      top1 += *s.top1_agree ? 1 : 0;
      top5 += *s.top5_agree ? 1 : 0;
    }
  }
  if (a.compared > 0) {
    const double c = static_cast<double>(a.compared);
    a.mean_abs_error = sum / c;
    a.rmse = std::sqrt(sum_sq / c);
    // E[e^2] - E[e]^2 over all elements: rmse^2 is the mean of e^2.
    a.std_abs_error = std::sqrt(std::max(0.0, sum_sq / c - a.mean_abs_error * a.mean_abs_error));
    SetDecibels(a, sum_sq);
  } else {  // nothing compared anywhere: the figures of one set say so
    a.mean_abs_error = per_set.front().mean_abs_error;
    a.std_abs_error = per_set.front().std_abs_error;
    a.max_abs_error = per_set.front().max_abs_error;
    a.rmse = per_set.front().rmse;
  }
  if (lsb) a.max_abs_error_lsb = Number(lsb_max);
  if (ranked == static_cast<int64_t>(per_set.size())) {
    a.top1_agree = top1 == ranked;
    a.top5_agree = top5 == ranked;
    a.top1_agreement = static_cast<double>(top1) / static_cast<double>(ranked);
    a.top5_agreement = static_cast<double>(top5) / static_cast<double>(ranked);
  }
  return a;
}

}  // namespace dfarm::runner
