#include "runtime/delegate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::runtime {
namespace {

using ::dfarm::testing::ModelBuilder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace tfl = ::dfarm::tflite;

struct Counters {
  int init = 0, prepare = 0, invoke = 0;
  std::vector<std::string> partitions;  // per Init(): "nodes [0,2] in [0] out [1,3]"
};

std::string Indices(const std::vector<Tensor*>& tensors) {
  std::string s;
  for (const Tensor* t : tensors) {
    if (!s.empty()) s += ",";
    s += std::to_string(t->index);
  }
  return "[" + s + "]";
}

// Runs float32 ADD (same shapes, or a one-element rhs) and RELU itself, so
// its results can be compared with the reference kernels.
class FakeKernel : public DelegateKernel {
 public:
  explicit FakeKernel(Counters* counters) : counters_(counters) {}
  Status Init(const Partition& partition) override {
    ++counters_->init;
    if (partition.nodes.empty()) return Status::Error("empty partition");
    std::string nodes;
    for (const Node* n : partition.nodes) {
      if (!nodes.empty()) nodes += ",";
      nodes += std::to_string(n->index);
    }
    counters_->partitions.push_back("nodes [" + nodes + "] in " + Indices(partition.inputs) +
                                    " out " + Indices(partition.outputs));
    return Status::Ok();
  }
  Status Prepare(const Partition& partition) override {
    ++counters_->prepare;
    for (const Tensor* t : partition.inputs) {
      if (t->data == nullptr) return Status::Error("input without storage");
    }
    return Status::Ok();
  }
  Status Invoke(const Partition& partition) override {
    ++counters_->invoke;
    for (const Node* node : partition.nodes) {
      float* out = node->outputs[0]->data_as<float>();
      const float* a = node->inputs[0]->data_as<float>();
      const int64_t n = node->outputs[0]->num_elements();
      if (node->code == tfl::BuiltinOperator::RELU) {
        for (int64_t i = 0; i < n; ++i) out[i] = std::max(a[i], 0.0f);
        continue;
      }
      const Tensor* rhs = node->inputs[1];
      const float* b = rhs->data_as<float>();
      const bool scalar = rhs->num_elements() == 1;
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[scalar ? 0 : i];
    }
    return Status::Ok();
  }

 private:
  Counters* counters_;
};

class FakeDelegate : public Delegate {
 public:
  FakeDelegate(std::string name, std::set<tfl::BuiltinOperator> ops,
               DelegatePartitionOptions options = {})
      : Delegate(std::move(name), options), ops_(std::move(ops)) {}

  Status CheckNode(const Node& node) const override {
    ++checked;
    if (fail_check_) return Status::Error("the device went away");
    if (ops_.count(node.code) == 0) {
      return Status::Unsupported(node.op_name + " is not supported");
    }
    for (const Tensor* t : node.inputs) {
      if (t != nullptr && t->dtype != DType::kFloat32) {
        return Status::Unsupported(node.op_name + " from " + DTypeName(t->dtype) +
                                   " is not supported");
      }
    }
    return Status::Ok();
  }
  std::unique_ptr<DelegateKernel> CreateKernel() override {
    return std::make_unique<FakeKernel>(&counters);
  }

  Counters counters;
  mutable int checked = 0;  // CheckNode() calls
  bool fail_check_ = false;

 private:
  std::set<tfl::BuiltinOperator> ops_;
};

// x [4] -> ADD(+1) -> RELU -> ADD(+x) -> RELU -> ADD(+1) -> out: ADD and RELU
// alternate along one chain.
ModelBuilder AlternatingChain() {
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "x");
  int one = b.AddConstFloat32({1}, {1.0f}, "one");
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t3 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t4 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "out");
  b.AddAdd(x, one, t1);
  b.AddUnary(tfl::BuiltinOperator::RELU, t1, t2);
  b.AddAdd(t2, x, t3);
  b.AddUnary(tfl::BuiltinOperator::RELU, t3, t4);
  b.AddAdd(t4, one, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

// TFLite's acyclicity case: node 0 (ADD) feeds RELU (node 1); node 2 (ADD)
// reads only the input; node 3 (ADD) joins 1 and 2. ADD nodes 0 and 2 share a
// partition; 3 cannot join them (it depends on RELU, which depends on 0).
ModelBuilder Diamond() {
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "x");
  int t0 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "out");
  b.AddAdd(x, x, t0);
  b.AddUnary(tfl::BuiltinOperator::RELU, t0, t1);
  b.AddAdd(x, x, t2);
  b.AddAdd(t1, t2, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

class DelegateTest : public ::testing::Test {
 protected:
  // Loads the model and allocates with `delegates`; returns AllocateTensors().
  Status Load(const ModelBuilder& builder, std::vector<Delegate*> delegates,
              const InterpreterOptions& options = {}) {
    bytes_ = builder.Build();
    DFARM_RETURN_IF_ERROR(Model::FromBuffer("test.tflite", bytes_, &model_));
    resolver_.AddAllReferenceOps();
    interpreter_ = std::make_unique<Interpreter>(*model_, resolver_, options);
    for (Delegate* d : delegates) interpreter_->AddDelegate(d);
    return interpreter_->AllocateTensors();
  }

  std::vector<float> Run(const std::vector<float>& input) {
    if (!input.empty()) {  // an empty tensor may have no data at all
      std::memcpy(interpreter_->inputs()[0]->data, input.data(), input.size() * sizeof(float));
    }
    EXPECT_TRUE(interpreter_->Invoke().ok());
    const Tensor* out = interpreter_->outputs()[0];
    return std::vector<float>(out->data_as<float>(), out->data_as<float>() + out->num_elements());
  }

  // The same model on the reference kernels only.
  std::vector<float> Reference(const ModelBuilder& builder, const std::vector<float>& input) {
    std::vector<uint8_t> bytes = builder.Build();
    std::unique_ptr<Model> model;
    EXPECT_TRUE(Model::FromBuffer("ref.tflite", bytes, &model).ok());
    OpResolver resolver;
    resolver.AddAllReferenceOps();
    Interpreter interpreter(*model, resolver);
    EXPECT_TRUE(interpreter.AllocateTensors().ok());
    std::memcpy(interpreter.inputs()[0]->data, input.data(), input.size() * sizeof(float));
    EXPECT_TRUE(interpreter.Invoke().ok());
    const Tensor* out = interpreter.outputs()[0];
    return std::vector<float>(out->data_as<float>(), out->data_as<float>() + out->num_elements());
  }

  std::vector<std::string> Where() const {
    std::vector<std::string> where;
    for (const NodePlacement& p : interpreter_->placement().nodes) {
      std::string w = p.op + "@" + p.delegate;
      if (p.partition >= 0) {
        w += '#';
        w += std::to_string(p.partition);
      }
      where.push_back(w);
    }
    return where;
  }

  std::vector<uint8_t> bytes_;
  std::unique_ptr<Model> model_;
  OpResolver resolver_;
  std::unique_ptr<Interpreter> interpreter_;
};

const std::vector<float> kInput = {-3.0f, -0.5f, 0.25f, 2.0f};

TEST_F(DelegateTest, WithoutDelegatesEveryNodeIsOnTheCpu) {
  ASSERT_TRUE(Load(AlternatingChain(), {}).ok());
  EXPECT_EQ(interpreter_->placement().partitions, 0);
  EXPECT_THAT(Where(), ElementsAre("ADD@cpu", "RELU@cpu", "ADD@cpu", "RELU@cpu", "ADD@cpu"));
  for (const NodePlacement& p : interpreter_->placement().nodes) EXPECT_EQ(p.reason, "");
}

TEST_F(DelegateTest, AlternatingOpsMakeOnePartitionPerSupportedNode) {
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD});
  ASSERT_TRUE(Load(AlternatingChain(), {&add}).ok());
  const Placement& placement = interpreter_->placement();
  EXPECT_EQ(placement.partitions, 3);
  EXPECT_THAT(Where(),
              ElementsAre("ADD@fake#0", "RELU@cpu", "ADD@fake#1", "RELU@cpu", "ADD@fake#2"));
  EXPECT_EQ(placement.nodes[1].reason, "fake: RELU is not supported");
  EXPECT_EQ(placement.nodes[0].reason, "");
  EXPECT_EQ(add.counters.init, 3);
  EXPECT_EQ(add.counters.prepare, 3);
  EXPECT_EQ(Run(kInput), Reference(AlternatingChain(), kInput));
  EXPECT_EQ(add.counters.invoke, 3);
}

TEST_F(DelegateTest, FullySupportedGraphIsOnePartition) {
  FakeDelegate both("fake", {tfl::BuiltinOperator::ADD, tfl::BuiltinOperator::RELU});
  ASSERT_TRUE(Load(AlternatingChain(), {&both}).ok());
  EXPECT_EQ(interpreter_->placement().partitions, 1);
  EXPECT_THAT(Where(),
              ElementsAre("ADD@fake#0", "RELU@fake#0", "ADD@fake#0", "RELU@fake#0", "ADD@fake#0"));
  EXPECT_EQ(Run(kInput), Reference(AlternatingChain(), kInput));
  EXPECT_EQ(both.counters.invoke, 1);
}

TEST_F(DelegateTest, IndependentNodesShareAPartitionWithoutACycle) {
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD});
  ASSERT_TRUE(Load(Diamond(), {&add}).ok());
  EXPECT_EQ(interpreter_->placement().partitions, 2);
  EXPECT_THAT(Where(), ElementsAre("ADD@fake#0", "RELU@cpu", "ADD@fake#0", "ADD@fake#1"));
  EXPECT_EQ(Run(kInput), Reference(Diamond(), kInput));
}

TEST_F(DelegateTest, PartitionInputsAndOutputs) {
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD});
  ASSERT_TRUE(Load(Diamond(), {&add}).ok());
  // Tensors: x=0, t0=1, t1=2, t2=3, out=4. Partition 0 (nodes 0 and 2) reads
  // x and writes t0 (for RELU) and t2 (for node 3); partition 1 writes out.
  EXPECT_THAT(add.counters.partitions,
              ElementsAre("nodes [0,2] in [0] out [1,3]", "nodes [3] in [2,3] out [4]"));
}

TEST_F(DelegateTest, MinNodesPerPartitionFallsBackWithAReason) {
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD}, {0, 2, false});
  ASSERT_TRUE(Load(Diamond(), {&add}).ok());
  EXPECT_EQ(interpreter_->placement().partitions, 1);
  EXPECT_THAT(Where(), ElementsAre("ADD@fake#0", "RELU@cpu", "ADD@fake#0", "ADD@cpu"));
  EXPECT_EQ(interpreter_->placement().nodes[3].reason,
            "fake: its partition has 1 node, fewer than min_nodes_per_partition 2");
  EXPECT_EQ(Run(kInput), Reference(Diamond(), kInput));
}

TEST_F(DelegateTest, MaxDelegatedPartitionsKeepsTheLargest) {
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD}, {1, 1, false});
  ASSERT_TRUE(Load(Diamond(), {&add}).ok());
  EXPECT_EQ(interpreter_->placement().partitions, 1);
  EXPECT_THAT(Where(), ElementsAre("ADD@fake#0", "RELU@cpu", "ADD@fake#0", "ADD@cpu"));
  EXPECT_THAT(interpreter_->placement().nodes[3].reason, HasSubstr("max_delegated_partitions 1"));
  EXPECT_EQ(Run(kInput), Reference(Diamond(), kInput));
}

TEST_F(DelegateTest, RequireFullDelegationFailsWhenANodeFallsBack) {
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD}, {0, 1, true});
  Status s = Load(AlternatingChain(), {&add});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message(),
            "model 'test.tflite': delegate 'fake' requires full delegation, but 2 nodes would fall "
            "back to the CPU, first node 1 (RELU) (fake: RELU is not supported)");
  EXPECT_EQ(add.counters.init, 0);
}

TEST_F(DelegateTest, RequireFullDelegationPassesWhenEverythingIsClaimed) {
  FakeDelegate both("fake", {tfl::BuiltinOperator::ADD, tfl::BuiltinOperator::RELU}, {0, 1, true});
  ASSERT_TRUE(Load(AlternatingChain(), {&both}).ok());
  EXPECT_EQ(Run(kInput), Reference(AlternatingChain(), kInput));
}

TEST_F(DelegateTest, StackedDelegatesClaimInOrderCpuLast) {
  FakeDelegate relu("first", {tfl::BuiltinOperator::RELU});
  FakeDelegate add("second", {tfl::BuiltinOperator::ADD, tfl::BuiltinOperator::RELU});
  ASSERT_TRUE(Load(AlternatingChain(), {&relu, &add}).ok());
  // "first" takes both RELUs; "second" then sees them as taken, so its ADDs
  // stay three partitions.
  EXPECT_EQ(interpreter_->placement().partitions, 5);
  EXPECT_THAT(Where(), ElementsAre("ADD@second#0", "RELU@first#1", "ADD@second#2", "RELU@first#3",
                                   "ADD@second#4"));
  EXPECT_EQ(interpreter_->placement().nodes[0].reason, "");
  EXPECT_EQ(Run(kInput), Reference(AlternatingChain(), kInput));
}

TEST_F(DelegateTest, StackedReasonsNameEachDelegate) {
  FakeDelegate a("a", {tfl::BuiltinOperator::ADD});
  FakeDelegate b("b", {tfl::BuiltinOperator::ADD});
  ASSERT_TRUE(Load(AlternatingChain(), {&a, &b}).ok());
  EXPECT_EQ(interpreter_->placement().nodes[1].reason,
            "a: RELU is not supported; b: RELU is not supported");
  EXPECT_EQ(b.counters.init, 0);  // a took every ADD
}

TEST_F(DelegateTest, DelegateRunsAnOpTheCpuLacks) {
  // The reference has no kernel for ADD here; the delegate runs it.
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD});
  bytes_ = AlternatingChain().Build();
  ASSERT_TRUE(Model::FromBuffer("test.tflite", bytes_, &model_).ok());
  resolver_.AddRelu();
  interpreter_ = std::make_unique<Interpreter>(*model_, resolver_);
  interpreter_->AddDelegate(&add);
  ASSERT_TRUE(interpreter_->AllocateTensors().ok());
  EXPECT_EQ(Run(kInput), Reference(AlternatingChain(), kInput));
}

TEST_F(DelegateTest, FailedCheckIsAnErrorNotUnsupported) {
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD});
  add.fail_check_ = true;
  Status s = Load(AlternatingChain(), {&add});
  EXPECT_EQ(s.code(), StatusCode::kError);
  EXPECT_EQ(s.message(),
            "model 'test.tflite': delegate 'fake' failed to check node 0 (ADD): the device went "
            "away");
}

TEST_F(DelegateTest, FoldedNodesAreNotOffered) {
  ModelBuilder b;
  int w = b.AddConstFloat16({4}, {1, 2, 3, 4}, "w16");
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "x");
  int wf = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "out");
  b.AddDequantize(w, wf);
  b.AddAdd(x, wf, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD, tfl::BuiltinOperator::DEQUANTIZE});
  ASSERT_TRUE(Load(b, {&add}).ok());
  // The DEQUANTIZE of constant weights is folded at load, so it is not offered.
  const Placement& p = interpreter_->placement();
  EXPECT_TRUE(p.nodes[0].folded);
  EXPECT_EQ(p.nodes[0].delegate, "cpu");
  EXPECT_EQ(p.nodes[1].delegate, "fake");
  EXPECT_THAT(Run(kInput), ElementsAre(-2.0f, 1.5f, 3.25f, 6.0f));
}

TEST_F(DelegateTest, NodesTouchingATensorSizedAtPrepareStayOnTheCpu) {
  // x -> ADD(x, x) -> t0 declared [] -> RELU -> t1 [4] -> ADD(+1) -> out: the
  // delegate would see t0 as [], so neither of its nodes is offered.
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "x");
  int one = b.AddConstFloat32({1}, {1.0f}, "one");
  int t0 = b.AddTensor(tfl::TensorType::FLOAT32, {}, "t0");
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "t1");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "out");
  b.AddAdd(x, x, t0);
  b.AddUnary(tfl::BuiltinOperator::RELU, t0, t1);
  b.AddAdd(t1, one, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  FakeDelegate fake("fake", {tfl::BuiltinOperator::ADD, tfl::BuiltinOperator::RELU});
  InterpreterOptions options;
  options.fold_activations = false;  // else the RELU runs in the ADD, and t0 is never sized
  Status s = Load(b, {&fake}, options);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(Where(), ElementsAre("ADD@cpu", "RELU@cpu", "ADD@fake#0"));
  EXPECT_EQ(interpreter_->placement().nodes[0].reason,
            "fake: tensor 2 't0' is declared [] and sized only at Prepare");
  EXPECT_THAT(interpreter_->tensor(t0).shape, ElementsAre(4));
  EXPECT_THAT(Run(kInput), ElementsAre(1.0f, 1.0f, 1.5f, 5.0f));
}

TEST_F(DelegateTest, ADynamicBatchIsOfferedOnceItsShapesAreFixed) {
  // x declared [1,4] with shape_signature [-1,4] (a Keras model's dynamic
  // batch), as every tensor after it: Prepare fixes the batch at the
  // declared 1 before the delegate is asked, so the graph is delegated
  // whole, as a static one.
  ModelBuilder dynamic;
  int x = dynamic.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "x");
  int one = dynamic.AddConstFloat32({1}, {1.0f}, "one");
  int t1 = dynamic.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
  int t2 = dynamic.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
  int out = dynamic.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
  for (int t : {x, t1, t2, out}) dynamic.SetShapeSignature(t, {-1, 4});
  dynamic.AddAdd(x, one, t1);
  dynamic.AddUnary(tfl::BuiltinOperator::RELU, t1, t2);
  dynamic.AddAdd(t2, x, out);
  dynamic.SetInputs({x});
  dynamic.SetOutputs({out});
  FakeDelegate fake("fake", {tfl::BuiltinOperator::ADD, tfl::BuiltinOperator::RELU});
  Status s = Load(dynamic, {&fake});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(Where(), ElementsAre("ADD@fake#0", "RELU@fake#0", "ADD@fake#0"));
  EXPECT_EQ(interpreter_->placement().partitions, 1);
  for (const NodePlacement& p : interpreter_->placement().nodes) EXPECT_EQ(p.reason, "");
  EXPECT_THAT(interpreter_->tensor(out).shape, ElementsAre(1, 4));
  EXPECT_THAT(Run(kInput), ElementsAre(-3.0f, 0.0f, 1.5f, 5.0f));  // max(x + 1, 0) + x
}

TEST_F(DelegateTest, ADynamicShapeOurKernelsDoNotComputeKeepsTheDeclaredOne) {
  // x -> a custom op we have no kernel for (the delegate takes it) -> t
  // declared [1,4] with [-1,4] -> ADD -> out: t keeps its declared shape
  // (the one TFLite gives a delegate) and both nodes are offered.
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "x");
  int t = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "t");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
  b.SetShapeSignature(t, {-1, 4});
  b.AddCustomOperator("VendorOp", {x}, {t});
  b.AddAdd(t, x, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  FakeDelegate fake("fake", {tfl::BuiltinOperator::CUSTOM, tfl::BuiltinOperator::ADD});
  Status s = Load(b, {&fake});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(Where(), ElementsAre("VendorOp@fake#0", "ADD@fake#0"));
  EXPECT_THAT(interpreter_->tensor(t).shape, ElementsAre(1, 4));
}

TEST_F(DelegateTest, EveryMissingOpLeftToTheCpuIsNamed) {
  // Two custom ops without a kernel around an ADD the delegate takes: both
  // are left to the CPU, and the refusal names both.
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {4}, "x");
  int t0 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4});
  b.AddCustomOperator("VendorA", {x}, {t0});
  b.AddAdd(t0, t0, t1);
  b.AddCustomOperator("VendorB", {t1}, {out});
  b.SetInputs({x});
  b.SetOutputs({out});
  FakeDelegate fake("fake", {tfl::BuiltinOperator::ADD});
  Status s = Load(b, {&fake});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message(),
            "model 'test.tflite' node 0 (VendorA): op (custom) is not supported (no kernel "
            "registered); 2 ops of this model have no kernel: VendorA (custom; node 0), VendorB "
            "(custom; node 2)");
}

TEST_F(DelegateTest, NodesOurKernelsRefuseAreNeverOffered) {
  // x [2,3] -> RESHAPE -> out declared [4,4]: our kernel refuses it before
  // the delegate that claims RESHAPE is asked (a delegate trusting the
  // declared shape would read 16 floats of a 6-float input).
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3}, "x");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {4, 4}, "out");
  b.AddReshape(x, out, {4, 4});
  b.SetInputs({x});
  b.SetOutputs({out});
  FakeDelegate fake("fake", {tfl::BuiltinOperator::RESHAPE});
  Status s = Load(b, {&fake});
  EXPECT_EQ(s.code(), StatusCode::kError);
  EXPECT_EQ(s.message(),
            "model 'test.tflite' node 0 (RESHAPE): cannot reshape [2,3] (6 elements) to [4,4]");
  EXPECT_EQ(fake.checked, 0);
  EXPECT_EQ(fake.counters.init, 0);
}

TEST_F(DelegateTest, NodesWithAnEmptyTensorStayOnTheCpu) {
  // ADD of two [2,0,3] tensors: TFLite's result is empty, and so is ours;
  // no delegate is offered it (XNNPACK aborts on a dimension 0).
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {2, 0, 3}, "x");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2, 0, 3}, "out");
  b.AddAdd(x, x, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  FakeDelegate fake("fake", {tfl::BuiltinOperator::ADD});
  Status s = Load(b, {&fake});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(Where(), ElementsAre("ADD@cpu"));
  EXPECT_EQ(interpreter_->placement().nodes[0].reason,
            "fake: tensor 0 'x' [2,0,3] is empty; no delegate is offered an empty tensor");
  EXPECT_EQ(fake.checked, 0);
  EXPECT_TRUE(Run({}).empty());
}

Status PrepareUnsupported(Node&) { return Status::Unsupported("no such ADD here"); }
Status EvalNothing(Node&) { return Status::Ok(); }

TEST_F(DelegateTest, NodeOurKernelDeclinesMayStillBeDelegated) {
  // Our ADD answers kUnsupported at Prepare: the delegate may take the node;
  // without it, that answer is the interpreter's.
  static const OpRegistration kDeclines = {&PrepareUnsupported, &EvalNothing};
  bytes_ = AlternatingChain().Build();
  ASSERT_TRUE(Model::FromBuffer("test.tflite", bytes_, &model_).ok());
  resolver_.AddAllReferenceOps();
  resolver_.AddBuiltin(tfl::BuiltinOperator::ADD, &kDeclines);
  FakeDelegate add("fake", {tfl::BuiltinOperator::ADD});
  interpreter_ = std::make_unique<Interpreter>(*model_, resolver_);
  interpreter_->AddDelegate(&add);
  ASSERT_TRUE(interpreter_->AllocateTensors().ok());
  EXPECT_THAT(Where(),
              ElementsAre("ADD@fake#0", "RELU@cpu", "ADD@fake#1", "RELU@cpu", "ADD@fake#2"));
  EXPECT_EQ(Run(kInput), Reference(AlternatingChain(), kInput));

  Interpreter alone(*model_, resolver_);
  Status s = alone.AllocateTensors();
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message(), "model 'test.tflite' node 0 (ADD): no such ADD here");
}

}  // namespace
}  // namespace dfarm::runtime
