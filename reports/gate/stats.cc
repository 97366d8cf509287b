#include "reports/gate/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <random>
#include <utility>

namespace dfarm::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Change points (DetectChangePoints). A point's cost is capped at kCapSigmas
// noise sds. PELT's automatic penalty is kPenaltyPerLog * log n (AutoPenalty);
// each step it finds must then pass a permutation test at level kStepAlpha with
// kPermutations shuffles of at most kTestSide runs on each side of the step
// (each shuffle costs O(window^2)), seeded from kStepSeed and the window.
constexpr double kCapSigmas = 3;
constexpr double kPenaltyPerLog = 5;
constexpr double kStepAlpha = 0.02;
constexpr int kPermutations = 499;
constexpr size_t kTestSide = 30;
constexpr uint64_t kStepSeed = 0x5eed;

// The automatic change-point penalty, in units of the capped cost (squared
// deviations over the noise variance): 5 log n, BIC's log n per parameter for
// the new level and the position, and more for the noise estimate from n - 1
// differences, itself noisy in short histories. The permutation test after it
// takes out what the penalty lets through there. Measured over 200 flat
// histories with 3% t-distributed noise (5 degrees) and 2% outlier runs: PELT
// alone at 4 log n puts a step in 8 of 18-run histories, at 6 log n in 3; at
// 5 log n with the test in 3, and in none of 30, 60 or 200 runs
// (stats_test.cc: HeavyTailedNoiseMakesNoSteps).
double AutoPenalty(size_t n) { return kPenaltyPerLog * std::log(static_cast<double>(n)); }

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

// The signed-rank test is exact up to this many nonzero differences: the
// counts of the 2^n sign patterns stay exact in doubles (2^50 < 2^53).
constexpr size_t kMaxExactPairs = 50;

// P(W+ <= w) under the null hypothesis for n untied ranks 1..n: each rank is
// positive with probability 1/2, so counts[s] is the number of subsets of
// 1..n that sum to s (one rank added at a time).
double SignedRankLowerTail(size_t n, double w) {
  const size_t max_sum = n * (n + 1) / 2;
  std::vector<double> counts(max_sum + 1, 0);
  counts[0] = 1;
  for (size_t rank = 1; rank <= n; ++rank) {
    for (size_t s = max_sum; s >= rank; --s) counts[s] += counts[s - rank];
  }
  double below = 0;
  for (size_t s = 0; s <= max_sum && static_cast<double>(s) <= w + 1e-9; ++s) below += counts[s];
  return below / std::ldexp(1.0, static_cast<int>(n));
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

// A segment's values kept sorted, with prefix sums of the values and of their
// squares, for the capped quadratic cost (in noise sds): min over mu of
// sum(min((x - mu)^2, cap^2)). Gaussian in the middle, a point farther than
// `cap` from mu costs cap^2 whatever its distance, so an outlier moves neither
// mu nor the cost beyond that.
class SortedSegment {
 public:
  void Clear() {
    sorted_.clear();
    s1_.assign(1, 0);
    s2_.assign(1, 0);
  }

  // O(size): the values above x move up one place.
  void Insert(double x) {
    const size_t p =
        static_cast<size_t>(std::upper_bound(sorted_.begin(), sorted_.end(), x) - sorted_.begin());
    sorted_.insert(sorted_.begin() + static_cast<std::ptrdiff_t>(p), x);
    s1_.insert(s1_.begin() + static_cast<std::ptrdiff_t>(p) + 1, s1_[p]);
    s2_.insert(s2_.begin() + static_cast<std::ptrdiff_t>(p) + 1, s2_[p]);
    for (size_t i = p + 1; i < s1_.size(); ++i) {
      s1_[i] += x;
      s2_[i] += x * x;
    }
  }

  // The least of the local minima found from the quartiles and the median: mu
  // moves to the mean of the points within cap of it until those points stay
  // the same (each move lowers the cost; the mean of points within cap of mu
  // has one within cap of it). From these starts the search finds the global
  // minimum unless the segment spreads over several levels, which a split fits
  // better anyway. O(log size) per move.
  double CappedCost(double cap) const {
    const size_t m = sorted_.size();
    if (m == 0) return 0;
    double best = kInf;
    for (const size_t start : {m / 4, m / 2, m - 1 - m / 4}) {
      best = std::min(best, LocalMinimum(sorted_[start], cap));
    }
    return best;
  }

 private:
  static constexpr int kMaxMoves = 8;
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  double LocalMinimum(double mu, double cap) const {
    size_t lo = 0;
    size_t hi = 0;
    for (int move = 0; move < kMaxMoves; ++move) {
      const size_t new_lo = Below(mu - cap);
      const size_t new_hi = Below(std::nextafter(mu + cap, kInf));
      if ((move > 0 && new_lo == lo && new_hi == hi) || new_hi == new_lo) break;
      lo = new_lo;
      hi = new_hi;
      mu = (s1_[hi] - s1_[lo]) / static_cast<double>(hi - lo);
    }
    lo = Below(mu - cap);
    hi = Below(std::nextafter(mu + cap, kInf));
    const double count = static_cast<double>(hi - lo);
    const double inside = s2_[hi] - s2_[lo] - 2 * mu * (s1_[hi] - s1_[lo]) + count * mu * mu;
    return std::max(0.0, inside) + cap * cap * (static_cast<double>(sorted_.size()) - count);
  }

  size_t Below(double v) const {  // the number of values < v
    return static_cast<size_t>(std::lower_bound(sorted_.begin(), sorted_.end(), v) -
                               sorted_.begin());
  }

  std::vector<double> sorted_;
  std::vector<double> s1_{0};  // s1_[i]: the sum of the i smallest values
  std::vector<double> s2_{0};  // s2_[i]: the sum of their squares
};

// Optimal partitioning with pruning (PELT, Killick et al. 2012) of the capped
// quadratic cost of `x` (in noise sds): returns the segment starts after 0.
// Each live candidate start keeps its segment sorted. The pruning assumes the
// cost is the exact minimum over mu; SortedSegment's local minimum is that
// except for segments that are themselves two levels, which a split fits better.
std::vector<size_t> Pelt(const std::vector<double>& x, double cap, double penalty,
                         size_t min_segment) {
  const size_t n = x.size();
  struct Candidate {
    size_t start = 0;
    SortedSegment segment;  // x[start, t)
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(n + 1, inf);
  std::vector<size_t> last(n + 1, 0);
  best[0] = -penalty;
  std::vector<Candidate> candidates;
  std::vector<double> totals;
  for (size_t t = min_segment; t <= n; ++t) {
    for (Candidate& c : candidates) c.segment.Insert(x[t - 1]);
    // A segment may start at s only when s is 0 or itself ends a valid prefix.
    const size_t fresh = t - min_segment;
    if (std::isfinite(best[fresh])) {
      Candidate c{fresh, {}};
      for (size_t i = fresh; i < t; ++i) c.segment.Insert(x[i]);
      candidates.push_back(std::move(c));
    }
    totals.assign(candidates.size(), 0);
    for (size_t c = 0; c < candidates.size(); ++c) {
      totals[c] = best[candidates[c].start] + candidates[c].segment.CappedCost(cap) + penalty;
      if (totals[c] < best[t]) {
        best[t] = totals[c];
        last[t] = candidates[c].start;
      }
    }
    std::vector<Candidate> kept;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (totals[c] - penalty <= best[t]) kept.push_back(std::move(candidates[c]));
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

// The largest drop of the capped cost of `window` (in noise sds) from one
// split, over the splits that leave at least `min_segment` points on each side.
// O(window^2).
double BestSplitGain(const std::vector<double>& window, double cap, size_t min_segment,
                     std::vector<double>& left_cost, SortedSegment& segment) {
  const size_t m = window.size();
  left_cost.assign(m + 1, 0);
  segment.Clear();
  for (size_t k = 1; k <= m; ++k) {
    segment.Insert(window[k - 1]);
    if (k >= min_segment) left_cost[k] = segment.CappedCost(cap);
  }
  const double whole = left_cost[m];
  double best = 0;
  segment.Clear();
  for (size_t k = m; k-- > min_segment;) {
    segment.Insert(window[k]);
    if (m - k >= min_segment) best = std::max(best, whole - left_cost[k] - segment.CappedCost(cap));
  }
  return best;
}

// The permutation p-value of a step somewhere in `window` (in noise sds): the
// share of shuffles of the window (the observed order counted as one) whose
// BestSplitGain reaches the observed one. The statistic is the fit's own, and
// the search over splits is part of it, so picking the best split does not bias
// the test. Seeded: deterministic. Stops early, with an estimate above `alpha`,
// once p is sure to exceed alpha.
double StepPValue(std::vector<double> window, size_t min_segment, double alpha, uint64_t seed) {
  std::vector<double> left_cost;
  SortedSegment segment;
  // Relative slack: a shuffle that reproduces the observed split, summed in another order.
  const double observed =
      BestSplitGain(window, kCapSigmas, min_segment, left_cost, segment) * (1 - 1e-9);
  std::mt19937_64 rng(seed);
  const double enough = alpha * (kPermutations + 1);
  int reached = 1;
  for (int draw = 1; draw <= kPermutations; ++draw) {
    for (size_t j = window.size() - 1; j > 0; --j) {
      std::swap(window[j], window[DrawIndex(rng, j + 1)]);
    }
    if (BestSplitGain(window, kCapSigmas, min_segment, left_cost, segment) >= observed) {
      ++reached;
    }
    if (reached > enough) return static_cast<double>(reached) / (draw + 1);
  }
  return static_cast<double>(reached) / (kPermutations + 1);
}

// Backward elimination of the proposed segment starts: the step whose two
// neighbouring segments give the largest StepPValue goes, its neighbours are
// tested again over the merged segment, until every step left has p <= alpha.
std::vector<size_t> KeepTestedSteps(const std::vector<double>& series, std::vector<size_t> starts,
                                    size_t min_segment) {
  std::map<std::pair<size_t, size_t>, double> tested;  // p by window [begin, end)
  while (!starts.empty()) {
    size_t worst = 0;
    double worst_p = -1;
    for (size_t k = 0; k < starts.size(); ++k) {
      const size_t begin =
          std::max(k > 0 ? starts[k - 1] : 0, starts[k] - std::min(starts[k], kTestSide));
      const size_t end =
          std::min(k + 1 < starts.size() ? starts[k + 1] : series.size(), starts[k] + kTestSide);
      auto [it, fresh] = tested.try_emplace({begin, end}, 0.0);
      if (fresh) {
        const std::vector<double> window(series.begin() + static_cast<std::ptrdiff_t>(begin),
                                         series.begin() + static_cast<std::ptrdiff_t>(end));
        it->second = StepPValue(window, min_segment, kStepAlpha, kStepSeed + begin * 7919 + end);
      }
      if (it->second > worst_p) {
        worst_p = it->second;
        worst = k;
      }
    }
    if (worst_p <= kStepAlpha) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(worst));
  }
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

double SmallestMannWhitneyP(size_t n, size_t m) {
  std::vector<double> a(n), b(m);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<double>(i);
  for (size_t j = 0; j < m; ++j) b[j] = static_cast<double>(n + j);
  return MannWhitneyU(a, b).p_value;
}

size_t ValuesPerSideForAlpha(double alpha) {
  for (size_t n = 1; n <= 1000; ++n) {
    if (SmallestMannWhitneyP(n, n) <= alpha) return n;
  }
  return 0;
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

SignedRankTest WilcoxonSignedRank(const std::vector<double>& differences) {
  SignedRankTest out;
  std::vector<double> magnitudes;
  std::vector<bool> positive;
  for (double d : differences) {
    if (d == 0 || std::isnan(d)) continue;
    magnitudes.push_back(std::fabs(d));
    positive.push_back(d > 0);
  }
  out.n = magnitudes.size();
  if (out.n == 0) return out;
  const PooledRanks ranked = RankPooled(magnitudes);
  for (size_t i = 0; i < out.n; ++i) out.w_plus += positive[i] ? ranked.ranks[i] : 0;
  const double n = static_cast<double>(out.n);
  const double total = n * (n + 1) / 2;
  if (out.n <= kMaxExactPairs && ranked.tie_term == 0) {
    out.exact = true;
    const double lower = SignedRankLowerTail(out.n, std::min(out.w_plus, total - out.w_plus));
    out.p_value = std::min(1.0, 2 * lower);
    return out;
  }
  const double mean = total / 2;
  const double variance = n * (n + 1) * (2 * n + 1) / 24 - ranked.tie_term / 48;
  if (variance <= 0) return out;
  const double distance = std::max(0.0, std::fabs(out.w_plus - mean) - 0.5);
  out.z = std::copysign(distance / std::sqrt(variance), out.w_plus - mean);
  out.p_value = std::min(1.0, NormalTwoSided(out.z));
  return out;
}

double SmallestSignedRankP(size_t pairs) {
  std::vector<double> all_up(pairs);
  for (size_t i = 0; i < pairs; ++i) all_up[i] = static_cast<double>(i + 1);
  return WilcoxonSignedRank(all_up).p_value;
}

size_t PairsForAlpha(double alpha) {
  for (size_t n = 1; n <= 1000; ++n) {
    if (SmallestSignedRankP(n) <= alpha) return n;
  }
  return 0;
}

PairedRatio BootstrapMedianOfPairedRatios(const std::vector<double>& baseline,
                                          const std::vector<double>& candidate, double confidence,
                                          int resamples, uint64_t seed) {
  PairedRatio out;
  if (baseline.size() != candidate.size()) return out;
  std::vector<double> ratios;
  for (size_t i = 0; i < baseline.size(); ++i) {
    const double r = candidate[i] / baseline[i];
    if (baseline[i] != 0 && std::isfinite(r)) ratios.push_back(r);
  }
  if (ratios.empty()) return out;
  out.median_ratio = Median(ratios);
  if (resamples <= 0 || !(confidence > 0) || !(confidence < 1)) return out;
  std::mt19937_64 rng(seed);
  std::vector<double> medians(static_cast<size_t>(resamples));
  std::vector<double> scratch;
  for (double& m : medians) m = ResampledMedian(ratios, rng, scratch);
  std::sort(medians.begin(), medians.end());
  const double tail = (1 - confidence) / 2;
  out.interval.low = SortedQuantile(medians, tail);
  out.interval.high = SortedQuantile(medians, 1 - tail);
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

Interval BootstrapOverItems(size_t n,
                            const std::function<double(const std::vector<size_t>&)>& statistic,
                            double confidence, int resamples, uint64_t seed) {
  Interval out{kNaN, kNaN};
  if (n == 0 || resamples <= 0 || !(confidence > 0) || !(confidence < 1)) return out;
  std::mt19937_64 rng(seed);
  std::vector<size_t> draw(n);
  std::vector<double> values;
  values.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (size_t& i : draw) i = DrawIndex(rng, n);
    const double v = statistic(draw);
    if (std::isfinite(v)) values.push_back(v);
  }
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const double tail = (1 - confidence) / 2;
  out.low = SortedQuantile(values, tail);
  out.high = SortedQuantile(values, 1 - tail);
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
  // Run times and memory vary by a factor: a positive series is fitted in logs,
  // where the noise is the same on both sides of a step, in noise sds about its
  // median (smaller sums, less cancellation). The noise is estimated on the
  // series itself, where a quantized series (peak RSS, a few distinct
  // latencies) has equal differences, and moved to logs over the median level.
  const bool positive = std::all_of(series.begin(), series.end(), [](double v) { return v > 0; });
  const double level = positive ? Median(series) : 1;
  const double sigma = RobustNoiseSigma(series) / level;
  if (!(sigma > 0) || !std::isfinite(sigma)) return out;  // a constant series has no step
  std::vector<double> scaled(series);
  if (positive) {
    for (double& v : scaled) v = std::log(v);
  }
  const double center = Median(scaled);
  for (double& v : scaled) v = (v - center) / sigma;
  const bool automatic = !(options.penalty > 0);
  const double penalty = automatic ? AutoPenalty(n) : options.penalty;
  std::vector<size_t> starts = Pelt(scaled, kCapSigmas, penalty, min_segment);
  if (automatic) starts = KeepTestedSteps(scaled, std::move(starts), min_segment);
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
