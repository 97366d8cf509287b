#include "agent/runner/accuracy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

namespace dfarm::runner {
namespace {

runtime::Tensor FloatTensor(std::vector<float>& values, std::vector<int32_t> shape) {
  runtime::Tensor t;
  t.dtype = runtime::DType::kFloat32;
  t.shape = std::move(shape);
  t.bytes = values.size() * sizeof(float);
  t.data = reinterpret_cast<std::byte*>(values.data());
  return t;
}

TEST(AccuracyTest, ErrorFigures) {
  std::vector<float> got = {1, 2, 3, 4}, ref = {1, 2.5f, 2, 4};
  OutputAccuracy a = CompareOutput(3, FloatTensor(got, {2, 2}), FloatTensor(ref, {2, 2}));
  EXPECT_EQ(a.index, 3);
  EXPECT_EQ(a.compared, 4);
  EXPECT_DOUBLE_EQ(a.mean_abs_error, 0.375);  // (0 + 0.5 + 1 + 0) / 4
  EXPECT_DOUBLE_EQ(a.max_abs_error, 1.0);
  EXPECT_DOUBLE_EQ(a.rmse, std::sqrt(1.25 / 4));
  // population std of {0, 0.5, 1, 0} around 0.375
  EXPECT_DOUBLE_EQ(a.std_abs_error,
                   std::sqrt((0.375 * 0.375 * 2 + 0.125 * 0.125 + 0.625 * 0.625) / 4));
  EXPECT_FALSE(a.top1_agree.has_value());
  // sum(ref^2) = 1 + 6.25 + 4 + 16 = 27.25 over sum(err^2) = 1.25; peak 4 - 1 = 3.
  ASSERT_TRUE(a.snr_db && a.psnr_db);
  EXPECT_NEAR(*a.snr_db, 10 * std::log10(21.8), 1e-12);
  EXPECT_NEAR(*a.psnr_db, 20 * std::log10(3 / std::sqrt(0.3125)), 1e-12);
}

TEST(AccuracyTest, DecibelsAreUnsetWhenNotFinite) {
  std::vector<float> same = {1, -2, 3}, copy = {1, -2, 3};
  OutputAccuracy exact = CompareOutput(0, FloatTensor(same, {3}), FloatTensor(copy, {3}));
  EXPECT_FALSE(exact.snr_db.has_value());  // error 0: an infinite ratio
  EXPECT_FALSE(exact.psnr_db.has_value());
  std::vector<float> got = {1, 0, 0}, zeros = {0, 0, 0};
  OutputAccuracy silent = CompareOutput(0, FloatTensor(got, {3}), FloatTensor(zeros, {3}));
  EXPECT_FALSE(silent.snr_db.has_value());  // no signal
  EXPECT_FALSE(silent.psnr_db.has_value());
  std::vector<float> twos = {2, 2, 2};
  OutputAccuracy flat = CompareOutput(0, FloatTensor(got, {3}), FloatTensor(twos, {3}));
  ASSERT_TRUE(flat.snr_db.has_value());
  EXPECT_NEAR(*flat.snr_db, 10 * std::log10(12.0 / 9.0), 1e-12);  // errors 1, 2, 2
  EXPECT_FALSE(flat.psnr_db.has_value());  // a constant reference has no range
  std::vector<float> nan = {NAN}, one = {1};
  EXPECT_FALSE(CompareOutput(0, FloatTensor(nan, {1}), FloatTensor(one, {1})).snr_db);
}

TEST(AccuracyTest, NonFiniteValuesAreCountedNotCompared) {
  std::vector<float> got = {NAN, INFINITY, 1, 2}, ref = {0, -INFINITY, NAN, 2};
  OutputAccuracy a = CompareOutput(0, FloatTensor(got, {4}), FloatTensor(ref, {4}));
  EXPECT_EQ(a.compared, 1);
  EXPECT_EQ(a.nan_count, 1);
  EXPECT_EQ(a.inf_count, 1);
  EXPECT_EQ(a.reference_nan_count, 1);
  EXPECT_EQ(a.reference_inf_count, 1);
  EXPECT_EQ(a.max_abs_error, 0);
}

TEST(AccuracyTest, TopKOfClassScores) {
  std::vector<float> ref = {0.1f, 0.9f, 0.2f, 0.3f, 0.4f, 0.5f, 0.0f};
  std::vector<float> same_top = {0.1f, 0.8f, 0.2f, 0.3f, 0.4f, 0.5f, 0.0f};
  std::vector<float> top5_only = {0.1f, 0.6f, 0.2f, 0.3f, 0.4f, 0.7f, 0.0f};
  std::vector<float> missed = {0.9f, 0.0f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f};
  auto cmp = [&](std::vector<float>& got) {
    return CompareOutput(0, FloatTensor(got, {1, 7}), FloatTensor(ref, {1, 7}));
  };
  OutputAccuracy a = cmp(same_top);
  EXPECT_EQ(a.top1_agree, true);
  EXPECT_EQ(a.top5_agree, true);
  a = cmp(top5_only);
  EXPECT_EQ(a.top1_agree, false);
  EXPECT_EQ(a.top5_agree, true);
  a = cmp(missed);
  EXPECT_EQ(a.top1_agree, false);
  EXPECT_EQ(a.top5_agree, false);
}

TEST(AccuracyTest, QuantizedValuesAreDequantized) {
  std::vector<int8_t> got = {10, -4}, ref = {12, -4};
  runtime::Tensor g, r;
  for (auto [t, v] : {std::pair{&g, &got}, std::pair{&r, &ref}}) {
    t->dtype = runtime::DType::kInt8;
    t->shape = {2};
    t->bytes = 2;
    t->data = reinterpret_cast<std::byte*>(v->data());
    t->quantized = true;
    t->scale = 0.5f;
    t->zero_point = -4;
  }
  OutputAccuracy a = CompareOutput(0, g, r);
  EXPECT_DOUBLE_EQ(a.max_abs_error, 1.0);  // 2 steps of 0.5
  EXPECT_DOUBLE_EQ(a.mean_abs_error, 0.5);
}

TEST(AccuracyTest, QuantizedOutputsAreDequantizedAndCountedInLsb) {
  std::vector<int8_t> got = {-10, 0, 5, 127}, ref = {-10, 2, 4, 124};
  auto tensor = [](std::vector<int8_t>& v) {
    runtime::Tensor t;
    t.dtype = runtime::DType::kInt8;
    t.shape = {4};
    t.bytes = v.size();
    t.data = reinterpret_cast<std::byte*>(v.data());
    t.quantized = true;
    t.scale = 0.5f;
    t.zero_point = -10;
    return t;
  };
  OutputAccuracy a = CompareOutput(0, tensor(got), tensor(ref));
  EXPECT_EQ(a.compared, 4);
  // Differences 0, 2, 1, 3 steps of 0.5.
  EXPECT_DOUBLE_EQ(a.max_abs_error, 1.5);
  EXPECT_DOUBLE_EQ(a.mean_abs_error, (0 + 1.0 + 0.5 + 1.5) / 4);
  ASSERT_TRUE(a.max_abs_error_lsb.has_value());
  EXPECT_EQ(*a.max_abs_error_lsb, Number(int64_t{3}));  // an integer count of steps

  std::vector<float> f = {1, 2, 3, 4}, g = {1, 2, 3, 5};
  EXPECT_FALSE(CompareOutput(0, FloatTensor(f, {4}), FloatTensor(g, {4})).max_abs_error_lsb);
}

TEST(AccuracyTest, AggregatesOverInputSets) {
  // Set 0: errors {0, 0.5, 1, 0}; set 1: errors {2, 0, 0, 0}, top-1 differs.
  std::vector<float> got0 = {1, 2, 3, 4}, ref0 = {1, 2.5f, 2, 4};
  std::vector<float> got1 = {3, 0, 0, 1}, ref1 = {1, 0, 0, 1};
  OutputAccuracy s0 = CompareOutput(0, FloatTensor(got0, {1, 4}), FloatTensor(ref0, {1, 4}));
  OutputAccuracy s1 = CompareOutput(0, FloatTensor(got1, {1, 4}), FloatTensor(ref1, {1, 4}));
  s1.nan_count = 2;
  OutputAccuracy a = AggregateOutputAccuracy({s0, s1});
  EXPECT_EQ(a.compared, 8);
  EXPECT_DOUBLE_EQ(a.max_abs_error, 2.0);
  EXPECT_DOUBLE_EQ(a.mean_abs_error, 3.5 / 8);
  EXPECT_NEAR(a.rmse, std::sqrt((0.25 + 1 + 4) / 8), 1e-12);
  const double mean = 3.5 / 8;
  double var = 0;
  for (double e : {0.0, 0.5, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0}) var += (e - mean) * (e - mean);
  EXPECT_NEAR(a.std_abs_error, std::sqrt(var / 8), 1e-12);
  EXPECT_EQ(a.nan_count, 2);
  // The sums combine, not the decibels: sum(ref^2) 27.25 + 2 over sum(err^2)
  // 1.25 + 4; the range of both references 0 .. 4.
  ASSERT_TRUE(a.snr_db && a.psnr_db);
  EXPECT_NEAR(*a.snr_db, 10 * std::log10(29.25 / 5.25), 1e-12);
  EXPECT_NEAR(*a.psnr_db, 20 * std::log10(4 / std::sqrt(5.25 / 8)), 1e-12);
  ASSERT_TRUE(s0.top1_agree && s1.top1_agree);
  EXPECT_TRUE(*s0.top1_agree);  // argmax 3 on both sides
  EXPECT_TRUE(*s1.top1_agree);  // argmax 0 on both sides
  ASSERT_TRUE(a.top1_agree && a.top1_agreement && a.top5_agreement);
  EXPECT_TRUE(*a.top1_agree);
  EXPECT_DOUBLE_EQ(*a.top1_agreement, 1.0);
  // A set whose top-1 differs: agree false, agreement a fraction.
  std::vector<float> got2 = {0, 5, 0, 0}, ref2 = {5, 0, 0, 0};
  OutputAccuracy s2 = CompareOutput(0, FloatTensor(got2, {1, 4}), FloatTensor(ref2, {1, 4}));
  OutputAccuracy b = AggregateOutputAccuracy({s0, s1, s2});
  EXPECT_FALSE(*b.top1_agree);
  EXPECT_DOUBLE_EQ(*b.top1_agreement, 2.0 / 3);
  EXPECT_TRUE(*b.top5_agree);  // class 0 is in the top 5 of 4 classes
  EXPECT_DOUBLE_EQ(*b.top5_agreement, 1.0);
}

}  // namespace
}  // namespace dfarm::runner
