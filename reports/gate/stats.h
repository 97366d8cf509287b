// Statistics for the release gate and the history view: medians, a rank test,
// a bootstrap interval, the Benjamini-Hochberg correction and change points in
// a series. Pure functions of their arguments (the bootstrap is seeded), no I/O,
// nothing of DelegateFarm below them, so each is tested on synthetic data in
// stats_test.cc (the calibration tests).
#pragma once

#include <cstddef>
#include <cstdint>
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

// Benjamini-Hochberg adjusted p-values (q-values), same order as the input:
// step-up, monotone in p, capped at 1.
std::vector<double> BenjaminiHochberg(const std::vector<double>& p_values);

struct ChangePointOptions {
  size_t min_segment = 5;  // no segment shorter than this
  // The cost of one more change point, in units of the normalized cost (squared
  // deviations divided by the noise variance). 0: automatic, BIC-like:
  // (3 + 15 / sqrt(n)) log n, with the noise from a robust estimate.
  double penalty = 0;
};

struct ChangePoint {
  size_t index = 0;   // first point of the new segment
  double before = 0;  // median of the segment that ends at index - 1
  double after = 0;   // median of the segment that starts at index
};

// Step changes in a series (PELT over a Gaussian mean-shift cost with a robust
// variance estimate: the MAD of the first differences), in increasing index
// order. Points farther than 3 noise sds from a running median count as
// outliers and do not move a segment's mean. Non-finite points are not allowed
// (the caller drops them).
std::vector<ChangePoint> DetectChangePoints(const std::vector<double>& series,
                                            const ChangePointOptions& options = {});

}  // namespace dfarm::stats
