// The integer GEMM of the quantized conv kernels (quantized_gemm.h): the
// AVX2 kernel and the plain loops against sums written here, for depths
// around the 16-value alignment, 1 to 4 rows, odd and even channel counts,
// operands at the ends of [-255, 255].
#include "runtime/kernels/quantized_gemm.h"

#include <gtest/gtest.h>

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
    for (int64_t channels : {1, 2, 5}) {
      const QuantizedConvParams q = Params(static_cast<int>(channels), rng);
      std::vector<uint8_t> w(static_cast<size_t>(channels * depth));
      for (uint8_t& v : w) v = static_cast<uint8_t>(code(rng));
      w[0] = 0;  // with offset -128 or 0: the ends of the weights' range
      w[w.size() - 1] = 255;
      QuantizedWeights packed = PackQuantizedWeights(w.data(), channels, depth, q.filter_offsets);
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
                     (static_cast<int32_t>(w[c * depth + k]) + q.filter_offsets[c]);
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
          QuantizedGemmTile(x.data(), rows, packed, q, got.data(), channels);
          EXPECT_EQ(got, want) << what << (simd ? ", AVX2" : ", plain loops");
          ++compared;
        }
      }
    }
  }
  EXPECT_GE(compared, 72);
}

}  // namespace
}  // namespace dfarm::runtime
