#include "reports/gate/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace dfarm::stats {
namespace {

// ---------------------------------------------------------------------------
// Known values.

TEST(Median, OddEvenEmpty) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({7}), 7);
  EXPECT_TRUE(std::isnan(Median({})));
}

TEST(MannWhitneyU, ExactSmallSamples) {
  // scipy.stats.mannwhitneyu docs (males vs females, method="exact"): U1 = 17, p = 0.1111.
  RankTest t = MannWhitneyU({19, 22, 16, 29, 24}, {20, 11, 17, 12});
  EXPECT_EQ(t.u, 17);
  EXPECT_NEAR(t.p_value, 0.111111, 1e-6);
  // R ?wilcox.test, Hollander & Wolfe p. 110: W = 35; one-sided p = 0.1272, so two-sided 0.2544.
  t = MannWhitneyU({0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46},
                   {1.15, 0.88, 0.90, 0.74, 1.21});
  EXPECT_EQ(t.u, 35);
  EXPECT_NEAR(t.p_value, 0.2544, 1e-4);
  // Complete separation of 5 and 5: 2 arrangements of C(10,5) = 252 are as extreme.
  t = MannWhitneyU({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  EXPECT_EQ(t.u, 0);
  EXPECT_NEAR(t.p_value, 2.0 / 252, 1e-12);
  // The critical value of 10 vs 10 at 0.05: P(U <= 23) = 0.021629 per side.
  t = MannWhitneyU({-6, -5, -4, -3, -2, -1, 9, 10.5, 11, 11.5},
                   {0, 2, 4, 6, 8, 10, 12, 14, 16, 18});
  EXPECT_EQ(t.u, 23);
  EXPECT_NEAR(t.p_value, 0.043257, 1e-6);
  t = MannWhitneyU({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  // The test is symmetric: swapping the sides mirrors U and keeps p.
  const RankTest swapped = MannWhitneyU({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5});
  EXPECT_EQ(swapped.u, 25);
  EXPECT_DOUBLE_EQ(swapped.p_value, t.p_value);
}

TEST(MannWhitneyU, NormalApproximationWithTies) {
  // Hand computed: pooled ranks 1 2 4 4 4 6 7 8, R_a = 11, U = 1, mean 8, tie term 3^3 - 3 = 24,
  // var = 4*4/12 * (9 - 24/56) = 11.428571, z = -(7 - 0.5)/sqrt(var) = -1.922726, p = 0.054514.
  const RankTest t = MannWhitneyU({1, 2, 3, 3}, {3, 4, 5, 6});
  EXPECT_EQ(t.u, 1);
  EXPECT_NEAR(t.z, -1.922726, 1e-6);
  EXPECT_NEAR(t.p_value, 0.054514, 1e-6);
}

TEST(MannWhitneyU, LargeSamplesUseTheNormalApproximation) {
  std::vector<double> a, b;
  for (int i = 0; i < 20; ++i) {
    a.push_back(i);
    b.push_back(i + 0.5);
  }
  const RankTest t = MannWhitneyU(a, b);
  // Each a_i beats the b_j with j < i: U = 0 + 1 + ... + 19 = 190 (no ties).
  // Hand computed: mean 200, var 20*20*41/12 = 1366.67, z = -(10 - 0.5)/36.9685 = -0.256976.
  EXPECT_EQ(t.u, 190);
  EXPECT_NEAR(t.z, -0.256976, 1e-6);
  EXPECT_NEAR(t.p_value, 0.797197, 1e-6);
}

TEST(MannWhitneyU, DegenerateInputs) {
  EXPECT_EQ(MannWhitneyU({}, {1, 2}).p_value, 1);
  EXPECT_EQ(MannWhitneyU({1, 2}, {}).p_value, 1);
  EXPECT_EQ(MannWhitneyU({5, 5, 5}, {5, 5}).p_value, 1);  // all tied
  EXPECT_EQ(MannWhitneyU({1}, {2}).p_value, 1);           // 2 of 2 arrangements
}

TEST(BenjaminiHochberg, HandComputedExample) {
  // Sorted: 0.005 0.01 0.03 0.04 0.20; p*m/rank: 0.025 0.025 0.05 0.05 0.20; already monotone.
  const std::vector<double> q = BenjaminiHochberg({0.01, 0.04, 0.03, 0.005, 0.20});
  ASSERT_EQ(q.size(), 5u);
  EXPECT_NEAR(q[0], 0.025, 1e-12);
  EXPECT_NEAR(q[1], 0.05, 1e-12);
  EXPECT_NEAR(q[2], 0.05, 1e-12);
  EXPECT_NEAR(q[3], 0.025, 1e-12);
  EXPECT_NEAR(q[4], 0.20, 1e-12);
}

TEST(BenjaminiHochberg, StepUpIsMonotoneAndCapped) {
  // p*m/rank: 0.03 0.03 0.0333 0.03 -> the step-up takes the minimum from the top: 0.03 each.
  const std::vector<double> q = BenjaminiHochberg({0.0075, 0.015, 0.025, 0.03});
  for (double v : q) EXPECT_NEAR(v, 0.03, 1e-12);
  const std::vector<double> capped = BenjaminiHochberg({0.9, 1.0, std::nan("")});
  EXPECT_NEAR(capped[0], 1.0, 1e-12);  // 0.9 * 3 / 1 above 1 -> min with the later 1.0
  EXPECT_EQ(capped[1], 1.0);
  EXPECT_EQ(capped[2], 1.0);
  EXPECT_TRUE(BenjaminiHochberg({}).empty());
}

TEST(Bootstrap, DeterministicAndCoversTheRatio) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 1);
  std::vector<double> base, cand;
  for (int i = 0; i < 30; ++i) {
    base.push_back(100 + noise(rng));
    cand.push_back(110 + noise(rng));
  }
  const Interval first = BootstrapRatioOfMedians(base, cand, 0.95, 2000, 42);
  const Interval again = BootstrapRatioOfMedians(base, cand, 0.95, 2000, 42);
  EXPECT_EQ(first.low, again.low);
  EXPECT_EQ(first.high, again.high);
  EXPECT_LT(first.low, 1.10);
  EXPECT_GT(first.high, 1.10);
  EXPECT_GT(first.low, 1.05);
  EXPECT_LT(first.high, 1.15);
  const Interval other = BootstrapRatioOfMedians(base, cand, 0.95, 2000, 43);
  EXPECT_TRUE(other.low != first.low || other.high != first.high);
  // A wider confidence gives a wider interval.
  const Interval wide = BootstrapRatioOfMedians(base, cand, 0.99, 2000, 42);
  EXPECT_LE(wide.low, first.low);
  EXPECT_GE(wide.high, first.high);
}

TEST(Bootstrap, DegenerateInputsGiveNaN) {
  EXPECT_TRUE(std::isnan(BootstrapRatioOfMedians({}, {1}, 0.95, 100, 1).low));
  EXPECT_TRUE(std::isnan(BootstrapRatioOfMedians({1}, {}, 0.95, 100, 1).high));
  EXPECT_TRUE(std::isnan(BootstrapRatioOfMedians({0, 0}, {1}, 0.95, 100, 1).low));
  EXPECT_TRUE(std::isnan(BootstrapRatioOfMedians({1}, {1}, 1.5, 100, 1).low));
  const Interval same = BootstrapRatioOfMedians({2, 2, 2}, {3, 3}, 0.9, 100, 1);
  EXPECT_DOUBLE_EQ(same.low, 1.5);
  EXPECT_DOUBLE_EQ(same.high, 1.5);
}

TEST(WilcoxonSignedRank, ExactSmallSamples) {
  // scipy.stats.wilcoxon docs (Darwin's Zea mays, cross minus self fertilized, in eighths of an
  // inch): W- = 24, exact two-sided p = 0.041259765625 (also checked by enumerating the 2^15
  // sign patterns).
  SignedRankTest t =
      WilcoxonSignedRank({6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75});
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.n, 15u);
  EXPECT_EQ(t.w_plus, 96);  // 120 - 24
  EXPECT_NEAR(t.p_value, 0.041259765625, 1e-12);
  // Hand counted: W- = 4; of the 32 sign patterns of ranks 1..5, 7 have a sum <= 4 (0, 1, 2,
  // 3, 1+2, 4, 1+3), so p = 2 * 7 / 32 = 0.4375. Zero differences are dropped first.
  t = WilcoxonSignedRank({0, 1, 2, 3, -4, 5, 0});
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.n, 5u);
  EXPECT_EQ(t.w_plus, 11);
  EXPECT_NEAR(t.p_value, 0.4375, 1e-12);
  // Symmetric: flipping every sign mirrors W+ and keeps p.
  const SignedRankTest flipped = WilcoxonSignedRank({-1, -2, -3, 4, -5});
  EXPECT_EQ(flipped.w_plus, 4);
  EXPECT_DOUBLE_EQ(flipped.p_value, t.p_value);
}

TEST(WilcoxonSignedRank, NormalApproximationWithTiesAndLargeSamples) {
  // The Darwin data again, forced to the normal approximation by a tie (the 24 becomes 23):
  // hand computed, ranks 1 2 3 4 5.5 5.5 7 ..., W+ = 96, var = 15*16*31/24 - (8-2)/48 =
  // 309.875, z = (96 - 60 - 0.5)/sqrt(var) = 2.016671, p = 0.043729.
  SignedRankTest t =
      WilcoxonSignedRank({6, 8, 14, 16, 23, 23, 28, 29, 41, -48, 49, 56, 60, -67, 75});
  EXPECT_FALSE(t.exact);
  EXPECT_EQ(t.w_plus, 96);
  EXPECT_NEAR(t.z, 2.016671, 1e-6);
  EXPECT_NEAR(t.p_value, 0.043729, 1e-6);
  // Hand computed: |d| ranks 2 2 2 5 5 5 7.5 7.5 9.5 9.5, W+ = 45.5, tie term 24+24+6+6 = 60,
  // var = 10*11*21/24 - 60/48 = 95, z = (45.5 - 27.5 - 0.5)/sqrt(95) = 1.795462, p = 0.072580.
  t = WilcoxonSignedRank({1, 1, -1, 2, 2, 2, 3, -3, 4, 4});
  EXPECT_FALSE(t.exact);
  EXPECT_EQ(t.w_plus, 45.5);
  EXPECT_NEAR(t.z, 1.795462, 1e-6);
  EXPECT_NEAR(t.p_value, 0.072580, 1e-6);
  // 60 untied differences (more than the exact limit of 50), every third one negative:
  // W+ = 1240, mean 915, var 60*61*121/24 = 18452.5, z = 324.5/135.84 = 2.388840, p = 0.016902.
  std::vector<double> d;
  for (int i = 0; i < 60; ++i) d.push_back((i + 1) * (i % 3 ? 1.0 : -1.0));
  t = WilcoxonSignedRank(d);
  EXPECT_FALSE(t.exact);
  EXPECT_EQ(t.w_plus, 1240);
  EXPECT_NEAR(t.z, 2.388840, 1e-6);
  EXPECT_NEAR(t.p_value, 0.016902, 1e-6);
}

TEST(WilcoxonSignedRank, DegenerateInputs) {
  EXPECT_EQ(WilcoxonSignedRank({}).p_value, 1);
  EXPECT_EQ(WilcoxonSignedRank({0, 0, 0}).p_value, 1);
  EXPECT_EQ(WilcoxonSignedRank({0, 0, 0}).n, 0u);
  EXPECT_EQ(WilcoxonSignedRank({2}).p_value, 1);  // 2 of 2 sign patterns
  // All tied: the normal approximation, W+ = 6, var = 3.5 - 24/48 = 3, z = 2.5/sqrt(3).
  EXPECT_NEAR(WilcoxonSignedRank({3, 3, 3}).p_value, 0.148915, 1e-6);
  // 8 tied: W+ = 36, var = 51 - 504/48 = 40.5, z = 17.5/sqrt(40.5) = 2.749860, p = 0.005962.
  EXPECT_NEAR(WilcoxonSignedRank({3, 3, 3, 3, 3, 3, 3, 3}).p_value, 0.005962, 1e-6);
}

TEST(WilcoxonSignedRank, SmallestPAndThePairsAlphaNeeds) {
  EXPECT_EQ(SmallestSignedRankP(0), 1.0);
  EXPECT_EQ(SmallestSignedRankP(1), 1.0);
  EXPECT_NEAR(SmallestSignedRankP(5), 2.0 / 32, 1e-12);  // above 0.05: never significant
  EXPECT_NEAR(SmallestSignedRankP(6), 2.0 / 64, 1e-12);
  EXPECT_EQ(PairsForAlpha(0.05), 6u);
  EXPECT_EQ(PairsForAlpha(0.01), 8u);  // 2/128 = 0.0156 > 0.01, 2/256 = 0.0078
  EXPECT_EQ(PairsForAlpha(0.1), 5u);
  // Past the exact limit the normal approximation's smallest p still falls with n.
  EXPECT_LT(SmallestSignedRankP(60), SmallestSignedRankP(50) + 1e-3);
}

// Under the null hypothesis (differences symmetric about 0) the exact test
// flags at most alpha of the comparisons.
TEST(WilcoxonSignedRank, CalibratedUnderTheNullHypothesis) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0, 1);
  int flagged = 0;
  const int kTrials = 4000;
  for (int i = 0; i < kTrials; ++i) {
    std::vector<double> d;
    for (int k = 0; k < 10; ++k) d.push_back(normal(rng));
    flagged += WilcoxonSignedRank(d).p_value < 0.05 ? 1 : 0;
  }
  const double rate = static_cast<double>(flagged) / kTrials;
  std::printf("signed-rank null: %.2f%% of %d flagged at 0.05 (10 pairs)\n", 100 * rate, kTrials);
  EXPECT_LE(rate, 0.06);
  EXPECT_GE(rate, 0.03);
}

TEST(Bootstrap, PairedRatioCancelsASharedDrift) {
  // Each pair shares a machine level between 0.7 and 1.3 (drift), the candidate is 5% slower,
  // and each trial has 1% noise of its own: the paired ratio sees 1.05 through the drift that
  // hides it from the unpaired ratio of medians.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, 0.01);
  std::vector<double> base, cand;
  for (int i = 0; i < 12; ++i) {
    const double level = 0.7 + 0.6 * i / 11.0;
    base.push_back(1000 * level * (1 + noise(rng)));
    cand.push_back(1050 * level * (1 + noise(rng)));
  }
  const PairedRatio paired = BootstrapMedianOfPairedRatios(base, cand, 0.95, 2000, 1);
  EXPECT_NEAR(paired.median_ratio, 1.05, 0.02);  // 1.4% noise per pair, 12 pairs
  EXPECT_GT(paired.interval.low, 1.03);
  EXPECT_LT(paired.interval.high, 1.07);
  const PairedRatio again = BootstrapMedianOfPairedRatios(base, cand, 0.95, 2000, 1);
  EXPECT_EQ(again.interval.low, paired.interval.low);
  EXPECT_EQ(again.interval.high, paired.interval.high);
  const Interval unpaired = BootstrapRatioOfMedians(base, cand, 0.95, 2000, 1);
  EXPECT_LT(unpaired.low, 1.0);  // the drift swamps the 5%
  EXPECT_GT(unpaired.high - unpaired.low, 3 * (paired.interval.high - paired.interval.low));
  std::vector<double> log_ratios;
  for (size_t i = 0; i < base.size(); ++i) log_ratios.push_back(std::log(cand[i] / base[i]));
  EXPECT_NEAR(WilcoxonSignedRank(log_ratios).p_value, 2.0 / 4096, 1e-12);  // every pair slower
  EXPECT_GT(MannWhitneyU(cand, base).p_value, 0.3);
}

TEST(Bootstrap, PairedRatioDegenerateInputs) {
  EXPECT_TRUE(std::isnan(BootstrapMedianOfPairedRatios({}, {}, 0.95, 100, 1).median_ratio));
  EXPECT_TRUE(std::isnan(BootstrapMedianOfPairedRatios({1, 2}, {1}, 0.95, 100, 1).median_ratio));
  EXPECT_TRUE(std::isnan(BootstrapMedianOfPairedRatios({0}, {1}, 0.95, 100, 1).median_ratio));
  const PairedRatio one = BootstrapMedianOfPairedRatios({2, 0, 4}, {3, 1, 6}, 0.9, 100, 1);
  EXPECT_DOUBLE_EQ(one.median_ratio, 1.5);  // the pair with a baseline of 0 is left out
  EXPECT_DOUBLE_EQ(one.interval.low, 1.5);
  EXPECT_DOUBLE_EQ(one.interval.high, 1.5);
  EXPECT_TRUE(std::isnan(BootstrapMedianOfPairedRatios({2}, {3}, 1.5, 100, 1).interval.low));
}

// ---------------------------------------------------------------------------
// Calibration. The synthetic benchmark: a cell side is
// `trials` independent trials of `samples` samples each. A trial's level is
// mean * (1 + jitter * N(0, 1)): run-to-run noise (a fresh process, another
// memory layout, another moment on a shared machine). Its samples are that
// level times lognormal(0, sample_sigma): within-run noise, right-skewed like
// real latencies. The trial statistic is the median of its samples, and the
// gate compares the trial statistics of both sides (10 vs 10 here).

struct Noise {
  double jitter = 0.10;       // sd of a trial's level, relative to the mean
  double sample_sigma = 0.1;  // sigma of log(sample / level)
};

std::vector<double> TrialMedians(std::mt19937_64& rng, double mean, const Noise& noise,
                                 int trials = 10, int samples = 50) {
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> out;
  for (int t = 0; t < trials; ++t) {
    const double level = mean * std::max(0.05, 1 + noise.jitter * normal(rng));
    std::vector<double> s;
    for (int i = 0; i < samples; ++i)
      s.push_back(level * std::exp(noise.sample_sigma * normal(rng)));
    out.push_back(Median(s));
  }
  return out;
}

TEST(Calibration, EqualDistributionsWith10PercentJitterFlagAtMost5Percent) {
  // 10 seeds x 400 cells, both sides from the same distribution, rank test at alpha 0.05.
  // The exact test of 10 vs 10 has size 0.0433 (U <= 23), so about 4.3% is expected.
  int flagged = 0, cells = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    std::mt19937_64 rng(seed);
    int flagged_this_seed = 0;
    for (int c = 0; c < 400; ++c) {
      const std::vector<double> base = TrialMedians(rng, 1000, Noise{});
      const std::vector<double> cand = TrialMedians(rng, 1000, Noise{});
      if (MannWhitneyU(base, cand).p_value < 0.05) ++flagged_this_seed;
    }
    EXPECT_LE(flagged_this_seed, 30) << "seed " << seed;  // 7.5%: far beyond binomial noise
    flagged += flagged_this_seed;
    cells += 400;
  }
  const double rate = static_cast<double>(flagged) / cells;
  std::printf("null, uncorrected: %d of %d cells flagged (%.2f%%)\n", flagged, cells, 100 * rate);
  EXPECT_LE(rate, 0.05);
}

TEST(Calibration, EqualDistributionsWithCorrectionFlagAtMost1PercentOf100Cells) {
  // 20 seeds x 100 cells, q-values across the 100 cells of a seed, flagged when q < 0.05.
  int flagged = 0, cells = 0;
  for (uint64_t seed = 100; seed < 120; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<double> p;
    for (int c = 0; c < 100; ++c) {
      p.push_back(
          MannWhitneyU(TrialMedians(rng, 1000, Noise{}), TrialMedians(rng, 1000, Noise{})).p_value);
    }
    int flagged_this_seed = 0;
    for (double q : BenjaminiHochberg(p)) flagged_this_seed += q < 0.05 ? 1 : 0;
    EXPECT_LE(flagged_this_seed, 5) << "seed " << seed;
    flagged += flagged_this_seed;
    cells += 100;
  }
  const double rate = static_cast<double>(flagged) / cells;
  std::printf("null, BH over 100 cells: %d of %d cells flagged (%.2f%%)\n", flagged, cells,
              100 * rate);
  EXPECT_LE(rate, 0.01);
}

// The detection rule of the power tests: BH-corrected significance (q < 0.05
// over 100 cells, 50 of them shifted), a 95% bootstrap interval of the ratio of
// medians that excludes 1, and an estimated ratio beyond 1.03. `rank_only`
// counts the cells with an uncorrected p < 0.05 alone.
struct Detection {
  int found = 0;
  int rank_only = 0;
  int cells = 0;
};

Detection DetectShift(const Noise& noise, double shift, uint64_t first_seed, int seeds) {
  Detection d;
  for (uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::vector<double>> bases, cands;
    std::vector<double> p;
    for (int c = 0; c < 100; ++c) {
      bases.push_back(TrialMedians(rng, 1000, noise));
      cands.push_back(TrialMedians(rng, c < 50 ? 1000 * (1 + shift) : 1000, noise));
      p.push_back(MannWhitneyU(bases.back(), cands.back()).p_value);
    }
    const std::vector<double> q = BenjaminiHochberg(p);
    for (int c = 0; c < 50; ++c) {
      const Interval ci = BootstrapRatioOfMedians(bases[c], cands[c], 0.95, 1000, seed * 1000 + c);
      const double ratio = Median(cands[c]) / Median(bases[c]);
      if (q[c] < 0.05 && ci.low > 1 && ratio > 1.03) ++d.found;
      if (p[c] < 0.05) ++d.rank_only;
      ++d.cells;
    }
  }
  return d;
}

double Rate(int count, int of) { return static_cast<double>(count) / of; }

TEST(Calibration, FivePercentShiftIsFoundInAtLeast90PercentOfCells) {
  // Realistic noise for independent trials on a quiet machine: trial levels with a 2% sd,
  // samples lognormal with sigma 0.05 (the trial medians then spread by about 2.2%). With
  // 10% trial jitter no test on 10 vs 10 trial statistics reaches 90% power for a 5% shift
  // (an effect of 0.5 sd: about 18% for the t-test); see TenPercentJitterHidesAFivePercentShift.
  // Measured (10 seeds x 50 shifted cells): 94% with the full rule; at 2.5% jitter 87%, the
  // rank test alone 96%; at 3% jitter 73% and 88%.
  const Detection d = DetectShift(Noise{0.02, 0.05}, 0.05, 1, 10);
  std::printf("5%% shift, 2%% jitter: found in %d of %d cells, p < 0.05 in %d\n", d.found, d.cells,
              d.rank_only);
  EXPECT_GE(Rate(d.found, d.cells), 0.90);
  const Detection wider = DetectShift(Noise{0.025, 0.05}, 0.05, 1, 10);
  std::printf("5%% shift, 2.5%% jitter: found in %d of %d cells, p < 0.05 in %d\n", wider.found,
              wider.cells, wider.rank_only);
  EXPECT_GE(Rate(wider.rank_only, wider.cells), 0.90);
}

TEST(Calibration, TenPercentJitterHidesAFivePercentShift) {
  // Documents the limit: with 10% trial-to-trial jitter a 5% shift is mostly "not enough
  // evidence" (the gate says unknown, or reruns), never a confident verdict.
  const Detection d = DetectShift(Noise{0.10, 0.10}, 0.05, 1, 4);
  std::printf("5%% shift, 10%% jitter: found in %d of %d cells, p < 0.05 in %d\n", d.found, d.cells,
              d.rank_only);
  EXPECT_LT(Rate(d.found, d.cells), 0.05);
  EXPECT_LT(Rate(d.rank_only, d.cells), 0.30);
}

// ---------------------------------------------------------------------------
// Change points over a history of runs: one point per run (the median of the
// run's trials), multiplicative lognormal noise of `noise` (3%: run-to-run
// spread of a quiet machine), optional outliers (a run on a busy machine, 1.3x
// to 2x slower).

std::vector<double> History(uint64_t seed, size_t n, double noise, size_t step_at, double step,
                            double outlier_rate = 0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) {
    double v = 1000 * (i >= step_at ? 1 + step : 1) * std::exp(noise * normal(rng));
    if (uniform(rng) < outlier_rate) v *= 1.3 + 0.7 * uniform(rng);
    out.push_back(v);
  }
  return out;
}

TEST(ChangePoints, PlantedStepIsFoundAtTheRightRun) {
  // A 10% step under 2% run-to-run noise (5 sd), anywhere between runs 20 and 180.
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const size_t at = 20 + (seed * 37) % 160;
    const std::vector<double> h = History(seed, 200, 0.02, at, 0.10);
    const std::vector<ChangePoint> cps = DetectChangePoints(h);
    ASSERT_EQ(cps.size(), 1u) << "seed " << seed << " step at " << at;
    EXPECT_LE(std::abs(static_cast<long>(cps[0].index) - static_cast<long>(at)), 1)
        << "seed " << seed;
    EXPECT_NEAR(cps[0].before, 1000, 15);
    EXPECT_NEAR(cps[0].after, 1100, 17);
  }
  // Under 3% noise (3.3 sd) the fit puts the step 2 runs off now and then: two neighbours
  // on the wrong side of the midpoint happen with a few percent chance.
  int within_one = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const size_t at = 20 + (seed * 37) % 160;
    const std::vector<ChangePoint> cps = DetectChangePoints(History(seed, 200, 0.03, at, 0.10));
    ASSERT_EQ(cps.size(), 1u) << "seed " << seed;
    const long error = std::abs(static_cast<long>(cps[0].index) - static_cast<long>(at));
    EXPECT_LE(error, 3) << "seed " << seed;
    within_one += error <= 1 ? 1 : 0;
  }
  EXPECT_GE(within_one, 46);
}

TEST(ChangePoints, SmallerStepsAndImprovements) {
  int exact = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const size_t at = 30 + (seed * 53) % 140;
    // A 5% improvement under 2% noise (2.5 sd).
    const std::vector<ChangePoint> cps = DetectChangePoints(History(seed, 200, 0.02, at, -0.05));
    ASSERT_EQ(cps.size(), 1u) << "seed " << seed;
    EXPECT_LT(cps[0].after, cps[0].before);
    const long error = std::abs(static_cast<long>(cps[0].index) - static_cast<long>(at));
    EXPECT_LE(error, 3) << "seed " << seed;
    exact += error <= 1 ? 1 : 0;
  }
  EXPECT_GE(exact, 45);
}

TEST(ChangePoints, FlatNoisyHistoryGivesNone) {
  // At most 1 in 50 (2%), for long and short histories.
  for (size_t n : {200, 60, 30}) {
    int false_detections = 0;
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      false_detections += DetectChangePoints(History(seed, n, 0.03, n, 0)).empty() ? 0 : 1;
    }
    std::printf("flat histories of %zu runs with a change point: %d of 200\n", n, false_detections);
    EXPECT_LE(false_detections, 4) << n << " runs";
  }
}

TEST(ChangePoints, OutliersAreNotSteps) {
  int false_detections = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    false_detections += DetectChangePoints(History(seed, 200, 0.03, 200, 0, 0.05)).empty() ? 0 : 1;
  }
  std::printf("flat histories with 5%% outliers and a change point: %d of 200\n", false_detections);
  EXPECT_LE(false_detections, 4);
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const size_t at = 20 + (seed * 37) % 160;
    const std::vector<ChangePoint> cps =
        DetectChangePoints(History(seed, 200, 0.02, at, 0.10, 0.05));
    ASSERT_EQ(cps.size(), 1u) << "seed " << seed;
    EXPECT_LE(std::abs(static_cast<long>(cps[0].index) - static_cast<long>(at)), 1)
        << "seed " << seed;
  }
}

// Heavy-tailed run-to-run noise: multiplicative exp(noise * t), t Student's t
// with 5 degrees of freedom (a normal over sqrt(chi-square / 5)), and with
// `outlier_rate` runs 1.3x to 2x slower.
std::vector<double> HeavyTailedHistory(uint64_t seed, size_t n, double noise, size_t step_at,
                                       double step, double outlier_rate) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) {
    double chi_square = 0;
    for (int k = 0; k < 5; ++k) {
      const double z = normal(rng);
      chi_square += z * z;
    }
    const double t = normal(rng) / std::sqrt(chi_square / 5);
    double v = 1000 * (i >= step_at ? 1 + step : 1) * std::exp(noise * t);
    if (uniform(rng) < outlier_rate) v *= 1.3 + 0.7 * uniform(rng);
    out.push_back(v);
  }
  return out;
}

TEST(ChangePoints, TailStepUnderHeavyTailedNoiseIsFoundAtItsRun) {
  // 12 runs, then 6 runs 1.5x slower (min_segment 5: one run more than the least a
  // step needs), 3% t-distributed noise, 2% outlier runs: the step at run 12 and
  // nothing else in at least 95% of 200 seeds. Measured: 194 of 200 (the detector
  // before the robust cost: 174); each miss puts the step one or two runs early, at an
  // outlier run just before it.
  int exact = 0;
  int found = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const std::vector<ChangePoint> cps =
        DetectChangePoints(HeavyTailedHistory(seed, 18, 0.03, 12, 0.5, 0.02));
    exact += cps.size() == 1 && cps[0].index == 12 ? 1 : 0;
    found += cps.empty() ? 0 : 1;
  }
  std::printf(
      "1.5x step after 12 of 18 runs, heavy-tailed noise: at run 12 in %d of 200, "
      "some step in %d\n",
      exact, found);
  EXPECT_GE(exact, 190);
  EXPECT_GE(found, 198);
}

TEST(ChangePoints, HeavyTailedNoiseMakesNoSteps) {
  // The same noise without a step: at most 2% of 200 histories (FlatNoisyHistoryGivesNone's
  // bound), short and long. Measured: 3, 0, 0 and 0 of 200.
  for (size_t n : {18, 30, 60, 200}) {
    int false_detections = 0;
    for (uint64_t seed = 1001; seed <= 1200; ++seed) {
      false_detections +=
          DetectChangePoints(HeavyTailedHistory(seed, n, 0.03, n, 0, 0.02)).empty() ? 0 : 1;
    }
    std::printf("flat heavy-tailed histories of %zu runs with a change point: %d of 200\n", n,
                false_detections);
    EXPECT_LE(false_detections, 4) << n << " runs";
  }
}

TEST(ChangePoints, ShortHistoriesAndEdgeCases) {
  EXPECT_TRUE(DetectChangePoints({}).empty());
  EXPECT_TRUE(DetectChangePoints({1, 2, 3}).empty());
  EXPECT_TRUE(DetectChangePoints(std::vector<double>(50, 7.0)).empty());  // constant
  // A clean step in a short history: 30 runs, the step at run 12.
  std::vector<ChangePoint> cps = DetectChangePoints(History(3, 30, 0.02, 12, 0.10));
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_NEAR(static_cast<double>(cps[0].index), 12, 1);
  // A noiseless step (quantized values such as peak RSS).
  std::vector<double> rss(40, 100);
  for (size_t i = 25; i < 40; ++i) rss[i] = 120;
  cps = DetectChangePoints(rss);
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_EQ(cps[0].index, 25u);
  EXPECT_EQ(cps[0].before, 100);
  EXPECT_EQ(cps[0].after, 120);
  // Two steps; min_segment keeps a step of 3 runs from counting.
  std::vector<double> two = History(5, 120, 0.02, 40, 0.10);
  for (size_t i = 80; i < 120; ++i) two[i] *= 0.8;
  cps = DetectChangePoints(two);
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_NEAR(static_cast<double>(cps[0].index), 40, 1);
  EXPECT_NEAR(static_cast<double>(cps[1].index), 80, 1);
  std::vector<double> blip = History(6, 60, 0.02, 60, 0);
  for (size_t i = 30; i < 33; ++i) blip[i] *= 1.5;
  EXPECT_TRUE(DetectChangePoints(blip, {.min_segment = 5}).empty());
  // An explicit penalty: a tiny one finds spurious steps in noise, a huge one none.
  EXPECT_GT(
      DetectChangePoints(History(7, 200, 0.03, 200, 0), {.min_segment = 2, .penalty = 0.5}).size(),
      3u);
  EXPECT_TRUE(DetectChangePoints(History(7, 200, 0.03, 100, 0.1), {.penalty = 1e9}).empty());
}

}  // namespace
TEST(MannWhitney, SmallestPAndTheValuesAlphaNeeds) {
  EXPECT_NEAR(SmallestMannWhitneyP(3, 3), 0.1, 1e-9);  // 2 / C(6, 3)
  EXPECT_NEAR(SmallestMannWhitneyP(4, 4), 2.0 / 70, 1e-9);
  EXPECT_EQ(SmallestMannWhitneyP(0, 3), 1.0);
  EXPECT_EQ(ValuesPerSideForAlpha(0.05), 4u);
  EXPECT_EQ(ValuesPerSideForAlpha(0.1), 3u);
  EXPECT_GT(ValuesPerSideForAlpha(0.001), 4u);
}

}  // namespace dfarm::stats
