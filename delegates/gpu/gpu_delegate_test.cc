#include "delegates/gpu/gpu_delegate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "delegates/conformance/conformance.h"
#include "delegates/gpu/opencl_api.h"
#include "delegates/registry.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/crafted_models.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::delegates {
namespace {

using ::dfarm::testing::ModelBuilder;
using ::testing::HasSubstr;
namespace tfl = ::dfarm::tflite;
using runtime::Status;
using runtime::StatusCode;

// The float16 tolerance of a whole corpus model with
// precision_loss_allowed, per output: |gpu - cpu| <= kFp16ModelRelative *
// max|cpu| of that output. Float16 keeps 11 significant bits (2^-11
// relative rounding); a value is rounded at every one of the ~100-200
// layers and the errors add up, so a few per cent of the output's range is
// what fp16 storage costs (TFLite's GPU delegate shows the same order).
constexpr double kFp16ModelRelative = 0.02;

// A gpu delegate, or null when this machine has no OpenCL (the caller skips).
std::unique_ptr<runtime::Delegate> MakeGpu(DelegateOptions options, Status* status) {
  std::unique_ptr<runtime::Delegate> d;
  *status = CreateGpuDelegate(options, &d);
  return d;
}

#define GPU_OR_SKIP(var, options)                                           \
  Status var##_status;                                                      \
  std::unique_ptr<runtime::Delegate> var = MakeGpu(options, &var##_status); \
  if (var##_status.code() == StatusCode::kUnsupported) {                    \
    GTEST_SKIP() << "no OpenCL device: " << var##_status.message();         \
  }                                                                         \
  ASSERT_TRUE(var##_status.ok()) << var##_status.message();                 \
  ASSERT_NE(var, nullptr)

struct RunResult {
  Status status;
  std::vector<std::vector<float>> outputs;
  runtime::Placement placement;
};

// Runs `model` once on seeded inputs in [-1, 1] with `delegate` (null: the
// reference kernels).
RunResult RunModel(const runtime::Model& model, runtime::Delegate* delegate) {
  RunResult r;
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(model, resolver);
  if (delegate != nullptr) interpreter.AddDelegate(delegate);
  r.status = interpreter.AllocateTensors();
  if (!r.status.ok()) return r;
  r.placement = interpreter.placement();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (runtime::Tensor* t : interpreter.inputs()) {
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data_as<float>()[i] = u(rng);
  }
  r.status = interpreter.Invoke();
  for (const runtime::Tensor* t : interpreter.outputs()) {
    r.outputs.emplace_back(t->data_as<float>(), t->data_as<float>() + t->num_elements());
  }
  return r;
}

std::unique_ptr<runtime::Model> Load(const ModelBuilder& b) {
  std::vector<uint8_t> bytes = b.Build();
  std::unique_ptr<runtime::Model> model;
  Status s = runtime::Model::FromBuffer("test.tflite", bytes, &model);
  EXPECT_TRUE(s.ok()) << s.message();
  return model;
}

// x -> CONV_2D 3x3 -> ADD(., x broadcast) -> LOGISTIC -> out.
std::unique_ptr<runtime::Model> SmallModel() {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3}, "x");
  std::vector<float> w(4 * 3 * 3 * 3), bias = {0.1f, -0.2f, 0.3f, 0.0f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  const int filter = b.AddConstFloat32({4, 3, 3, 3}, w);
  const int bi = b.AddConstFloat32({4}, bias);
  const int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4});
  testing::Conv2DParams params;
  params.padding = tfl::Padding::SAME;
  b.AddConv2D(x, filter, bi, conv, params);
  const int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4});
  b.AddAdd(conv, conv, sum);
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "out");
  b.AddUnary(tfl::BuiltinOperator::LOGISTIC, sum, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return Load(b);
}

double Stat(const runtime::Delegate& d, const std::string& name) {
  for (const auto& [key, value] : d.Stats()) {
    if (key == name) return value;
  }
  ADD_FAILURE() << "no stat " << name;
  return -1;
}

void ExpectNear(const std::vector<std::vector<float>>& got,
                const std::vector<std::vector<float>>& want, double abs, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].size(), want[o].size());
    int bad = 0;
    for (size_t i = 0; i < got[o].size(); ++i) {
      const double tol = abs + rel * std::fabs(want[o][i]);
      if (!(std::fabs(got[o][i] - want[o][i]) <= tol) && bad++ < 3) {
        ADD_FAILURE() << "output " << o << " element " << i << ": " << got[o][i] << ", reference "
                      << want[o][i];
      }
    }
  }
}

// Runs every corpus model on gpu with `options`: one partition holding every
// node that is not folded; `check` compares the outputs with the reference.
template <typename Check>
void RunCorpus(const DelegateOptions& options, Check check) {
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  GPU_OR_SKIP(d, options);
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    ++models;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    std::unique_ptr<runtime::Model> model;
    Status s = runtime::Model::Load(entry.path().string(), &model);
    ASSERT_TRUE(s.ok()) << s.message();
    RunResult ref = RunModel(*model, nullptr);
    RunResult got = RunModel(*model, d.get());
    ASSERT_TRUE(ref.status.ok()) << ref.status.message();
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    for (const runtime::NodePlacement& n : got.placement.nodes) {
      EXPECT_TRUE(n.folded || n.delegate == "gpu")
          << "node " << n.node << " " << n.op << ": " << n.reason;
    }
    EXPECT_EQ(got.placement.partitions, 1);
    check(name, got.outputs, ref.outputs);
  }
  if (models == 0) GTEST_SKIP() << "no .tflite files in " << dir;
}

TEST(GpuDelegateTest, CorpusModelsRunAsOnePartitionAndMatchTheReference) {
  RunCorpus({}, [](const std::string&, const auto& got, const auto& ref) {
    ExpectNear(got, ref, 1e-4, 1e-4);
  });
}

TEST(GpuDelegateTest, CorpusModelsInFp16StayWithinTheDocumentedTolerance) {
  RunCorpus({{"precision_loss_allowed", "true"}},
            [](const std::string& name, const auto& got, const auto& ref) {
              for (size_t o = 0; o < ref.size(); ++o) {
                double range = 0, err = 0;
                for (size_t i = 0; i < ref[o].size(); ++i) {
                  range = std::max(range, std::fabs(double{ref[o][i]}));
                  err = std::max(err, std::fabs(double{got[o][i]} - ref[o][i]));
                }
                EXPECT_LE(err, kFp16ModelRelative * std::max(range, 1e-3))
                    << name << " output " << o << " range " << range;
                // Printed for the notes: what fp16 costs per output.
                std::printf("fp16 %s output %zu: max abs error %.3g (range %.3g)\n", name.c_str(),
                            o, err, range);
              }
            });
}

// The fixture's temporary serialization folder, removed afterwards.
class GpuSerializationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dfarm_gpu_cache_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  DelegateOptions Options() const { return {{"serialization_dir", dir_}, {"model_token", "m1"}}; }
  std::vector<std::filesystem::path> Files() const {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) files.push_back(e.path());
    return files;
  }

  std::string dir_;
};

TEST_F(GpuSerializationTest, CompilesThenLoadsThenRecompilesACorruptFile) {
  std::unique_ptr<runtime::Model> model = SmallModel();
  RunResult ref = RunModel(*model, nullptr);
  ASSERT_TRUE(ref.status.ok());
  // First start: an empty folder, a fresh process-level cache.
  gpu::ClearProgramCacheForTesting();
  GPU_OR_SKIP(first, Options());
  RunResult got = RunModel(*model, first.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ExpectNear(got.outputs, ref.outputs, 1e-4, 1e-4);
  EXPECT_EQ(Stat(*first, "programs_compiled"), 1);
  EXPECT_EQ(Stat(*first, "programs_loaded"), 0);
  EXPECT_GT(Stat(*first, "compile_us"), 0);
  ASSERT_EQ(Files().size(), 1u);
  EXPECT_THAT(Files()[0].filename().string(), ::testing::StartsWith("m1-"));

  // Second start, as a new process: loads the binary, compiles nothing.
  gpu::ClearProgramCacheForTesting();
  GPU_OR_SKIP(second, Options());
  got = RunModel(*model, second.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ExpectNear(got.outputs, ref.outputs, 1e-4, 1e-4);
  EXPECT_EQ(Stat(*second, "programs_loaded"), 1);
  EXPECT_EQ(Stat(*second, "programs_compiled"), 0);

  // Corrupt files are ignored and recompiled: a foreign header, then the
  // right header over a garbage binary.
  const std::filesystem::path file = Files()[0];
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    bytes = s.str();
  }
  const size_t header_end = bytes.find("\nsource ") + 26;  // "\nsource " + 16 hex + "\n"
  ASSERT_LT(header_end, bytes.size());
  const std::string corrupt[] = {"garbage", bytes.substr(0, header_end) + std::string(64, 'x')};
  for (const std::string& content : corrupt) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
    gpu::ClearProgramCacheForTesting();
    GPU_OR_SKIP(third, Options());
    got = RunModel(*model, third.get());
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    ExpectNear(got.outputs, ref.outputs, 1e-4, 1e-4);
    EXPECT_EQ(Stat(*third, "programs_compiled"), 1);
    EXPECT_EQ(Stat(*third, "programs_loaded"), 0);
  }
  // ... and rewritten: the next start loads again.
  gpu::ClearProgramCacheForTesting();
  GPU_OR_SKIP(fourth, Options());
  ASSERT_TRUE(RunModel(*model, fourth.get()).status.ok());
  EXPECT_EQ(Stat(*fourth, "programs_loaded"), 1);
}

TEST(GpuDelegateTest, ASecondDelegateReusesTheProgramInProcess) {
  std::unique_ptr<runtime::Model> model = SmallModel();
  GPU_OR_SKIP(first, DelegateOptions{});
  ASSERT_TRUE(RunModel(*model, first.get()).status.ok());
  EXPECT_EQ(Stat(*first, "programs_compiled") + Stat(*first, "programs_reused"), 1);
  GPU_OR_SKIP(second, DelegateOptions{});
  ASSERT_TRUE(RunModel(*model, second.get()).status.ok());
  EXPECT_EQ(Stat(*second, "programs_reused"), 1);
  EXPECT_EQ(Stat(*second, "programs_compiled"), 0);
  EXPECT_EQ(Stat(*second, "programs_loaded"), 0);
  EXPECT_EQ(Stat(*second, "fp16"), 0);
}

TEST(GpuDelegateTest, BadOptionValuesAreErrorsNamingThem) {
  const std::pair<DelegateOptions, std::string> cases[] = {
      {{{"precision_loss_allowed", "maybe"}}, "'precision_loss_allowed' has value 'maybe'"},
      {{{"inference_preference", "fastest"}}, "'inference_preference' has value 'fastest'"},
      {{{"serialization_dir", ""}}, "'serialization_dir' is empty"},
      {{{"quantized_models_allowed", "yes"}}, "'quantized_models_allowed' has value 'yes'"},
      {{{"max_delegated_partitions", "-1"}}, "'max_delegated_partitions' has value '-1'"},
  };
  for (const auto& [options, message] : cases) {
    std::unique_ptr<runtime::Delegate> d;
    const Status s = CreateGpuDelegate(options, &d);
    EXPECT_EQ(s.code(), StatusCode::kError) << message;
    EXPECT_THAT(s.message(), HasSubstr(message));
  }
  const RegisteredDelegate* entry = nullptr;
  ASSERT_TRUE(FindDelegate("gpu", &entry).ok());
  const Status s = CheckDelegateOptions(*entry, {{"fp16", "true"}});
  EXPECT_THAT(s.message(), HasSubstr("delegate 'gpu' has no option 'fp16'"));
  EXPECT_TRUE(CheckDelegateOptions(*entry, {{"precision_loss_allowed", "true"},
                                            {"inference_preference", "sustained_speed"},
                                            {"serialization_dir", "/tmp"},
                                            {"model_token", "t"},
                                            {"quantized_models_allowed", "false"}})
                  .ok());
}

TEST(GpuDelegateTest, SustainedSpeedTakesLargerWorkGroups) {
  GPU_OR_SKIP(fast, DelegateOptions{});
  GPU_OR_SKIP(sustained, (DelegateOptions{{"inference_preference", "sustained_speed"}}));
  EXPECT_LE(Stat(*fast, "work_group_size"), 64);
  EXPECT_GE(Stat(*sustained, "work_group_size"), Stat(*fast, "work_group_size"));
  std::unique_ptr<runtime::Model> model = SmallModel();
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, sustained.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ExpectNear(got.outputs, ref.outputs, 1e-4, 1e-4);
}

// An op outside the list stays on the CPU with the reason in the placement,
// and splits the graph.
// FULLY_CONNECTED reads its weights [units, depth] in place when they are
// computed at run time (a model input here), moved to [depth, units] when
// constant: both match the reference.
TEST(GpuDelegateTest, FullyConnectedWeightsInEitherLayoutMatchTheReference) {
  GPU_OR_SKIP(d, {});
  for (bool constant : {false, true}) {
    SCOPED_TRACE(constant ? "constant weights" : "weights at run time");
    ModelBuilder b;
    const int x = b.AddTensor(tfl::TensorType::FLOAT32, {3, 8}, "x");
    std::vector<float> values(5 * 8);
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::cos(static_cast<float>(i));
    const int w = constant ? b.AddConstFloat32({5, 8}, values)
                           : b.AddTensor(tfl::TensorType::FLOAT32, {5, 8}, "w");
    const int bias = b.AddConstFloat32({5}, {0.5f, -0.25f, 0.0f, 1.0f, -1.0f});
    const int out = b.AddTensor(tfl::TensorType::FLOAT32, {3, 5}, "out");
    b.AddFullyConnected(x, w, bias, out, tfl::ActivationFunctionType::RELU);
    b.SetInputs(constant ? std::vector<int>{x} : std::vector<int>{x, w});
    b.SetOutputs({out});
    std::unique_ptr<runtime::Model> model = Load(b);
    ASSERT_NE(model, nullptr);
    RunResult ref = RunModel(*model, nullptr);
    RunResult got = RunModel(*model, d.get());
    ASSERT_TRUE(ref.status.ok()) << ref.status.message();
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    ASSERT_EQ(got.placement.nodes.size(), 1u);
    EXPECT_EQ(got.placement.nodes[0].delegate, "gpu");
    ExpectNear(got.outputs, ref.outputs, 1e-5, 1e-5);
  }
}

// float -> QUANTIZE int8 -> CONV_2D (per-channel int8 filter, int32 bias,
// RELU) -> DEPTHWISE_CONV_2D s2 (per-channel) -> ADD -> AVERAGE_POOL_2D ->
// SOFTMAX (1/256) -> DEQUANTIZE -> float, as a converter writes a quantized
// model with float edges. `step_out` is the output's step.
std::unique_ptr<runtime::Model> QuantizedModel(double* step_out) {
  ModelBuilder b;
  const auto I8 = tfl::TensorType::INT8;
  auto act = [&](std::vector<int32_t> shape, float scale, int zp) {
    const int t = b.AddTensor(I8, std::move(shape));
    b.SetQuantization(t, scale, zp);
    return t;
  };
  auto filter = [&](std::vector<int32_t> shape, std::vector<float> scales, int dim) {
    std::vector<int8_t> v(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int8_t>((i * 37 + 11) % 255 - 127);
    const int t = b.AddConstInt8(shape, v);
    b.SetQuantization(t, scales, std::vector<int64_t>(scales.size(), 0), dim);
    return t;
  };
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 3}, "x");
  const int q = act({1, 8, 8, 3}, 1.0f / 128, 0);
  b.AddUnary(tfl::BuiltinOperator::QUANTIZE, x, q);
  const std::vector<float> fs = {0.004f, 0.006f, 0.005f, 0.003f};
  const int t1 = act({1, 8, 8, 4}, 0.02f, -60);
  testing::Conv2DParams cp;
  cp.padding = tfl::Padding::SAME;
  cp.activation = tfl::ActivationFunctionType::RELU;
  b.AddConv2D(q, filter({4, 3, 3, 3}, fs, 0), b.AddQuantizedBias({50, -80, 120, 0}, 1.0f / 128, fs),
              t1, cp);
  const std::vector<float> ds = {0.01f, 0.02f, 0.015f, 0.01f};
  const int t2 = act({1, 4, 4, 4}, 0.03f, 4);
  testing::DepthwiseConv2DParams dp;
  dp.padding = tfl::Padding::SAME;
  dp.stride_h = dp.stride_w = 2;
  b.AddDepthwiseConv2D(t1, filter({1, 3, 3, 4}, ds, 3),
                       b.AddQuantizedBias({10, -20, 30, 5}, 0.02f, ds), t2, dp);
  const int t3 = act({1, 4, 4, 4}, 0.04f, -10);
  b.AddAdd(t2, t2, t3);
  const int t4 = act({1, 2, 2, 4}, 0.04f, -10);
  testing::Pool2DParams pp;
  pp.filter_h = pp.filter_w = pp.stride_h = pp.stride_w = 2;
  b.AddPool2D(tfl::BuiltinOperator::AVERAGE_POOL_2D, t3, t4, pp);
  const int t5 = act({1, 2, 2, 4}, 1.0f / 256, -128);
  b.AddOperator(tfl::BuiltinOperator::SOFTMAX, {t4}, {t5}, tfl::BuiltinOptions::SoftmaxOptions,
                [](flatbuffers::FlatBufferBuilder& fb) {
                  return tfl::CreateSoftmaxOptions(fb, 1.0f).Union();
                });
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 4}, "out");
  b.AddDequantize(t5, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  *step_out = 1.0 / 256;
  return Load(b);
}

// A quantized model runs on gpu as one partition (TFLite's GPU delegate
// takes quantized models by default), within conformance::kQuantizedSteps
// output steps of the reference kernels' integer arithmetic, in both
// precisions; quantized_models_allowed:false leaves every node to the CPU,
// saying why.
TEST(GpuDelegateTest, QuantizedModelRunsAsOnePartitionUnlessRefusedByOption) {
  double step = 0;
  std::unique_ptr<runtime::Model> model = QuantizedModel(&step);
  ASSERT_NE(model, nullptr);
  RunResult ref = RunModel(*model, nullptr);
  ASSERT_TRUE(ref.status.ok()) << ref.status.message();
  for (const char* fp16 : {"false", "true"}) {
    SCOPED_TRACE(std::string("precision_loss_allowed:") + fp16);
    GPU_OR_SKIP(d, (DelegateOptions{{"precision_loss_allowed", fp16}}));
    RunResult got = RunModel(*model, d.get());
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    EXPECT_EQ(got.placement.partitions, 1);
    for (const runtime::NodePlacement& n : got.placement.nodes) {
      EXPECT_TRUE(n.folded || n.delegate == "gpu") << n.op << ": " << n.reason;
    }
    ExpectNear(got.outputs, ref.outputs, conformance::kQuantizedSteps * step * (1 + 1e-6), 0);
  }
  GPU_OR_SKIP(off, (DelegateOptions{{"quantized_models_allowed", "false"}}));
  RunResult got = RunModel(*model, off.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.partitions, 0);
  ASSERT_FALSE(got.placement.nodes.empty());
  for (const runtime::NodePlacement& n : got.placement.nodes) {
    EXPECT_EQ(n.delegate, "cpu");
    EXPECT_THAT(n.reason, HasSubstr("(quantized_models_allowed is false)")) << n.op;
  }
  EXPECT_THAT(got.placement.nodes[0].reason, HasSubstr("gpu: QUANTIZE with quantized int8 tensor"));
  ExpectNear(got.outputs, ref.outputs, 0, 0);
}

// Runs `model`, whose inputs and outputs are int8, on seeded random codes;
// the output codes.
std::vector<std::vector<int8_t>> RunInt8(const runtime::Model& model, runtime::Delegate* delegate,
                                         runtime::Placement* placement) {
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(model, resolver);
  if (delegate != nullptr) interpreter.AddDelegate(delegate);
  Status s = interpreter.AllocateTensors();
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return {};
  *placement = interpreter.placement();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> u(-128, 127);
  for (runtime::Tensor* t : interpreter.inputs()) {
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data_as<int8_t>()[i] = u(rng);
  }
  s = interpreter.Invoke();
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<std::vector<int8_t>> out;
  for (const runtime::Tensor* t : interpreter.outputs()) {
    out.emplace_back(t->data_as<int8_t>(), t->data_as<int8_t>() + t->num_elements());
  }
  return out;
}

// int8 in, int8 out: the partition's quantized input is dequantized and its
// outputs quantized on the host (a model output read inside the partition
// too); codes within kQuantizedSteps of the reference kernels, both precisions.
TEST(GpuDelegateTest, Int8InputsAndOutputsAreConvertedAtThePartitionEdges) {
  ModelBuilder b;
  const auto I8 = tfl::TensorType::INT8;
  const int x = b.AddTensor(I8, {1, 6, 6, 3}, "x");
  b.SetQuantization(x, 0.05f, -3);
  std::vector<int8_t> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>((i * 53 + 7) % 255 - 127);
  const int f = b.AddConstInt8({4, 3, 3, 3}, w);
  const std::vector<float> fs = {0.01f, 0.02f, 0.015f, 0.005f};
  b.SetQuantization(f, fs, {0, 0, 0, 0}, 0);
  const int conv = b.AddTensor(I8, {1, 6, 6, 4}, "conv");
  b.SetQuantization(conv, 0.08f, 10);
  testing::Conv2DParams cp;
  cp.padding = tfl::Padding::SAME;
  b.AddConv2D(x, f, b.AddQuantizedBias({100, -50, 0, 25}, 0.05f, fs), conv, cp);
  const int pooled = b.AddTensor(I8, {1, 3, 3, 4}, "pooled");
  b.SetQuantization(pooled, 0.08f, 10);
  testing::Pool2DParams pp;
  pp.filter_h = pp.filter_w = pp.stride_h = pp.stride_w = 2;
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, conv, pooled, pp);
  b.SetInputs({x});
  b.SetOutputs({conv, pooled});
  std::unique_ptr<runtime::Model> model = Load(b);
  ASSERT_NE(model, nullptr);
  runtime::Placement ref_placement;
  const auto ref = RunInt8(*model, nullptr, &ref_placement);
  ASSERT_EQ(ref.size(), 2u);
  for (const char* fp16 : {"false", "true"}) {
    SCOPED_TRACE(std::string("precision_loss_allowed:") + fp16);
    GPU_OR_SKIP(d, (DelegateOptions{{"precision_loss_allowed", fp16}}));
    runtime::Placement placement;
    const auto got = RunInt8(*model, d.get(), &placement);
    EXPECT_EQ(placement.partitions, 1);
    ASSERT_EQ(got.size(), ref.size());
    int worst = 0;
    for (size_t o = 0; o < ref.size(); ++o) {
      ASSERT_EQ(got[o].size(), ref[o].size());
      for (size_t i = 0; i < ref[o].size(); ++i)
        worst = std::max(worst, std::abs(got[o][i] - ref[o][i]));
    }
    EXPECT_LE(worst, conformance::kQuantizedSteps);
  }
}

TEST(GpuDelegateTest, UnsupportedOpFallsBackWithReason) {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "x");
  const int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8});
  const int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8}, "out");
  b.AddAdd(x, x, t1);
  b.AddUnary(tfl::BuiltinOperator::EXP, t1, t2);
  b.AddAdd(t2, x, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  std::unique_ptr<runtime::Model> model = Load(b);
  GPU_OR_SKIP(d, DelegateOptions{});
  RunResult ref = RunModel(*model, nullptr);
  RunResult got = RunModel(*model, d.get());
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.placement.partitions, 2);
  ASSERT_EQ(got.placement.nodes.size(), 3u);
  EXPECT_EQ(got.placement.nodes[1].delegate, "cpu");
  EXPECT_EQ(got.placement.nodes[1].reason, "gpu: EXP is not supported by the gpu delegate");
  ExpectNear(got.outputs, ref.outputs, 1e-4, 1e-4);
}

TEST(GpuDelegateTest, CraftedShapesAreCheckedBeforeTheGpuSeesThem) {
  // As on xnnpack: a shape the CPU path refuses is the same model error, and
  // a node with an empty tensor stays on the CPU (TFLite's empty result).
  GPU_OR_SKIP(d, DelegateOptions{});
  for (testing::CraftedModel& crafted : testing::CraftedShapeModels()) {
    SCOPED_TRACE(crafted.name);
    std::unique_ptr<runtime::Model> model = Load(crafted.builder);
    RunResult cpu = RunModel(*model, nullptr);
    RunResult got = RunModel(*model, d.get());
    if (!crafted.error.empty()) {
      EXPECT_EQ(cpu.status.code(), StatusCode::kError) << cpu.status.message();
      EXPECT_THAT(cpu.status.message(), HasSubstr(crafted.error));
      EXPECT_EQ(got.status.code(), StatusCode::kError) << got.status.message();
      EXPECT_EQ(got.status.message(), cpu.status.message());
      continue;
    }
    ASSERT_TRUE(got.status.ok()) << got.status.message();
    EXPECT_EQ(got.placement.nodes[0].delegate, "cpu");
    EXPECT_THAT(got.placement.nodes[0].reason, HasSubstr("is empty"));
    ASSERT_EQ(got.outputs.size(), 1u);
    EXPECT_TRUE(got.outputs[0].empty());
  }
}

TEST(GpuDelegateTest, PassesTheConformanceCatalogInBothPrecisions) {
  GPU_OR_SKIP(probe, DelegateOptions{});
  std::ostringstream os;
  const int failures =
      conformance::RunAll({{"gpu", {}}, {"gpu", {{"precision_loss_allowed", "true"}}}}, os);
  EXPECT_EQ(failures, 0) << os.str();
  EXPECT_THAT(os.str(), HasSubstr("gpu: claimed 91 of 91"));
}

// --profile's per-node times from OpenCL profiling events: each node of
// every partition gets one, and the profiled run computes what Invoke() does
// (conformance::RunNodeProfile; no verdict reads a clock). On the partition
// catalog and the corpus.
TEST(GpuDelegateTest, ProfiledPartitionsTimeEveryNodeFromEvents) {
  GPU_OR_SKIP(probe, DelegateOptions{});
  const conformance::DelegateUnderTest gpu{"gpu", {}};
  for (const conformance::PartitionCase& c : conformance::PartitionCatalog()) {
    SCOPED_TRACE(c.name);
    const conformance::NodeProfileResult r = conformance::RunNodeProfile(
        c.model, "partition.tflite", gpu, conformance::kGpuFloat32Tolerance);
    EXPECT_TRUE(r.pass) << r.error;
    EXPECT_TRUE(r.supported);
    EXPECT_EQ(r.timed_nodes, r.delegated_nodes);
  }
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (!std::filesystem::is_directory(dir)) return;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    SCOPED_TRACE(entry.path().filename().string());
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
    const conformance::NodeProfileResult r = conformance::RunNodeProfile(
        bytes, entry.path().filename().string(), gpu, conformance::kGpuFloat32Tolerance);
    EXPECT_TRUE(r.pass) << r.error;
    EXPECT_GT(r.timed_nodes, 0);
    EXPECT_EQ(r.timed_nodes, r.delegated_nodes);
  }
}

TEST(GpuDelegateTest, NodeTimesOnlyWhenProfilingWasEnabled) {
  GPU_OR_SKIP(d, DelegateOptions{});
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "x");
  const int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "y");
  b.AddUnary(tfl::BuiltinOperator::RELU, x, y);
  b.SetInputs({x});
  b.SetOutputs({y});
  std::unique_ptr<runtime::Model> model;
  ASSERT_TRUE(runtime::Model::FromBuffer("relu.tflite", b.Build(), &model).ok());
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(*model, resolver);
  interpreter.AddDelegate(d.get());
  ASSERT_TRUE(interpreter.AllocateTensors().ok());
  std::vector<double> node_us;
  EXPECT_EQ(interpreter.InvokeStepProfiled(0, &node_us).code(), StatusCode::kUnsupported);
}

TEST(OpenClApiTest, ListsTheDeviceTheDelegateRunsOn) {
  GPU_OR_SKIP(d, DelegateOptions{});
  std::vector<gpu::OpenClDeviceInfo> devices;
  std::string error;
  ASSERT_TRUE(gpu::ListOpenClDevices(&devices, &error)) << error;
  ASSERT_FALSE(devices.empty());
  for (const gpu::OpenClDeviceInfo& info : devices) {
    EXPECT_FALSE(info.platform.empty());
    EXPECT_FALSE(info.name.empty());
    EXPECT_THAT(info.opencl_version, ::testing::StartsWith("OpenCL "));
    EXPECT_GT(info.compute_units, 0u);
    EXPECT_GT(info.global_memory_bytes, 0u);
  }
}

TEST(OpenClApiTest, CandidatesPutTheOverrideFirstThenTheLoaderThenAndroid) {
  setenv("DFARM_OPENCL_LIBRARY", "/opt/x/libOpenCL.so", 1);
  const std::vector<std::string> names = gpu::OpenClLibraryCandidates();
  unsetenv("DFARM_OPENCL_LIBRARY");
  ASSERT_EQ(names.size(), 5u);
  EXPECT_EQ(names[0], "/opt/x/libOpenCL.so");
  EXPECT_EQ(names[1], "libOpenCL.so.1");
  EXPECT_EQ(names[2], "libOpenCL.so");
  EXPECT_EQ(names[3], "/vendor/lib64/libOpenCL.so");
  EXPECT_EQ(names[4], "/system/vendor/lib64/libOpenCL.so");
}

}  // namespace
}  // namespace dfarm::delegates
