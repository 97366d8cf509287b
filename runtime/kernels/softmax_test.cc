#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::FloatNear;
using ::testing::Pointwise;

using Op = tfl::BuiltinOperator;

std::vector<float> RunNorm(Op code, std::vector<int32_t> shape, const std::vector<float>& input,
                           float beta = 1.0f) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, shape);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, shape);
  if (code == Op::SOFTMAX) {
    b.AddOperator(code, {in}, {out}, tfl::BuiltinOptions::SoftmaxOptions,
                  [beta](flatbuffers::FlatBufferBuilder& fbb) {
                    return tfl::CreateSoftmaxOptions(fbb, beta).Union();
                  });
  } else {
    b.AddOperator(code, {in}, {out});
  }
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return {};
  EXPECT_TRUE(runner.SetInput(0, input));
  EXPECT_TRUE(runner.Invoke().ok());
  return runner.Output(0);
}

// Softmax of each row of `x` (rows of `depth`) in double precision.
std::vector<float> Expected(const std::vector<float>& x, int depth, double beta, bool log) {
  std::vector<float> out;
  for (size_t r = 0; r < x.size(); r += depth) {
    double sum = 0;
    for (int i = 0; i < depth; ++i) sum += std::exp(beta * x[r + i]);
    for (int i = 0; i < depth; ++i) {
      double p = std::exp(beta * x[r + i]) / sum;
      out.push_back(static_cast<float>(log ? std::log(p) : p));
    }
  }
  return out;
}

const std::vector<float> kX = {1, 2, 3, -1, 0, 50};

TEST(SoftmaxTest, RowsWithBeta) {
  EXPECT_THAT(RunNorm(Op::SOFTMAX, {2, 3}, kX, 0.5f),
              Pointwise(FloatNear(1e-6f), Expected(kX, 3, 0.5, false)));
}

TEST(SoftmaxTest, LogSoftmax) {
  EXPECT_THAT(RunNorm(Op::LOG_SOFTMAX, {2, 3}, kX),
              Pointwise(FloatNear(1e-5f), Expected(kX, 3, 1.0, true)));
}

TEST(L2NormalizationTest, DividesByTheRowNorm) {
  EXPECT_THAT(RunNorm(Op::L2_NORMALIZATION, {2, 2}, {3, 4, 0, 0}),
              Pointwise(FloatNear(1e-6f), {0.6f, 0.8f, 0.0f, 0.0f}));
}

}  // namespace
}  // namespace dfarm::testing
