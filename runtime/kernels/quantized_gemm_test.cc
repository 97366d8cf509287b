// The integer GEMM of the quantized conv kernels (quantized_gemm.h): the
// AVX2 kernel and the plain loops against sums written here, for depths
// around the 16-value alignment, 1 to 4 rows, odd and even channel counts,
// int8 and uint8 weights, operands at the ends of [-255, 255].
#include "runtime/kernels/quantized_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

QuantizedConvParams Params(int channels, std::mt19937& rng) {
  QuantizedConvParams q;
  q.output_offset = 3;
  q.act_min = -128;
  q.act_max = 127;
  q.round_half_up = true;
  std::uniform_real_distribution<double> multiplier(1e-4, 3e-3);
  std::uniform_int_distribution<int32_t> bias(-5000, 5000);
  for (int c = 0; c < channels; ++c) {
    int32_t m = 0;
    int shift = 0;
    QuantizeMultiplier(multiplier(rng), &m, &shift);
    q.multipliers.push_back(m);
    q.shifts.push_back(shift);
    q.bias.push_back(bias(rng));
    q.filter_offsets.push_back(c % 2 == 0 ? 0 : -128);
  }
  return q;
}

TEST(QuantizedGemmTest, SimdAndPlainLoopsGiveTheSums) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> code(0, 255);
  int compared = 0;
  for (int64_t depth : {1, 15, 16, 17, 48, 300}) {
    for (int64_t channels : {1, 2, 5, 12}) {
      const bool int8 = channels % 2 == 0;  // int8 or uint8 weights
      const QuantizedConvParams q = Params(static_cast<int>(channels), rng);
      std::vector<uint8_t> w(static_cast<size_t>(channels * depth));
      for (uint8_t& v : w) v = static_cast<uint8_t>(code(rng));
      w[0] = int8 ? 0x80 : 0;  // with offset -128 or 0: the ends of the weights' range
      w[w.size() - 1] = int8 ? 0x7f : 255;
      QuantizedWeights packed =
          int8 ? PackQuantizedWeights(reinterpret_cast<const int8_t*>(w.data()), channels, depth,
                                      q.filter_offsets)
               : PackQuantizedWeights(w.data(), channels, depth, q.filter_offsets);
      auto weight = [&](int64_t i) {
        return int8 ? static_cast<int32_t>(static_cast<int8_t>(w[i])) : static_cast<int32_t>(w[i]);
      };
      ASSERT_EQ(packed.stride % kQuantizedDepthAlign, 0);
      for (int64_t rows = 1; rows <= kQuantizedTileRows; ++rows) {
        std::vector<int16_t> x(static_cast<size_t>(kQuantizedTileRows * packed.stride), 0);
        std::vector<uint8_t> raw(static_cast<size_t>(depth));
        for (int64_t p = 0; p < rows; ++p) {
          for (uint8_t& v : raw) v = static_cast<uint8_t>(code(rng));
          raw[0] = 255;
          WidenWithOffset(raw.data(), depth, p % 2 == 0 ? -255 : 0, x.data() + p * packed.stride);
        }
        std::vector<int8_t> want(static_cast<size_t>(rows * channels));
        for (int64_t p = 0; p < rows; ++p) {
          for (int64_t c = 0; c < channels; ++c) {
            int32_t acc = 0;
            for (int64_t k = 0; k < depth; ++k) {
              acc += static_cast<int32_t>(x[p * packed.stride + k]) *
                     (weight(c * depth + k) + q.filter_offsets[c]);
            }
            want[p * channels + c] =
                static_cast<int8_t>(q.Requantize(acc + q.bias[c], static_cast<int>(c)));
          }
        }
        const std::string what = "depth " + std::to_string(depth) + ", channels " +
                                 std::to_string(channels) + ", rows " + std::to_string(rows);
        for (bool simd : {false, true}) {
          if (simd && !QuantizedGemmHasSimd()) continue;
          packed.simd = simd;
          std::vector<int8_t> got(static_cast<size_t>(rows * channels), 99);
          std::vector<int32_t> sums(static_cast<size_t>(QuantizedSumsSize(packed)));
          QuantizedGemmTile(x.data(), rows, packed, q, sums.data(), got.data(), channels);
          EXPECT_EQ(got, want) << what << (simd ? ", AVX2" : ", plain loops");
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 6 * 4 * 4 * (QuantizedGemmHasSimd() ? 2 : 1));
}

// RequantizeRow()'s 8-channel AVX2 path against Requantize(), both
// roundings, int8 and uint8: random sums over the whole int32 range and
// small ones (exact halves included: multiplier 2^30 with right shifts),
// -1 (where the high multiply's division truncates a sum of 1 - 2^31),
// multipliers from QuantizeMultiplier with left and right shifts, a channel
// count that leaves a tail.
TEST(QuantizedGemmTest, RequantizeRowMatchesRequantize) {
  if (!QuantizedGemmHasSimd()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(6);
  constexpr int kChannels = 29;
  std::uniform_real_distribution<double> log_multiplier(-12.0, 3.0);
  // Sums over the int32 range, with room for the bias (acc + bias must not
  // overflow: UBSan).
  std::uniform_int_distribution<int32_t> any(std::numeric_limits<int32_t>::min() + 5000,
                                             std::numeric_limits<int32_t>::max() - 5000);
  std::uniform_int_distribution<int32_t> small(-5000, 5000);
  int compared = 0;
  for (int round = 0; round < 200; ++round) {
    QuantizedConvParams q;
    q.round_half_up = round % 2 == 0;
    q.output_offset = small(rng) % 100;
    q.act_min = round % 3 == 0 ? -128 : 0;
    q.act_max = round % 3 == 0 ? 127 : 255;
    for (int c = 0; c < kChannels; ++c) {
      int32_t m = 0;
      int shift = 0;
      if (c % 7 == 3) {
        m = int32_t{1} << 30;  // 0.5: exact halves after the right shift
        shift = -(c % 5) - 1;
      } else {
        QuantizeMultiplier(std::exp2(log_multiplier(rng)), &m, &shift);
      }
      q.multipliers.push_back(m);
      q.shifts.push_back(shift);
      q.bias.push_back(small(rng));
    }
    std::vector<int32_t> acc(kChannels);
    for (int c = 0; c < kChannels; ++c) acc[c] = round % 4 == 1 ? any(rng) : small(rng) * 16;
    if (round % 4 >= 2) {  // both roundings
      // x = -1 times 0.5: the high multiply's sum is 1 - 2^31 and
      // its truncating division must give 0, not -1.
      for (int c = 0; c < kChannels; ++c) acc[c] = -1 - q.bias[c];
    }
    std::vector<int8_t> got8(kChannels), want8(kChannels);
    std::vector<uint8_t> got_u8(kChannels), want_u8(kChannels);
    RequantizeRow(acc.data(), kChannels, q, true, got8.data());
    RequantizeRow(acc.data(), kChannels, q, true, got_u8.data());
    for (int c = 0; c < kChannels; ++c) {
      const int32_t v = q.Requantize(acc[c] + q.bias[c], c);
      want8[c] = static_cast<int8_t>(v);
      want_u8[c] = static_cast<uint8_t>(v);
    }
    ASSERT_EQ(got8, want8) << "round " << round;
    ASSERT_EQ(got_u8, want_u8) << "round " << round;
    compared += kChannels;
  }
  EXPECT_EQ(compared, 200 * kChannels);
}

}  // namespace
}  // namespace dfarm::runtime
