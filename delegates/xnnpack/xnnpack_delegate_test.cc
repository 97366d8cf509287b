#include "delegates/xnnpack/xnnpack_delegate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "delegates/conformance/conformance.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::delegates {
namespace {

using ::dfarm::testing::Conv2DParams;
using ::dfarm::testing::ModelBuilder;
using ::testing::HasSubstr;
namespace tfl = ::dfarm::tflite;
using runtime::Status;
using runtime::StatusCode;

std::unique_ptr<runtime::Delegate> MakeXnnpack(DelegateOptions options = {}) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate(options, &d);
  EXPECT_TRUE(s.ok()) << s.message();
  return d;
}

struct RunResult {
  Status status;
  std::vector<std::vector<float>> outputs;
  runtime::Placement placement;
  size_t invoked_nodes = 0;
};

// Loads `model`, runs it once on seeded inputs in [-1, 1] (float32 inputs
// only) with `delegate` (null: reference kernels).
RunResult RunModel(const runtime::Model& model, runtime::Delegate* delegate, bool invoke = true) {
  RunResult r;
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(model, resolver);
  if (delegate != nullptr) interpreter.AddDelegate(delegate);
  r.status = interpreter.AllocateTensors();
  if (!r.status.ok()) return r;
  r.placement = interpreter.placement();
  r.invoked_nodes = interpreter.invoked_nodes_size();
  if (!invoke) return r;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (runtime::Tensor* t : interpreter.inputs()) {
    if (t->dtype != runtime::DType::kFloat32) {
      r.status = Status::Error("input is " + runtime::DescribeTensor(*t));
      return r;
    }
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data_as<float>()[i] = u(rng);
  }
  r.status = interpreter.Invoke();
  for (const runtime::Tensor* t : interpreter.outputs()) {
    r.outputs.emplace_back(t->data_as<float>(), t->data_as<float>() + t->num_elements());
  }
  return r;
}

std::unique_ptr<runtime::Model> Load(const ModelBuilder& b, const std::string& name) {
  std::vector<uint8_t> bytes = b.Build();
  std::unique_ptr<runtime::Model> model;
  Status s = runtime::Model::FromBuffer(name, bytes, &model);
  EXPECT_TRUE(s.ok()) << s.message();
  return model;
}

// x [1,6,6,2] -> CONV_2D 3x3 SAME -> TANH -> CONV_2D 3x3 SAME -> out
ModelBuilder ConvTanhConv() {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "x");
  std::vector<float> w(3 * 3 * 3 * 2), bias = {0.1f, -0.2f, 0.3f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  const int f1 = b.AddConstFloat32({3, 3, 3, 2}, w);
  const int b1 = b.AddConstFloat32({3}, bias);
  std::vector<float> w2(2 * 3 * 3 * 3);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = std::cos(static_cast<float>(i));
  const int f2 = b.AddConstFloat32({2, 3, 3, 3}, w2);
  const int b2 = b.AddConstFloat32({2}, {0.5f, -0.5f});
  const int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "out");
  Conv2DParams same{tfl::Padding::SAME};
  b.AddConv2D(x, f1, b1, t1, same);
  b.AddUnary(tfl::BuiltinOperator::TANH, t1, t2);
  b.AddConv2D(t2, f2, b2, out, same);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

void ExpectNear(const std::vector<std::vector<float>>& got,
                const std::vector<std::vector<float>>& want, double abs, double rel,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].size(), want[o].size()) << what;
    int bad = 0;
    for (size_t i = 0; i < want[o].size(); ++i) {
      const double tol = abs + rel * std::fabs(want[o][i]);
      if (!(std::fabs(got[o][i] - want[o][i]) <= tol) && bad++ < 3) {
        ADD_FAILURE() << what << " output " << o << " [" << i << "]: " << got[o][i]
                      << " vs reference " << want[o][i];
      }
    }
    EXPECT_EQ(bad, 0) << what << " output " << o;
  }
}

// Every op case of the shared catalog that xnnpack claims matches the
// reference kernels within the float32 tolerance; the ops it lacks are
// refused (worked out from XNNPACK 2022-02's header).
TEST(XnnpackDelegateTest, CatalogOpsMatchReferenceAndUnsupportedOnesAreRefused) {
  const std::set<std::string> refused = {"TANH [1,5,7,3]", "MEAN over C (not H,W)",
                                         "CONCATENATION axis 3"};
  const conformance::DelegateUnderTest xnn{"xnnpack", {}};
  for (const conformance::ConformanceCase& c : conformance::Catalog()) {
    const conformance::CaseResult r = conformance::RunCase(c, xnn);
    EXPECT_TRUE(r.pass) << c.name << ": " << r.error;
    EXPECT_EQ(r.claimed, refused.count(c.name) == 0) << c.name << ": " << r.reason;
    if (!r.claimed) {
      EXPECT_THAT(r.reason, HasSubstr("xnnpack: ")) << c.name;
    }
  }
}

TEST(XnnpackDelegateTest, PlacementShowsNodesOnXnnpackAndFallbackWithReason) {
  auto model = Load(ConvTanhConv(), "conv_tanh_conv.tflite");
  auto d = MakeXnnpack();
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ASSERT_EQ(got.placement.nodes.size(), 3u);
  EXPECT_EQ(got.placement.partitions, 2);
  EXPECT_EQ(got.placement.nodes[0].delegate, "xnnpack");
  EXPECT_EQ(got.placement.nodes[2].delegate, "xnnpack");
  EXPECT_EQ(got.placement.nodes[1].delegate, "cpu");
  EXPECT_EQ(got.placement.nodes[1].reason, "xnnpack: TANH is not supported by xnnpack");
  ExpectNear(got.outputs, ref.outputs, 1e-5, 1e-5, "conv-tanh-conv");
}

TEST(XnnpackDelegateTest, RequireFullDelegationRefusesAFallback) {
  auto model = Load(ConvTanhConv(), "conv_tanh_conv.tflite");
  auto d = MakeXnnpack({{"require_full_delegation", "true"}});
  RunResult got = RunModel(*model, d.get(), /*invoke=*/false);
  EXPECT_EQ(got.status.code(), StatusCode::kUnsupported) << got.status.message();
}

TEST(XnnpackDelegateTest, Float16DequantizeOfAnInputFallsBackWithReason) {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT16, {1, 4}, "x");
  const int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
  b.AddDequantize(x, y);
  b.AddUnary(tfl::BuiltinOperator::RELU, y, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  auto model = Load(b, "dequantize.tflite");
  auto d = MakeXnnpack();
  RunResult got = RunModel(*model, d.get(), /*invoke=*/false);
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.nodes[0].delegate, "cpu");
  EXPECT_THAT(got.placement.nodes[0].reason,
              HasSubstr("DEQUANTIZE from float16 is not supported by xnnpack"));
  EXPECT_EQ(got.placement.nodes[1].delegate, "xnnpack");
}

TEST(XnnpackDelegateTest, TwoThreadsGiveTheSameOutputsAsOne) {
  // Large enough that XNNPACK splits the work between threads.
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 32, 32, 16}, "x");
  std::vector<float> w(32 * 3 * 3 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i));
  const int f = b.AddConstFloat32({32, 3, 3, 16}, w);
  const int bias = b.AddConstFloat32({32}, std::vector<float>(32, 0.25f));
  const int t = b.AddTensor(tfl::TensorType::FLOAT32, {1, 32, 32, 32});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 16, 16, 32}, "out");
  b.AddConv2D(x, f, bias, t, Conv2DParams{tfl::Padding::SAME});
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, t, out,
              {tfl::Padding::VALID, 2, 2, 2, 2, tfl::ActivationFunctionType::RELU});
  b.SetInputs({x});
  b.SetOutputs({out});
  auto model = Load(b, "threads.tflite");
  auto one = MakeXnnpack({{"threads", "1"}});
  auto two = MakeXnnpack({{"threads", "2"}});
  RunResult r1 = RunModel(*model, one.get());
  RunResult r2 = RunModel(*model, two.get());
  RunResult ref = RunModel(*model, nullptr);
  ASSERT_TRUE(r1.status.ok() && r2.status.ok()) << r1.status.message() << r2.status.message();
  EXPECT_EQ(r2.placement.partitions, 1);
  ExpectNear(r2.outputs, r1.outputs, 1e-6, 1e-6, "threads:2 vs threads:1");
  ExpectNear(r1.outputs, ref.outputs, 1e-4, 1e-5, "threads:1 vs reference");
}

TEST(XnnpackDelegateTest, BadOptionsAreErrorsNamingTheOption) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate({{"threads", "0"}}, &d);
  EXPECT_EQ(s.code(), StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("'threads' has value '0'"));
  s = CreateXnnpackDelegate({{"fp16", "maybe"}}, &d);
  EXPECT_THAT(s.message(), HasSubstr("'fp16' has value 'maybe'"));
  s = CreateXnnpackDelegate({{"min_nodes_per_partition", "0"}}, &d);
  EXPECT_THAT(s.message(), HasSubstr("min_nodes_per_partition"));
}

// fp16 works where the CPU has float16 arithmetic and is refused, as
// unsupported, elsewhere; where it works, outputs are close to float32.
TEST(XnnpackDelegateTest, Fp16IsHonestAboutTheCpu) {
  std::unique_ptr<runtime::Delegate> d;
  Status s = CreateXnnpackDelegate({{"fp16", "true"}}, &d);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("fp16 inference unsupported on this CPU"));
    GTEST_SKIP() << s.message();
  }
  auto model = Load(ConvTanhConv(), "conv_tanh_conv.tflite");
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.nodes[0].delegate, "xnnpack");
  ExpectNear(got.outputs, ref.outputs, 1e-2, 1e-2, "fp16");
  // Ops without a float16 kernel in this XNNPACK stay on the CPU.
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "x");
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "out");
  b.AddUnary(tfl::BuiltinOperator::HARD_SWISH, x, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  auto hs = Load(b, "hard_swish.tflite");
  RunResult fallback = RunModel(*hs, d.get());
  ASSERT_TRUE(fallback.status.ok()) << fallback.status.message();
  EXPECT_EQ(fallback.placement.nodes[0].delegate, "cpu");
  EXPECT_THAT(fallback.placement.nodes[0].reason, HasSubstr("no float16 kernel"));
}

// The corpus (scripts/setup.sh fetches it): every node of each model that is
// not folded runs on xnnpack, in one partition, and the outputs match the
// reference kernels.
TEST(XnnpackDelegateTest, CorpusModelsRunOnXnnpackAndMatchReference) {
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    ++models;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    std::unique_ptr<runtime::Model> model;
    Status s = runtime::Model::Load(entry.path().string(), &model);
    ASSERT_TRUE(s.ok()) << s.message();
    auto d = MakeXnnpack({{"threads", "2"}});
    RunResult ref = RunModel(*model, nullptr);
    RunResult got = RunModel(*model, d.get());
    ASSERT_TRUE(ref.status.ok()) << ref.status.message();
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    for (const runtime::NodePlacement& n : got.placement.nodes) {
      EXPECT_TRUE(n.folded || n.delegate == "xnnpack")
          << "node " << n.node << " " << n.op << ": " << n.reason;
    }
    EXPECT_EQ(got.placement.partitions, 1);
    ExpectNear(got.outputs, ref.outputs, 1e-4, 1e-4, name);
  }
  if (models == 0) GTEST_SKIP() << "no .tflite files in " << dir;
}

}  // namespace
}  // namespace dfarm::delegates
