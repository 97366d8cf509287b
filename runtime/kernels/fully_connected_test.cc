#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Act = tfl::ActivationFunctionType;

// x = [[1,2,3],[4,5,6]], W = [[1,0,-1],[0.5,0.5,0.5]], bias = [10,-5]:
// x W^T + bias = [[8,-2],[8,2.5]].
const std::vector<float> kX = {1, 2, 3, 4, 5, 6};
const std::vector<float> kW = {1, 0, -1, 0.5f, 0.5f, 0.5f};

struct FcGraph {
  ModelBuilder b;
  GraphRunner runner;
  runtime::Status Init(std::vector<int32_t> in_shape, std::vector<int32_t> out_shape, bool bias,
                       Act act, bool keep_num_dims) {
    int in = b.AddTensor(tfl::TensorType::FLOAT32, in_shape);
    int w = b.AddConstFloat32({2, 3}, kW);
    int bi = bias ? b.AddConstFloat32({2}, {10, -5}) : -1;
    int out = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
    b.AddFullyConnected(in, w, bi, out, act, keep_num_dims);
    b.SetInputs({in});
    b.SetOutputs({out});
    return runner.Init(b);
  }
  std::vector<float> Run() {
    EXPECT_TRUE(runner.SetInput(0, kX));
    EXPECT_TRUE(runner.Invoke().ok());
    return runner.Output(0);
  }
};

TEST(FullyConnectedTest, BiasAndRelu) {
  FcGraph g;
  ASSERT_TRUE(g.Init({2, 3}, {2, 2}, true, Act::RELU, false).ok());
  EXPECT_THAT(g.Run(), ElementsAreArray({8.0f, 0.0f, 8.0f, 2.5f}));
}

TEST(FullyConnectedTest, NoBiasFlattensLeadingDims) {
  // [1,2,3] is read as 2 rows of 3.
  FcGraph g;
  ASSERT_TRUE(g.Init({1, 2, 3}, {2, 2}, false, Act::NONE, false).ok());
  EXPECT_THAT(g.Run(), ElementsAreArray({-2.0f, 3.0f, -2.0f, 7.5f}));
}

TEST(FullyConnectedTest, KeepNumDims) {
  FcGraph g;
  runtime::Status status = g.Init({1, 2, 3}, {1, 2, 2}, true, Act::NONE, true);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_THAT(g.Run(), ElementsAreArray({8.0f, -2.0f, 8.0f, 2.5f}));
}

TEST(FullyConnectedTest, MismatchedDepthIsAnError) {
  FcGraph g;
  runtime::Status status = g.Init({1, 4}, {1, 2}, true, Act::NONE, false);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("does not split into rows of 3"));
}

}  // namespace
}  // namespace dfarm::testing
