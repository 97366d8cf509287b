// Statistics for the release gate and the history view: medians, rank tests
// (two samples, and paired), bootstrap intervals, the Benjamini-Hochberg
// correction and change points in a series. Pure functions of their arguments (the bootstrap is
// seeded), no I/O, nothing of DelegateFarm below them, so each is tested on synthetic data in
// stats_test.cc (the calibration tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace dfarm::stats {

// The median of `values` (the mean of the two middle values for an even
// count); NaN for an empty vector.
double Median(std::vector<double> values);

// A two-sided rank test: u is the U statistic of `a` (the number of pairs in
// which a's value is larger, ties counting one half), z its standardized value
// (0 for the exact test) and p_value the two-sided p.
struct RankTest {
  double u = 0;
  double z = 0;
  double p_value = 1;
};

// Mann-Whitney U of a vs b: normal approximation with tie correction and
// continuity correction; exact distribution when both sides have <= 10 values
// and no ties. p = 1 when a side is empty.
RankTest MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b);

// The smallest p MannWhitneyU can give for sides of n and m values (every
// value of one side below every value of the other): with 3 and 3, 0.1, so
// no such comparison is ever significant at 0.05. 1 when a side is empty.
double SmallestMannWhitneyP(size_t n, size_t m);

// The fewest values per side (both sides alike, at most 1000) whose smallest
// p is at most `alpha`; 0 when even 1000 are not enough.
size_t ValuesPerSideForAlpha(double alpha);

// A two-sided Wilcoxon signed-rank test of paired differences (candidate
// minus baseline, or their log ratios): zero differences are dropped
// (Wilcoxon's method), the rest ranked by absolute value (ties get the
// average rank). w_plus is the sum of the ranks of the positive differences,
// n the differences kept, z the standardized value (0 for the exact test).
struct SignedRankTest {
  double w_plus = 0;
  double z = 0;
  double p_value = 1;
  size_t n = 0;
  bool exact = false;
};

// Exact distribution when 1 <= n <= 50 and no two absolute differences tie;
// else the normal approximation with the tie correction (variance
// n(n+1)(2n+1)/24 - sum(t^3 - t)/48) and a continuity correction of 1/2.
// p = 1 when nothing is left (every difference 0, or none).
SignedRankTest WilcoxonSignedRank(const std::vector<double>& differences);

// The smallest p WilcoxonSignedRank can give for n pairs (every difference
// of one sign): 2 / 2^n while exact, so 5 pairs give 0.0625 and never pass
// alpha 0.05. 1 for n = 0.
double SmallestSignedRankP(size_t pairs);

// The fewest pairs (at most 1000) whose smallest p is at most `alpha`; 0
// when even 1000 are not enough.
size_t PairsForAlpha(double alpha);

struct Interval {
  double low = 0;
  double high = 0;
};

// Percentile bootstrap CI of median(candidate) / median(baseline), seeded
// (deterministic: the same arguments give the same interval). `confidence` is
// in (0, 1), e.g. 0.95. Empty sides, or a baseline median of 0, give NaN
// bounds.
Interval BootstrapRatioOfMedians(const std::vector<double>& baseline,
                                 const std::vector<double>& candidate, double confidence,
                                 int resamples, uint64_t seed);

// Paired: the median of the ratios candidate[i] / baseline[i] (pairs with a
// baseline of 0 or a non-finite ratio left out), and its percentile bootstrap
// CI over resampled pairs, seeded like BootstrapRatioOfMedians. The sides
// must have the same length; unequal or empty sides give NaN.
struct PairedRatio {
  double median_ratio = std::numeric_limits<double>::quiet_NaN();
  Interval interval{std::numeric_limits<double>::quiet_NaN(),
                    std::numeric_limits<double>::quiet_NaN()};
};
PairedRatio BootstrapMedianOfPairedRatios(const std::vector<double>& baseline,
                                          const std::vector<double>& candidate, double confidence,
                                          int resamples, uint64_t seed);

// Percentile bootstrap CI of a statistic over n items (images of a labelled
// set, say): each resample draws n item indices in [0, n) with replacement
// and passes them to `statistic` (repeats allowed, in draw order); seeded
// like BootstrapRatioOfMedians. A paired comparison of two sides measured on
// the same items passes the difference of their statistics, so both sides
// see the same draw. Non-finite statistics are left out; n = 0, none finite
// or a bad confidence gives NaN bounds.
Interval BootstrapOverItems(size_t n,
                            const std::function<double(const std::vector<size_t>&)>& statistic,
                            double confidence, int resamples, uint64_t seed);

// Benjamini-Hochberg adjusted p-values (q-values), same order as the input:
// step-up, monotone in p, capped at 1.
std::vector<double> BenjaminiHochberg(const std::vector<double>& p_values);

struct ChangePointOptions {
  size_t min_segment = 5;  // no segment shorter than this
  // The cost of one more change point, in units of the normalized cost (squared
  // deviations over the noise variance, each capped at 3^2). 0: automatic,
  // 5 log n, and each step found must then pass the permutation test. An
  // explicit penalty keeps every step the fit finds (no test).
  double penalty = 0;
};

struct ChangePoint {
  size_t index = 0;   // first point of the new segment
  double before = 0;  // median of the segment that ends at index - 1
  double after = 0;   // median of the segment that starts at index
};

// Step changes in a series, in increasing index order. A series of positive
// values is fitted in logs (run times and memory change by a factor). The fit
// is PELT (optimal partitioning) over a robust cost: a point's squared
// deviation from its segment's level in units of the noise variance, capped at
// 3 sds, so an outlier run costs the same however far out it is and moves no
// level. The noise sd is estimated robustly from the whole series (the MAD of
// first differences: a step moves one difference only; in logs, that sd over
// the median). Each step found must then pass a seeded permutation test: over
// the two segments around it (at most 30 runs on each side), shuffles of the
// runs rarely give a split whose cost drop reaches the observed one (p <= 0.02,
// the best split searched in each shuffle too); the least supported step goes
// first and its neighbours are tested again. Deterministic. `before` and
// `after` are medians of the series itself. Non-finite points are not allowed
// (the caller drops them). Cost: the fit is O(n^3) at worst (a flat series;
// cheap adds), 0.2 to 0.6 s for 1000 points; a test O(60^2) per shuffle.
std::vector<ChangePoint> DetectChangePoints(const std::vector<double>& series,
                                            const ChangePointOptions& options = {});

}  // namespace dfarm::stats
