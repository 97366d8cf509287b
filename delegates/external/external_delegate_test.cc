#include "delegates/external/external_delegate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::delegates {
namespace {

using ::dfarm::testing::Conv2DParams;
using ::dfarm::testing::ModelBuilder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace tfl = ::dfarm::tflite;

std::string Lib(const std::string& name) {
  return std::string(DFARM_BINARY_DIR) + "/lib/lib" + name + ".so";
}

// x [1,2,2,1] -> CONV_2D 1x1 (2 filters) -> ADD(+c) -> RELU -> ADD(self, RELU6) -> out
ModelBuilder MixedModel() {
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 1}, "x");
  int filter = b.AddConstFloat32({2, 1, 1, 1}, {2, -1}, "filter");
  int bias = b.AddConstFloat32({2}, {0.5f, 0}, "bias");
  int c = b.AddConstFloat32({1}, {-1.0f}, "c");
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2});
  int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2});
  int t3 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2}, "out");
  b.AddConv2D(x, filter, bias, t1, Conv2DParams{});
  b.AddAdd(t1, c, t2);
  b.AddUnary(tfl::BuiltinOperator::RELU, t2, t3);
  b.AddAdd(t3, t3, out, tfl::ActivationFunctionType::RELU6);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

const std::vector<float> kInput = {1, -2, 3, 0.25f};

// Runs MixedModel() with `delegate` (may be null) and returns the output.
std::vector<float> RunMixed(runtime::Delegate* delegate, runtime::Placement* placement = nullptr) {
  std::vector<uint8_t> bytes = MixedModel().Build();
  std::unique_ptr<runtime::Model> model;
  EXPECT_TRUE(runtime::Model::FromBuffer("mixed.tflite", bytes, &model).ok());
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(*model, resolver);
  if (delegate != nullptr) interpreter.AddDelegate(delegate);
  runtime::Status s = interpreter.AllocateTensors();
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return {};
  std::memcpy(interpreter.inputs()[0]->data, kInput.data(), sizeof(float) * kInput.size());
  s = interpreter.Invoke();
  EXPECT_TRUE(s.ok()) << s.message();
  if (placement != nullptr) *placement = interpreter.placement();
  const runtime::Tensor* out = interpreter.outputs()[0];
  return std::vector<float>(out->data_as<float>(), out->data_as<float>() + out->num_elements());
}

TEST(ExternalDelegateTest, ExamplePluginDelegatesAddAndLeavesTheRest) {
  std::unique_ptr<runtime::Delegate> delegate;
  runtime::Status s = CreateExternalDelegate({{"path", Lib("dfarm_example_delegate")}}, &delegate);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(delegate->name(), "example");
  runtime::Placement placement;
  std::vector<float> got = RunMixed(delegate.get(), &placement);
  EXPECT_EQ(got, RunMixed(nullptr));
  EXPECT_EQ(placement.partitions, 2);
  ASSERT_EQ(placement.nodes.size(), 4u);
  EXPECT_EQ(placement.nodes[0].delegate, "cpu");
  EXPECT_EQ(placement.nodes[0].reason, "example: CONV_2D is not supported (only ADD and SUB)");
  EXPECT_EQ(placement.nodes[1].delegate, "example");
  EXPECT_EQ(placement.nodes[2].delegate, "cpu");
  EXPECT_EQ(placement.nodes[3].delegate, "example");
  EXPECT_EQ(placement.nodes[3].partition, 1);
}

TEST(ExternalDelegateTest, PartitionOptionsApply) {
  std::unique_ptr<runtime::Delegate> delegate;
  ASSERT_TRUE(
      CreateExternalDelegate(
          {{"path", Lib("dfarm_example_delegate")}, {"max_delegated_partitions", "1"}}, &delegate)
          .ok());
  runtime::Placement placement;
  EXPECT_EQ(RunMixed(delegate.get(), &placement), RunMixed(nullptr));
  EXPECT_EQ(placement.partitions, 1);
  EXPECT_EQ(placement.nodes[3].delegate, "cpu");
  EXPECT_THAT(placement.nodes[3].reason, HasSubstr("max_delegated_partitions 1"));
}

TEST(ExternalDelegateTest, NodeRangeKeepsOtherNodesOnTheCpu) {
  std::unique_ptr<runtime::Delegate> delegate;
  ASSERT_TRUE(CreateExternalDelegate({{"path", Lib("dfarm_example_delegate")},
                                      {"first_delegate_node_index", "0"},
                                      {"last_delegate_node_index", "2"}},
                                     &delegate)
                  .ok());
  runtime::Placement placement;
  EXPECT_EQ(RunMixed(delegate.get(), &placement), RunMixed(nullptr));
  EXPECT_EQ(placement.partitions, 1);
  EXPECT_EQ(placement.nodes[1].delegate, "example");
  EXPECT_EQ(placement.nodes[3].delegate, "cpu");
  EXPECT_EQ(placement.nodes[3].reason,
            "example: outside first_delegate_node_index..last_delegate_node_index 0..2");
}

// libdfarm_perturb_delegate.so: the example plugin's claims and results,
// except node perturb_node:N's output, which is off by delta.
TEST(ExternalDelegateTest, PerturbDelegatePerturbsOnlyTheNamedNode) {
  std::unique_ptr<runtime::Delegate> correct;
  ASSERT_TRUE(CreateExternalDelegate({{"path", Lib("dfarm_perturb_delegate")}}, &correct).ok());
  runtime::Placement placement;
  const std::vector<float> reference = RunMixed(nullptr);
  EXPECT_EQ(RunMixed(correct.get(), &placement), reference);
  EXPECT_EQ(placement.nodes[1].delegate, "perturb_delegate");
  EXPECT_EQ(placement.nodes[3].delegate, "perturb_delegate");
  std::unique_ptr<runtime::Delegate> bad;
  ASSERT_TRUE(
      CreateExternalDelegate(
          {{"path", Lib("dfarm_perturb_delegate")}, {"perturb_node", "3"}, {"delta", "0.5"}}, &bad)
          .ok());
  const std::vector<float> got = RunMixed(bad.get());
  ASSERT_EQ(got.size(), reference.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], reference[i] + 0.5f) << i;
  std::unique_ptr<runtime::Delegate> typo;
  runtime::Status s = CreateExternalDelegate(
      {{"path", Lib("dfarm_perturb_delegate")}, {"perturb_node", "x"}}, &typo);
  EXPECT_THAT(s.message(), HasSubstr("perturb_node 'x' is not a node index"));
}

TEST(ExternalDelegateTest, MissingFile) {
  std::unique_ptr<runtime::Delegate> delegate;
  runtime::Status s = CreateExternalDelegate({{"path", "/nonexistent/libnope.so"}}, &delegate);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_EQ(s.message(), "external delegate plugin '/nonexistent/libnope.so' does not exist");
}

TEST(ExternalDelegateTest, NotASharedLibrary) {
  std::unique_ptr<runtime::Delegate> delegate;
  const std::string path = std::string(DFARM_SOURCE_DIR) + "/delegates/registry.cc";
  runtime::Status s = CreateExternalDelegate({{"path", path}}, &delegate);
  EXPECT_THAT(s.message(), HasSubstr("failed to load external delegate plugin '" + path + "': "));
}

TEST(ExternalDelegateTest, MissingSymbol) {
  std::unique_ptr<runtime::Delegate> delegate;
  const std::string path = Lib("dfarm_bad_plugin_nosymbol");
  runtime::Status s = CreateExternalDelegate({{"path", path}}, &delegate);
  EXPECT_EQ(s.message(), "external delegate plugin '" + path +
                             "' has no symbol 'dfarm_delegate_plugin_get_api' (not a "
                             "DelegateFarm delegate plugin)");
}

TEST(ExternalDelegateTest, VersionMismatch) {
  std::unique_ptr<runtime::Delegate> delegate;
  const std::string path = Lib("dfarm_bad_plugin_version");
  runtime::Status s = CreateExternalDelegate({{"path", path}}, &delegate);
  EXPECT_EQ(s.message(), "external delegate plugin '" + path +
                             "' was built for plugin API version 2, but this runtime takes "
                             "version 1");
}

TEST(ExternalDelegateTest, MissingPathAndUnknownPluginOption) {
  std::unique_ptr<runtime::Delegate> delegate;
  EXPECT_THAT(CreateExternalDelegate({}, &delegate).message(), HasSubstr("needs option 'path'"));
  runtime::Status s = CreateExternalDelegate(
      {{"path", Lib("dfarm_example_delegate")}, {"precision", "fp16"}}, &delegate);
  EXPECT_EQ(s.code(), runtime::StatusCode::kError);
  EXPECT_EQ(s.message(), "external delegate plugin '" + Lib("dfarm_example_delegate") +
                             "': plugin 'example' create failed: the example delegate has no "
                             "option 'precision'");
}

}  // namespace
}  // namespace dfarm::delegates
