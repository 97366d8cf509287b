#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct GatherGraph {
  ModelBuilder b;
  GraphRunner runner;
  runtime::Status Init(int axis, std::vector<int32_t> indices_shape,
                       std::vector<int32_t> out_shape) {
    int params = b.AddTensor(tfl::TensorType::FLOAT32, {3, 2});
    int indices = b.AddTensor(tfl::TensorType::INT32, indices_shape);
    int o = b.AddTensor(tfl::TensorType::FLOAT32, out_shape);
    b.AddOperator(tfl::BuiltinOperator::GATHER, {params, indices}, {o},
                  tfl::BuiltinOptions::GatherOptions, [axis](flatbuffers::FlatBufferBuilder& fbb) {
                    return tfl::CreateGatherOptions(fbb, axis).Union();
                  });
    b.SetInputs({params, indices});
    b.SetOutputs({o});
    return runner.Init(b);
  }
  runtime::Status Run(const std::vector<int32_t>& indices) {
    EXPECT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_TRUE(runner.SetInput(1, indices));
    return runner.Invoke();
  }
};

TEST(GatherTest, Rows) {
  GatherGraph g;
  ASSERT_TRUE(g.Init(0, {2}, {2, 2}).ok());
  ASSERT_TRUE(g.Run({2, 0}).ok());
  EXPECT_THAT(g.runner.Output(0), ElementsAreArray({5, 6, 1, 2}));
}

TEST(GatherTest, ColumnsWithIndexMatrix) {
  // axis 1, indices [1,2] -> [3,1,2].
  GatherGraph g;
  ASSERT_TRUE(g.Init(1, {1, 2}, {3, 1, 2}).ok());
  ASSERT_TRUE(g.Run({1, 0}).ok());
  EXPECT_THAT(g.runner.Output(0), ElementsAreArray({2, 1, 4, 3, 6, 5}));
}

TEST(GatherTest, IndexOutOfRangeIsAnError) {
  GatherGraph g;
  ASSERT_TRUE(g.Init(0, {1}, {1, 2}).ok());
  runtime::Status status = g.Run({3});
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_THAT(status.message(), HasSubstr("node 0 (GATHER): index 3 is out of range [0, 3)"));
}

}  // namespace
}  // namespace dfarm::testing
