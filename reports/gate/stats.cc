#include "reports/gate/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>
#include <utility>

namespace dfarm::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The automatic change-point penalty, in units of the normalized cost
// (squared deviations over the noise variance): (3 + 15 / sqrt(n)) log n. BIC
// would be 2 log n; the noise estimate from n - 1 differences is itself noisy
// for short histories, so the factor grows there. Measured on flat Gaussian
// histories with 3% noise (1000 each): 1.3% have a false change point at
// n = 30, 0.3% at 60, 0.4% at 200, none at 500 (stats_test.cc asserts <= 2%).
double AutoPenalty(size_t n) {
  const double count = static_cast<double>(n);
  return (3 + 15 / std::sqrt(count)) * std::log(count);
}

// A point this many noise sds from the running median is an outlier.
constexpr double kOutlierSigmas = 3.0;

// Ranks of the pooled values (1-based, ties get the average of their ranks)
// and the tie term sum(t^3 - t) over the groups of tied values.
struct PooledRanks {
  std::vector<double> ranks;  // in the order of the pooled vector
  double tie_term = 0;
};

PooledRanks RankPooled(const std::vector<double>& pooled) {
  std::vector<size_t> order(pooled.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return pooled[x] < pooled[y]; });
  PooledRanks out;
  out.ranks.assign(pooled.size(), 0);
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j + 1 < order.size() && pooled[order[j + 1]] == pooled[order[i]]) ++j;
    const double average = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2;
    for (size_t k = i; k <= j; ++k) out.ranks[order[k]] = average;
    const double t = static_cast<double>(j - i + 1);
    out.tie_term += t * t * t - t;
    i = j + 1;
  }
  return out;
}

// P(U <= u) under the null hypothesis for sizes m and n without ties: counts
// of the arrangements with each U value, f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u).
double ExactLowerTail(size_t m, size_t n, double u) {
  const size_t max_u = m * n;
  // counts[i][j] is the distribution for sizes (i, j); built row by row.
  std::vector<std::vector<std::vector<double>>> counts(m + 1,
                                                       std::vector<std::vector<double>>(n + 1));
  for (size_t i = 0; i <= m; ++i) {
    for (size_t j = 0; j <= n; ++j) {
      std::vector<double>& f = counts[i][j];
      f.assign(i * j + 1, 0);
      if (i == 0 || j == 0) {
        f[0] = 1;
        continue;
      }
      // The largest pooled value is from a (beats all j of b) or from b.
      const std::vector<double>& from_a = counts[i - 1][j];
      const std::vector<double>& from_b = counts[i][j - 1];
      for (size_t v = 0; v < from_a.size(); ++v) f[v + j] += from_a[v];
      for (size_t v = 0; v < from_b.size(); ++v) f[v] += from_b[v];
    }
  }
  const std::vector<double>& f = counts[m][n];
  double total = 0;
  double below = 0;
  for (size_t v = 0; v <= max_u; ++v) {
    total += f[v];
    if (static_cast<double>(v) <= u + 1e-9) below += f[v];
  }
  return below / total;
}

double NormalTwoSided(double z) { return std::erfc(std::fabs(z) / std::sqrt(2.0)); }

// A uniform index in [0, n) from the generator, the same on every platform
// (std::uniform_int_distribution is not specified bit for bit).
size_t DrawIndex(std::mt19937_64& rng, size_t n) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % static_cast<uint64_t>(n);
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return static_cast<size_t>(x % static_cast<uint64_t>(n));
}

double ResampledMedian(const std::vector<double>& values, std::mt19937_64& rng,
                       std::vector<double>& scratch) {
  scratch.resize(values.size());
  for (double& v : scratch) v = values[DrawIndex(rng, values.size())];
  return Median(std::move(scratch));
}

// The q-quantile of sorted values, linear between order statistics.
double SortedQuantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// The noise sd of a series with steps: MAD of the first differences (a step
// moves one difference only) scaled to a normal sd. Falls back to the mean
// absolute difference when more than half the differences are 0 (quantized
// series); 0 for a constant series.
double RobustNoiseSigma(const std::vector<double>& x) {
  if (x.size() < 3) return 0;
  std::vector<double> diffs(x.size() - 1);
  for (size_t i = 1; i < x.size(); ++i) diffs[i - 1] = x[i] - x[i - 1];
  const double center = Median(diffs);
  std::vector<double> deviations(diffs.size());
  double mean_abs = 0;
  for (size_t i = 0; i < diffs.size(); ++i) {
    deviations[i] = std::fabs(diffs[i] - center);
    mean_abs += deviations[i];
  }
  mean_abs /= static_cast<double>(deviations.size());
  const double mad = Median(std::move(deviations));
  if (mad > 0) return mad * 1.4826 / std::sqrt(2.0);
  // E|d| = sigma * sqrt(2) * sqrt(2 / pi) for d, the difference of two normals.
  return mean_abs * std::sqrt(std::numbers::pi) / 2;
}

// A centered running median of half-width k (shrinking at the ends); a median
// filter keeps steps sharp and ignores isolated outliers.
std::vector<double> RunningMedian(const std::vector<double>& x, size_t k) {
  std::vector<double> out(x.size());
  std::vector<double> window;
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t lo = i >= k ? i - k : 0;
    const size_t hi = std::min(x.size(), i + k + 1);
    window.assign(x.begin() + static_cast<std::ptrdiff_t>(lo),
                  x.begin() + static_cast<std::ptrdiff_t>(hi));
    out[i] = Median(std::move(window));
  }
  return out;
}

// Optimal partitioning with pruning (PELT, Killick et al. 2012) of the
// normalized Gaussian mean-shift cost: returns the segment starts after 0.
std::vector<size_t> Pelt(const std::vector<double>& x, double sigma, double penalty,
                         size_t min_segment) {
  const size_t n = x.size();
  std::vector<double> s1(n + 1, 0), s2(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    s1[i + 1] = s1[i] + x[i];
    s2[i + 1] = s2[i] + x[i] * x[i];
  }
  const double inv_var = 1 / (sigma * sigma);
  auto cost = [&](size_t s, size_t t) {
    const double sum = s1[t] - s1[s];
    const double sq = s2[t] - s2[s];
    return std::max(0.0, sq - sum * sum / static_cast<double>(t - s)) * inv_var;
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(n + 1, inf);
  std::vector<size_t> last(n + 1, 0);
  best[0] = -penalty;
  std::vector<size_t> candidates;
  for (size_t t = min_segment; t <= n; ++t) {
    // A segment may start at s only when s is 0 or itself ends a valid prefix.
    const size_t fresh = t - min_segment;
    if (std::isfinite(best[fresh])) candidates.push_back(fresh);
    std::vector<double> totals(candidates.size());
    for (size_t c = 0; c < candidates.size(); ++c) {
      totals[c] = best[candidates[c]] + cost(candidates[c], t) + penalty;
      if (totals[c] < best[t]) {
        best[t] = totals[c];
        last[t] = candidates[c];
      }
    }
    std::vector<size_t> kept;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (totals[c] - penalty <= best[t]) kept.push_back(candidates[c]);
    }
    candidates.swap(kept);
  }
  std::vector<size_t> starts;
  for (size_t t = n; t > 0 && std::isfinite(best[t]);) {
    const size_t s = last[t];
    if (s > 0) starts.push_back(s);
    t = s;
  }
  std::reverse(starts.begin(), starts.end());
  return starts;
}

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return kNaN;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

RankTest MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b) {
  RankTest out;
  if (a.empty() || b.empty()) return out;
  std::vector<double> pooled(a);
  pooled.insert(pooled.end(), b.begin(), b.end());
  const PooledRanks ranked = RankPooled(pooled);
  const double m = static_cast<double>(a.size());
  const double n = static_cast<double>(b.size());
  double rank_sum_a = 0;
  for (size_t i = 0; i < a.size(); ++i) rank_sum_a += ranked.ranks[i];
  out.u = rank_sum_a - m * (m + 1) / 2;
  const double mean = m * n / 2;
  if (a.size() <= 10 && b.size() <= 10 && ranked.tie_term == 0) {
    // Exact: the distribution is symmetric about m n / 2.
    const double lower = ExactLowerTail(a.size(), b.size(), std::min(out.u, m * n - out.u));
    out.p_value = std::min(1.0, 2 * lower);
    return out;
  }
  const double total = m + n;
  const double variance = m * n / 12 * ((total + 1) - ranked.tie_term / (total * (total - 1)));
  if (variance <= 0) return out;  // every value tied: no evidence either way
  const double distance = std::max(0.0, std::fabs(out.u - mean) - 0.5);
  out.z = std::copysign(distance / std::sqrt(variance), out.u - mean);
  out.p_value = std::min(1.0, NormalTwoSided(out.z));
  return out;
}

Interval BootstrapRatioOfMedians(const std::vector<double>& baseline,
                                 const std::vector<double>& candidate, double confidence,
                                 int resamples, uint64_t seed) {
  Interval out{kNaN, kNaN};
  if (baseline.empty() || candidate.empty() || resamples <= 0 || !(confidence > 0) ||
      !(confidence < 1)) {
    return out;
  }
  std::mt19937_64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(resamples));
  std::vector<double> scratch;
  for (int r = 0; r < resamples; ++r) {
    const double base = ResampledMedian(baseline, rng, scratch);
    const double cand = ResampledMedian(candidate, rng, scratch);
    if (base != 0 && std::isfinite(base) && std::isfinite(cand)) ratios.push_back(cand / base);
  }
  if (ratios.empty()) return out;
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - confidence) / 2;
  out.low = SortedQuantile(ratios, tail);
  out.high = SortedQuantile(ratios, 1 - tail);
  return out;
}

std::vector<double> BenjaminiHochberg(const std::vector<double>& p_values) {
  const size_t m = p_values.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  // NaN p-values sort last and come back as 1.
  auto key = [&](size_t i) { return std::isnan(p_values[i]) ? 2.0 : p_values[i]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return key(x) < key(y); });
  std::vector<double> q(m, 1);
  double running = 1;
  for (size_t k = m; k > 0; --k) {
    const size_t i = order[k - 1];
    const double adjusted = key(i) * static_cast<double>(m) / static_cast<double>(k);
    running = std::min(running, adjusted);
    q[i] = std::min(1.0, running);
  }
  return q;
}

std::vector<ChangePoint> DetectChangePoints(const std::vector<double>& series,
                                            const ChangePointOptions& options) {
  std::vector<ChangePoint> out;
  const size_t min_segment = std::max<size_t>(1, options.min_segment);
  const size_t n = series.size();
  if (n < 2 * min_segment) return out;
  const double sigma = RobustNoiseSigma(series);
  if (!(sigma > 0) || !std::isfinite(sigma)) return out;  // a constant series has no step
  // Replace outliers (beyond kOutlierSigmas of a running median, which
  // follows steps) by that median: a clipped outlier still biases a segment
  // mean by 3 sigma. Then center the series (smaller sums, less cancellation).
  const std::vector<double> smooth = RunningMedian(series, std::max<size_t>(2, min_segment));
  const double center = Median(series);
  std::vector<double> clipped(n);
  for (size_t i = 0; i < n; ++i) {
    const bool outlier = std::fabs(series[i] - smooth[i]) > kOutlierSigmas * sigma;
    clipped[i] = (outlier ? smooth[i] : series[i]) - center;
  }
  const double penalty = options.penalty > 0 ? options.penalty : AutoPenalty(n);
  const std::vector<size_t> starts = Pelt(clipped, sigma, penalty, min_segment);
  size_t segment_begin = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t next_end = k + 1 < starts.size() ? starts[k + 1] : n;
    ChangePoint point;
    point.index = starts[k];
    point.before =
        Median(std::vector<double>(series.begin() + static_cast<std::ptrdiff_t>(segment_begin),
                                   series.begin() + static_cast<std::ptrdiff_t>(starts[k])));
    point.after =
        Median(std::vector<double>(series.begin() + static_cast<std::ptrdiff_t>(starts[k]),
                                   series.begin() + static_cast<std::ptrdiff_t>(next_end)));
    out.push_back(point);
    segment_begin = starts[k];
  }
  return out;
}

}  // namespace dfarm::stats
