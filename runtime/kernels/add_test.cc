#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Act = tfl::ActivationFunctionType;

struct AddGraph {
  ModelBuilder b;
  GraphRunner runner;
  runtime::Status Init(std::vector<int32_t> lhs, std::vector<int32_t> rhs, std::vector<int32_t> out,
                       Act act = Act::NONE) {
    int a = b.AddTensor(tfl::TensorType::FLOAT32, lhs);
    int c = b.AddTensor(tfl::TensorType::FLOAT32, rhs);
    int o = b.AddTensor(tfl::TensorType::FLOAT32, out);
    b.AddAdd(a, c, o, act);
    b.SetInputs({a, c});
    b.SetOutputs({o});
    return runner.Init(b);
  }
  std::vector<float> Run(const std::vector<float>& lhs, const std::vector<float>& rhs) {
    EXPECT_TRUE(runner.SetInput(0, lhs));
    EXPECT_TRUE(runner.SetInput(1, rhs));
    EXPECT_TRUE(runner.Invoke().ok());
    return runner.Output(0);
  }
};

TEST(AddTest, SameShapeWithRelu) {
  AddGraph g;
  ASSERT_TRUE(g.Init({3}, {3}, {3}, Act::RELU).ok());
  EXPECT_THAT(g.Run({1, -2, 3}, {1, 1, -5}), ElementsAre(2.0f, 0.0f, 0.0f));
}

TEST(AddTest, BroadcastsBothSides) {
  // [2,1,2] + [1,3,1] -> [2,3,2]: out[i][j][k] = a[i][k] + b[j].
  AddGraph g;
  ASSERT_TRUE(g.Init({2, 1, 2}, {1, 3, 1}, {2, 3, 2}).ok());
  EXPECT_THAT(g.Run({1, 2, 3, 4}, {10, 20, 30}),
              ElementsAreArray({11.0f, 12.0f, 21.0f, 22.0f, 31.0f, 32.0f,  //
                                13.0f, 14.0f, 23.0f, 24.0f, 33.0f, 34.0f}));
}

TEST(AddTest, BroadcastsLowerRank) {
  // [2,3] + [3]: the row is added to each row.
  AddGraph g;
  ASSERT_TRUE(g.Init({2, 3}, {3}, {2, 3}).ok());
  EXPECT_THAT(g.Run({0, 0, 0, 1, 1, 1}, {1, 2, 3}), ElementsAre(1, 2, 3, 2, 3, 4));
}

TEST(AddTest, ScalarWithReluN1To1) {
  AddGraph g;
  ASSERT_TRUE(g.Init({1}, {4}, {4}, Act::RELU_N1_TO_1).ok());
  EXPECT_THAT(g.Run({0.5f}, {-3.0f, -1.0f, 0.0f, 2.0f}), ElementsAre(-1.0f, -0.5f, 0.5f, 1.0f));
}

TEST(AddTest, Relu6) {
  AddGraph g;
  ASSERT_TRUE(g.Init({2}, {1}, {2}, Act::RELU6).ok());
  EXPECT_THAT(g.Run({-4.0f, 4.0f}, {3.0f}), ElementsAre(0.0f, 6.0f));
}

TEST(AddTest, IncompatibleShapesAreAnError) {
  AddGraph g;
  runtime::Status status = g.Init({2, 3}, {2}, {2, 3});
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (ADD): cannot broadcast [2,3] with [2]"));
}

TEST(AddTest, Int32IsUnsupported) {
  ModelBuilder b;
  int a = b.AddTensor(tfl::TensorType::INT32, {2});
  int c = b.AddTensor(tfl::TensorType::INT32, {2});
  int o = b.AddTensor(tfl::TensorType::INT32, {2});
  b.AddAdd(a, c, o);
  b.SetInputs({a, c});
  b.SetOutputs({o});
  GraphRunner runner;
  runtime::Status status = runner.Init(b);
  EXPECT_EQ(status.code(), runtime::StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("int32 inputs are not supported (float32, int8, uint8)"));
}

}  // namespace
}  // namespace dfarm::testing
