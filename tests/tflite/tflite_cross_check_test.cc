// DelegateFarm against TensorFlow Lite itself (2.9's C library, loaded with
// dlopen; see agent/runner/tflite_c.h): the corpus models and the conformance catalog run
// through TFLite and through our reference kernels and xnnpack delegate on the
// same input bytes. Float outputs agree within 1e-4 abs + 1e-4 rel; quantized
// ones within 1 quantization step (reference kernels, which follow TFLite's
// fixed-point arithmetic) or 2 (xnnpack, which requantizes in float32).
// Skips, naming the path, when the library is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "agent/runner/tflite_c.h"
#include "delegates/conformance/catalog.h"
#include "delegates/registry.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "runtime/partitioner.h"
#include "tests/model_builder/model_builder.h"
#include "tests/tflite/tflite_test_util.h"

namespace dfarm::runner::tflite {
namespace {

namespace fs = std::filesystem;

using ::dfarm::tflite_test::Tflite;

// Outputs as real numbers (quantized ones dequantized) with each output's step.
struct Outputs {
  std::vector<std::vector<double>> values;
  std::vector<double> steps;  // 0 for float outputs
};

// Seeded uniform float inputs in [lo, hi] (float32 inputs only), as bytes.
std::vector<std::vector<uint8_t>> FloatInputs(const std::vector<size_t>& counts, float lo, float hi,
                                              uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<std::vector<uint8_t>> out;
  for (size_t n : counts) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    std::vector<uint8_t> bytes(n * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    out.push_back(std::move(bytes));
  }
  return out;
}

template <typename T>
std::vector<double> Real(const void* data, size_t n, double scale, double zero_point) {
  std::vector<double> v(n);
  const T* p = static_cast<const T*>(data);
  for (size_t i = 0; i < n; ++i) {
    v[i] = scale > 0 ? scale * (static_cast<double>(p[i]) - zero_point) : p[i];
  }
  return v;
}

// The element counts of the model's inputs, which must all be float32 (as the
// corpus models and the catalog's cases, quantized ones included, take).
bool InputCounts(const std::vector<uint8_t>& bytes, std::vector<size_t>* counts) {
  std::unique_ptr<runtime::Model> model;
  if (!runtime::Model::FromBuffer("model.tflite", bytes, &model).ok()) return false;
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter probe(*model, resolver);
  if (!probe.AllocateTensors().ok()) return false;
  for (const runtime::Tensor* t : probe.inputs()) {
    if (t->dtype != runtime::DType::kFloat32) return false;
    counts->push_back(static_cast<size_t>(t->num_elements()));
  }
  return true;
}

// Ours: the reference kernels, or with `delegate` from the registry.
runtime::Status RunOurs(const std::vector<uint8_t>& model_bytes,
                        const std::vector<std::vector<uint8_t>>& inputs,
                        const std::string& delegate, Outputs* out, runtime::Placement* placement,
                        const delegates::DelegateOptions& options = {}) {
  std::unique_ptr<runtime::Model> model;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("model.tflite", model_bytes, &model));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  std::unique_ptr<runtime::Delegate> d;
  if (!delegate.empty()) {
    const delegates::RegisteredDelegate* entry = nullptr;
    DFARM_RETURN_IF_ERROR(delegates::FindDelegate(delegate, &entry));
    DFARM_RETURN_IF_ERROR(entry->create(options, &d));
  }
  runtime::Interpreter interpreter(*model, resolver);
  if (d != nullptr) interpreter.AddDelegate(d.get());
  DFARM_RETURN_IF_ERROR(interpreter.AllocateTensors());
  if (interpreter.inputs().size() != inputs.size()) {
    return runtime::Status::Error("input count differs");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    runtime::Tensor* t = interpreter.inputs()[i];
    if (t->bytes != inputs[i].size()) return runtime::Status::Error("input size differs");
    std::memcpy(t->data, inputs[i].data(), t->bytes);
  }
  DFARM_RETURN_IF_ERROR(interpreter.Invoke());
  for (const runtime::Tensor* t : interpreter.outputs()) {
    const size_t n = static_cast<size_t>(t->num_elements());
    const double scale = t->quantized ? t->scale : 0.0;
    const double zp = static_cast<double>(t->zero_point);
    switch (t->dtype) {
      case runtime::DType::kFloat32:
        out->values.push_back(Real<float>(t->data, n, 0, 0));
        break;
      case runtime::DType::kInt8:
        out->values.push_back(Real<int8_t>(t->data, n, scale, zp));
        break;
      case runtime::DType::kUint8:
        out->values.push_back(Real<uint8_t>(t->data, n, scale, zp));
        break;
      case runtime::DType::kInt32:
        out->values.push_back(Real<int32_t>(t->data, n, 0, 0));
        break;
      default:
        return runtime::Status::Error("output dtype not compared");
    }
    out->steps.push_back(scale);
  }
  if (placement != nullptr) *placement = interpreter.placement();
  return runtime::Status::Ok();
}

// TFLite: default kernels (xnnpack_threads 0) or its XNNPACK delegate.
bool RunTflite(const std::vector<uint8_t>& model_bytes,
               const std::vector<std::vector<uint8_t>>& inputs, int xnnpack_threads, Outputs* out,
               std::string* error) {
  std::unique_ptr<Interpreter> in = Tflite()->Create(model_bytes, 1, xnnpack_threads, error);
  if (in == nullptr) return false;
  if (in->num_inputs() != inputs.size()) {
    *error = "input count differs";
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!in->SetInput(i, inputs[i])) {
      *error = in->last_error();
      return false;
    }
  }
  if (!in->Invoke()) {
    *error = "Invoke failed: " + in->last_error();
    return false;
  }
  for (size_t o = 0; o < in->num_outputs(); ++o) {
    TensorData t = in->Output(o);
    size_t n = 1;
    for (int32_t d : t.shape) n *= static_cast<size_t>(d);
    switch (t.type) {
      case CType::kFloat32:
        out->values.push_back(Real<float>(t.bytes.data(), n, 0, 0));
        break;
      case CType::kInt8:
        out->values.push_back(Real<int8_t>(t.bytes.data(), n, t.scale, t.zero_point));
        break;
      case CType::kUInt8:
        out->values.push_back(Real<uint8_t>(t.bytes.data(), n, t.scale, t.zero_point));
        break;
      case CType::kInt32:
        out->values.push_back(Real<int32_t>(t.bytes.data(), n, 0, 0));
        break;
      default:
        *error = "output type not compared";
        return false;
    }
    out->steps.push_back(t.type == CType::kInt8 || t.type == CType::kUInt8 ? t.scale : 0.0);
  }
  return true;
}

// Compares `got` with TFLite's `want`: float outputs within abs + rel*|want|,
// quantized ones within `steps` of their step. Returns the largest error seen
// (in steps for quantized outputs, else absolute) and counts the misses.
double Compare(const Outputs& got, const Outputs& want, double abs, double rel, double steps,
               const std::string& what) {
  EXPECT_EQ(got.values.size(), want.values.size()) << what;
  double worst = 0;
  for (size_t o = 0; o < std::min(got.values.size(), want.values.size()); ++o) {
    EXPECT_EQ(got.values[o].size(), want.values[o].size()) << what << " output " << o;
    const double step = want.steps[o];
    int bad = 0;
    for (size_t i = 0; i < std::min(got.values[o].size(), want.values[o].size()); ++i) {
      const double w = want.values[o][i], g = got.values[o][i];
      const double err = std::fabs(g - w);
      const double tol = step > 0 ? steps * step * (1 + 1e-6) : abs + rel * std::fabs(w);
      worst = std::max(worst, step > 0 ? err / step : err);
      if (!(err <= tol) && bad++ < 3) {
        ADD_FAILURE() << what << " output " << o << " [" << i << "]: " << g << ", TFLite " << w;
      }
    }
    EXPECT_EQ(bad, 0) << what << " output " << o;
  }
  return worst;
}

std::vector<uint8_t> Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(TfliteCrossCheckTest, LibraryLoadsAndSaysItsVersion) {
  REQUIRE_TFLITE();
  EXPECT_EQ(Tflite()->Version().rfind("2.", 0), 0u) << Tflite()->Version();
  std::string error;
  EXPECT_EQ(Library::Load("/nonexistent/libtensorflowlite_c.so", &error), nullptr);
  EXPECT_NE(error.find("/nonexistent/libtensorflowlite_c.so"), std::string::npos) << error;
  std::vector<uint8_t> junk(64, 0x5a);
  EXPECT_EQ(Tflite()->Create(junk, 1, 0, &error), nullptr);
  EXPECT_FALSE(error.empty());
}

// A one-ADD float model: TFLite's output is x + y, computed here by hand, also
// after TimeInvokes (which refuses 0 runs, naming the count).
TEST(TfliteCrossCheckTest, TimedInvokesKeepTheOutput) {
  REQUIRE_TFLITE();
  testing::ModelBuilder b;
  const int x = b.AddTensor(::dfarm::tflite::TensorType::FLOAT32, {1, 3});
  const int y = b.AddTensor(::dfarm::tflite::TensorType::FLOAT32, {1, 3});
  const int z = b.AddTensor(::dfarm::tflite::TensorType::FLOAT32, {1, 3});
  b.AddAdd(x, y, z);
  b.SetInputs({x, y});
  b.SetOutputs({z});
  std::string error;
  std::unique_ptr<Interpreter> in = Tflite()->Create(b.Build(), 1, 0, &error);
  ASSERT_NE(in, nullptr) << error;
  const float xs[3] = {1.5f, -2.0f, 0.25f}, ys[3] = {0.5f, 4.0f, -1.0f};
  std::vector<uint8_t> xb(sizeof xs), yb(sizeof ys);
  std::memcpy(xb.data(), xs, sizeof xs);
  std::memcpy(yb.data(), ys, sizeof ys);
  ASSERT_TRUE(in->SetInput(0, xb));
  ASSERT_TRUE(in->SetInput(1, yb));
  EXPECT_FALSE(in->SetInput(0, std::vector<uint8_t>(4)));
  EXPECT_NE(in->last_error().find("takes 12 bytes"), std::string::npos) << in->last_error();
  double mean_us = -1;
  ASSERT_TRUE(in->TimeInvokes(3, &mean_us)) << in->last_error();
  EXPECT_GE(mean_us, 0.0);
  EXPECT_FALSE(in->TimeInvokes(0, &mean_us));
  EXPECT_NE(in->last_error().find("given 0"), std::string::npos) << in->last_error();
  const TensorData out = in->Output(0);
  ASSERT_EQ(out.type, CType::kFloat32);
  EXPECT_EQ(out.shape, (std::vector<int32_t>{1, 3}));
  ASSERT_EQ(out.bytes.size(), 12u);
  float zs[3];
  std::memcpy(zs, out.bytes.data(), sizeof zs);
  EXPECT_FLOAT_EQ(zs[0], 2.0f);
  EXPECT_FLOAT_EQ(zs[1], 2.0f);
  EXPECT_FLOAT_EQ(zs[2], -0.75f);
}

// Every corpus model: our reference kernels and our xnnpack delegate against
// TFLite's default interpreter and TFLite's XNNPACK delegate, one thread.
TEST(TfliteCrossCheckTest, CorpusModelsMatchTensorFlowLite) {
  REQUIRE_TFLITE();
  const fs::path dir = DFARM_MODELS_DIR;
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = Slurp(entry.path());
    std::vector<size_t> counts;
    ASSERT_TRUE(InputCounts(bytes, &counts)) << "our runtime cannot load " << name;
    const auto inputs = FloatInputs(counts, -1.0f, 1.0f, 2024);
    Outputs tfl, tfl_xnn;
    std::string error;
    if (!RunTflite(bytes, inputs, 0, &tfl, &error)) {
      // MediaPipe's selfie models need its custom op, which TFLite lacks.
      EXPECT_NE(error.find("Convolution2DTransposeBias"), std::string::npos) << error;
      std::printf("%-40s skipped: TensorFlow Lite lacks a custom op (%s)\n", name.c_str(),
                  error.substr(0, 120).c_str());
      continue;
    }
    ASSERT_TRUE(RunTflite(bytes, inputs, 1, &tfl_xnn, &error)) << error;
    Outputs ref, xnn;
    runtime::Placement placement;
    runtime::Status s = RunOurs(bytes, inputs, "", &ref, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    s = RunOurs(bytes, inputs, "xnnpack", &xnn, &placement);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(placement.partitions, 1);
    const double e1 = Compare(ref, tfl, 1e-4, 1e-4, 1, "reference vs TFLite");
    const double e2 = Compare(xnn, tfl, 1e-4, 1e-4, 1, "xnnpack vs TFLite");
    const double e3 = Compare(xnn, tfl_xnn, 1e-4, 1e-4, 1, "xnnpack vs TFLite's XNNPACK");
    std::printf(
        "%-40s max abs error vs TFLite: reference %.3g, xnnpack %.3g (vs TFLite's "
        "XNNPACK %.3g)\n",
        name.c_str(), e1, e2, e3);
    ++compared;
  }
  EXPECT_GE(compared, 1);
}

// The conformance catalog's single-op models (float and quantized) through
// TFLite and through our reference kernels and xnnpack.
TEST(TfliteCrossCheckTest, ConformanceCatalogMatchesTensorFlowLite) {
  REQUIRE_TFLITE();
  int compared = 0, quantized = 0, refused = 0;
  double worst_float = 0, worst_steps_ref = 0, worst_steps_xnn = 0;
  for (const conformance::ConformanceCase& c : conformance::Catalog()) {
    SCOPED_TRACE(c.name);
    // What TFLite 2.9 predates and gets wrong without refusing the model.
    const std::pair<const char*, const char*> predates[] = {
        {"FULLY_CONNECTED int8 per-channel", "TFLite 2.9 has no per-channel FULLY_CONNECTED"},
        {"TRANSPOSE_CONV 3x3 SAME s2 RELU6",
         "TFLite 2.9 ignores TRANSPOSE_CONV's fused activation"},
    };
    bool skip = false;
    for (const auto& [prefix, why] : predates) {
      if (c.name.rfind(prefix, 0) == 0) {
        std::printf("%-66s not compared: %s\n", c.name.c_str(), why);
        skip = true;
      }
    }
    if (skip) {
      ++refused;
      continue;
    }
    std::vector<size_t> counts;
    ASSERT_TRUE(InputCounts(c.model, &counts)) << "our runtime cannot load the case";
    const auto inputs = FloatInputs(counts, c.input_lo, c.input_hi, 77);
    Outputs tfl;
    std::string error;
    if (!RunTflite(c.model, inputs, 0, &tfl, &error)) {
      ++refused;
      std::printf("%-66s TFLite refuses: %s\n", c.name.c_str(), error.substr(0, 100).c_str());
      continue;
    }
    Outputs ref, xnn;
    runtime::Status s = RunOurs(c.model, inputs, "", &ref, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    s = RunOurs(c.model, inputs, "xnnpack", &xnn, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    if (c.quantum > 0) {
      // The outputs are DEQUANTIZEd floats: judged in steps of the op's output.
      for (double& step : tfl.steps) step = c.quantum;
      const double e_ref = Compare(ref, tfl, 0, 0, 1, "reference vs TFLite");
      if (e_ref > 0) std::printf("%-66s reference %g steps off TFLite\n", c.name.c_str(), e_ref);
      worst_steps_ref = std::max(worst_steps_ref, e_ref);
      worst_steps_xnn =
          std::max(worst_steps_xnn,
                   Compare(xnn, tfl, 0, 0, conformance::kQuantizedSteps, "xnnpack vs TFLite"));
      ++quantized;
    } else {
      worst_float = std::max(worst_float, Compare(ref, tfl, 1e-4, 1e-4, 1, "reference vs TFLite"));
      worst_float = std::max(worst_float, Compare(xnn, tfl, 1e-4, 1e-4, 1, "xnnpack vs TFLite"));
    }
    ++compared;
  }
  std::printf(
      "catalog: %d cases compared (%d quantized), %d refused by TFLite; float max abs "
      "error %.3g; quantized max %.3g steps (reference), %.3g steps (xnnpack)\n",
      compared, quantized, refused, worst_float, worst_steps_ref, worst_steps_xnn);
  EXPECT_GE(compared, 60);
  EXPECT_GE(quantized, 20);
}

// Small int8 and uint8 graphs written with tests/model_builder, quantized end to
// end (quantized inputs and outputs, per-channel int8 convolutions, int32
// biases), with the quantization TFLite's kernels require (e.g. SOFTMAX and
// LOGISTIC outputs at 1/256, pools and concatenations keeping their input's).
namespace graphs {

namespace tfl = ::dfarm::tflite;
using Op = tfl::BuiltinOperator;
using testing::Conv2DParams;
using testing::DepthwiseConv2DParams;
using testing::ModelBuilder;
using testing::Pool2DParams;

struct QuantGraph {
  std::string name;
  std::vector<uint8_t> model;
  // Input bytes: int8/uint8 inputs uniform over their whole range, float ones in [-2, 2].
  std::vector<std::vector<uint8_t>> inputs;
  // Per output: the step a float (DEQUANTIZEd) output is judged in; 0 for quantized outputs.
  std::vector<double> float_steps;
};

class Maker {
 public:
  explicit Maker(uint32_t seed) : rng_(seed) {}
  ModelBuilder& b() { return b_; }

  int Act(tfl::TensorType type, std::vector<int32_t> shape, float scale, int zp) {
    const int t = b_.AddTensor(type, std::move(shape));
    b_.SetQuantization(t, scale, zp);
    return t;
  }
  // A quantized input filled with random codes over the dtype's whole range.
  int In(tfl::TensorType type, std::vector<int32_t> shape, float scale, int zp) {
    const int t = Act(type, shape, scale, zp);
    size_t n = 1;
    for (int32_t d : shape) n *= static_cast<size_t>(d);
    std::vector<uint8_t> bytes(n);
    std::uniform_int_distribution<int> u(0, 255);
    for (uint8_t& x : bytes) x = static_cast<uint8_t>(u(rng_));
    inputs_.push_back(std::move(bytes));
    input_ids_.push_back(t);
    return t;
  }
  int FloatIn(std::vector<int32_t> shape) {
    const int t = b_.AddTensor(tfl::TensorType::FLOAT32, shape);
    size_t n = 1;
    for (int32_t d : shape) n *= static_cast<size_t>(d);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    std::vector<uint8_t> bytes(n * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    inputs_.push_back(std::move(bytes));
    input_ids_.push_back(t);
    return t;
  }
  // An int8 filter with per-channel scales along `dim` (zero points 0).
  int Int8Filter(std::vector<int32_t> shape, std::vector<float> scales, int dim) {
    size_t n = 1;
    for (int32_t d : shape) n *= static_cast<size_t>(d);
    std::uniform_int_distribution<int> u(-127, 127);
    std::vector<int8_t> v(n);
    for (int8_t& x : v) x = static_cast<int8_t>(u(rng_));
    const int t = b_.AddConstInt8(shape, v);
    b_.SetQuantization(t, scales, std::vector<int64_t>(scales.size(), 0), dim);
    return t;
  }
  int Uint8Filter(std::vector<int32_t> shape, float scale, int zp) {
    size_t n = 1;
    for (int32_t d : shape) n *= static_cast<size_t>(d);
    std::uniform_int_distribution<int> u(0, 255);
    std::vector<uint8_t> v(n);
    for (uint8_t& x : v) x = static_cast<uint8_t>(u(rng_));
    const int t = b_.AddConstUint8(shape, v);
    b_.SetQuantization(t, scale, zp);
    return t;
  }
  // An int32 bias of `count` values with scale input_scale * filter_scale[c]
  // (one filter scale: per-tensor).
  int Bias(float input_scale, const std::vector<float>& filter_scales, size_t count) {
    std::uniform_int_distribution<int> u(-600, 600);
    std::vector<int32_t> v(count);
    for (int32_t& x : v) x = u(rng_);
    return b_.AddQuantizedBias(v, input_scale, filter_scales);
  }
  QuantGraph Finish(std::string name, std::vector<int32_t> outputs,
                    std::vector<double> float_steps = {}) {
    float_steps.resize(outputs.size(), 0.0);
    b_.SetInputs(input_ids_);
    b_.SetOutputs(std::move(outputs));
    return {std::move(name), b_.Build(), inputs_, std::move(float_steps)};
  }

 private:
  std::mt19937 rng_;
  ModelBuilder b_;
  std::vector<std::vector<uint8_t>> inputs_;
  std::vector<int32_t> input_ids_;
};

std::vector<QuantGraph> Graphs() {
  const auto I8 = tfl::TensorType::INT8;
  const auto U8 = tfl::TensorType::UINT8;
  std::vector<QuantGraph> out;
  {
    // Per-channel CONV_2D (RELU) -> per-channel DEPTHWISE s2 -> ADD -> AVG and MAX pools.
    Maker m(11);
    const int in0 = m.In(I8, {1, 8, 8, 3}, 0.05f, -3);
    const std::vector<float> fs = {0.01f, 0.02f, 0.015f, 0.03f};
    const int f = m.Int8Filter({4, 3, 3, 3}, fs, 0);
    const int t1 = m.Act(I8, {1, 8, 8, 4}, 0.06f, -20);
    Conv2DParams cp;
    cp.padding = tfl::Padding::SAME;
    cp.activation = tfl::ActivationFunctionType::RELU;
    m.b().AddConv2D(in0, f, m.Bias(0.05f, fs, 4), t1, cp);
    const std::vector<float> ds = {0.02f, 0.01f, 0.03f, 0.02f};
    const int df = m.Int8Filter({1, 3, 3, 4}, ds, 3);
    const int t2 = m.Act(I8, {1, 4, 4, 4}, 0.08f, 5);
    DepthwiseConv2DParams dp;
    dp.padding = tfl::Padding::SAME;
    dp.stride_h = dp.stride_w = 2;
    m.b().AddDepthwiseConv2D(t1, df, m.Bias(0.06f, ds, 4), t2, dp);
    const int in1 = m.In(I8, {1, 4, 4, 4}, 0.07f, 10);
    const int t3 = m.Act(I8, {1, 4, 4, 4}, 0.1f, -5);
    m.b().AddAdd(t2, in1, t3);
    const int avg = m.Act(I8, {1, 2, 2, 4}, 0.1f, -5);
    Pool2DParams pp;
    pp.filter_h = pp.filter_w = 2;
    pp.stride_h = pp.stride_w = 2;
    m.b().AddPool2D(Op::AVERAGE_POOL_2D, t3, avg, pp);
    const int mx = m.Act(I8, {1, 3, 3, 4}, 0.1f, -5);
    Pool2DParams mp;
    mp.filter_h = mp.filter_w = 2;
    m.b().AddPool2D(Op::MAX_POOL_2D, t3, mx, mp);
    out.push_back(m.Finish("int8 conv(per-channel)+depthwise(per-channel)+add+pools", {avg, mx}));
  }
  {
    // FULLY_CONNECTED -> SOFTMAX, LOGISTIC, MUL.
    Maker m(12);
    const int in = m.In(I8, {2, 8}, 0.04f, 0);
    const int w = m.Int8Filter({5, 8}, {0.02f}, 0);
    const int t1 = m.Act(I8, {2, 5}, 0.05f, -10);
    m.b().AddFullyConnected(in, w, m.Bias(0.04f, {0.02f}, 5), t1);
    const int sm = m.Act(I8, {2, 5}, 1.0f / 256, -128);
    m.b().AddOperator(Op::SOFTMAX, {t1}, {sm}, tfl::BuiltinOptions::SoftmaxOptions,
                      [](flatbuffers::FlatBufferBuilder& fb) {
                        return tfl::CreateSoftmaxOptions(fb, 1.0f).Union();
                      });
    const int lg = m.Act(I8, {2, 5}, 1.0f / 256, -128);
    m.b().AddUnary(Op::LOGISTIC, t1, lg);
    const int mul = m.Act(I8, {2, 5}, 0.03f, -100);
    m.b().AddBinary(Op::MUL, t1, t1, mul);
    out.push_back(m.Finish("int8 fully_connected+softmax+logistic+mul", {sm, lg, mul}));
  }
  {
    // PAD -> RESIZE_BILINEAR -> CONCATENATION -> MEAN.
    Maker m(13);
    const int in = m.In(I8, {1, 4, 4, 2}, 0.05f, 2);
    const int pads = m.b().AddConstInt32({4, 2}, {0, 0, 1, 1, 1, 1, 0, 0});
    const int padded = m.Act(I8, {1, 6, 6, 2}, 0.05f, 2);
    m.b().AddPad(in, pads, padded);
    const int size = m.b().AddConstInt32({2}, {9, 9});
    const int resized = m.Act(I8, {1, 9, 9, 2}, 0.05f, 2);
    m.b().AddResize(Op::RESIZE_BILINEAR, padded, size, resized, false, true);
    const int in2 = m.In(I8, {1, 9, 9, 3}, 0.05f, 2);
    const int cat = m.Act(I8, {1, 9, 9, 5}, 0.05f, 2);
    m.b().AddConcatenation({resized, in2}, cat, 3);
    const int axes = m.b().AddConstInt32({2}, {1, 2});
    const int mean = m.Act(I8, {1, 1, 1, 5}, 0.03f, -7);
    m.b().AddReducer(Op::MEAN, cat, axes, mean, true);
    out.push_back(m.Finish("int8 pad+resize_bilinear+concatenation+mean", {cat, mean}));
  }
  for (const auto type : {I8, U8}) {
    // MEAN's paths in TFLite 2.9: a 4-D mean over H,W kept as dims, on the
    // input's quantization or another; the general mean, on the same
    // quantization (an integer mean) or another; negative axes.
    const bool i8 = type == I8;
    const int zp = i8 ? -3 : 130;
    Maker m(i8 ? 17 : 18);
    const int in = m.In(type, {2, 5, 7, 6}, 0.05f, zp);
    const int hw = m.b().AddConstInt32({2}, {1, 2});
    const int hw_same = m.Act(type, {2, 1, 1, 6}, 0.05f, zp);
    m.b().AddReducer(Op::MEAN, in, hw, hw_same, true);
    const int hw_other = m.Act(type, {2, 1, 1, 6}, 0.02f, zp + 9);
    m.b().AddReducer(Op::MEAN, in, hw, hw_other, true);
    const int hw_flat = m.Act(type, {2, 6}, 0.05f, zp);
    m.b().AddReducer(Op::MEAN, in, hw, hw_flat, false);
    const int last = m.b().AddConstInt32({2}, {-1, 1});
    const int last_same = m.Act(type, {2, 1, 7, 1}, 0.05f, zp);
    m.b().AddReducer(Op::MEAN, in, last, last_same, true);
    const int last_other = m.Act(type, {2, 7}, 0.03f, zp - 5);
    m.b().AddReducer(Op::MEAN, in, last, last_other, false);
    out.push_back(
        m.Finish(std::string(i8 ? "int8" : "uint8") + " mean: H,W, general, same or other",
                 {hw_same, hw_other, hw_flat, last_same, last_other}));
  }
  {
    // float -> QUANTIZE int8 -> QUANTIZE int8 (requantize) -> DEQUANTIZE.
    Maker m(14);
    const int in = m.FloatIn({1, 40});
    const int q = m.Act(I8, {1, 40}, 0.02f, 3);
    m.b().AddUnary(Op::QUANTIZE, in, q);
    const int rq = m.Act(I8, {1, 40}, 0.03f, -4);
    m.b().AddUnary(Op::QUANTIZE, q, rq);
    const int dq = m.b().AddTensor(tfl::TensorType::FLOAT32, {1, 40});
    m.b().AddDequantize(rq, dq);
    out.push_back(m.Finish("int8 quantize+requantize+dequantize", {q, rq, dq}, {0, 0, 0.03}));
  }
  {
    // uint8 FULLY_CONNECTED -> SOFTMAX, LOGISTIC.
    Maker m(16);
    const int in = m.In(U8, {3, 6}, 0.03f, 128);
    const int w = m.Uint8Filter({4, 6}, 0.02f, 130);
    const int t1 = m.Act(U8, {3, 4}, 0.04f, 120);
    m.b().AddFullyConnected(in, w, m.Bias(0.03f, {0.02f}, 4), t1);
    const int sm = m.Act(U8, {3, 4}, 1.0f / 256, 0);
    m.b().AddOperator(Op::SOFTMAX, {t1}, {sm}, tfl::BuiltinOptions::SoftmaxOptions,
                      [](flatbuffers::FlatBufferBuilder& fb) {
                        return tfl::CreateSoftmaxOptions(fb, 1.0f).Union();
                      });
    const int lg = m.Act(U8, {3, 4}, 1.0f / 256, 0);
    m.b().AddUnary(Op::LOGISTIC, t1, lg);
    out.push_back(m.Finish("uint8 fully_connected+softmax+logistic", {sm, lg}));
  }
  {
    // uint8: CONV_2D (RELU6) -> MAX_POOL -> ADD -> AVERAGE_POOL, and CONCATENATION
    // of differently scaled inputs.
    Maker m(15);
    const int in = m.In(U8, {1, 8, 8, 3}, 0.02f, 128);
    const int f = m.Uint8Filter({4, 3, 3, 3}, 0.01f, 120);
    const int t1 = m.Act(U8, {1, 6, 6, 4}, 0.05f, 100);
    Conv2DParams cp;
    cp.activation = tfl::ActivationFunctionType::RELU6;
    m.b().AddConv2D(in, f, m.Bias(0.02f, {0.01f}, 4), t1, cp);
    const int t2 = m.Act(U8, {1, 3, 3, 4}, 0.05f, 100);
    Pool2DParams pp;
    pp.filter_h = pp.filter_w = 2;
    pp.stride_h = pp.stride_w = 2;
    m.b().AddPool2D(Op::MAX_POOL_2D, t1, t2, pp);
    const int in1 = m.In(U8, {1, 3, 3, 4}, 0.04f, 128);
    const int t3 = m.Act(U8, {1, 3, 3, 4}, 0.06f, 110);
    m.b().AddAdd(t2, in1, t3);
    const int t4 = m.Act(U8, {1, 1, 1, 4}, 0.06f, 110);
    Pool2DParams ap;
    ap.filter_h = ap.filter_w = 3;
    m.b().AddPool2D(Op::AVERAGE_POOL_2D, t3, t4, ap);
    const int cat = m.Act(U8, {1, 3, 3, 8}, 0.07f, 120);
    m.b().AddConcatenation({t3, in1}, cat, 3);
    out.push_back(m.Finish("uint8 conv+max_pool+add+avg_pool+concatenation", {t4, cat}));
  }
  return out;
}

}  // namespace graphs

// Quantized graphs end to end: our reference kernels bit-exact with TFLite's
// builtin kernels; our xnnpack delegate within kQuantizedSteps wherever it
// claims nodes (graphs it leaves wholly to the CPU are not compared again).
TEST(TfliteCrossCheckTest, QuantizedGraphsMatchTensorFlowLite) {
  REQUIRE_TFLITE();
  double worst_ref = 0, worst_xnn = 0;
  int claimed_graphs = 0;
  for (const graphs::QuantGraph& g : graphs::Graphs()) {
    SCOPED_TRACE(g.name);
    Outputs tfl, ref, xnn;
    std::string error;
    ASSERT_TRUE(RunTflite(g.model, g.inputs, 0, &tfl, &error)) << error;
    ASSERT_EQ(tfl.steps.size(), g.float_steps.size());
    for (size_t o = 0; o < tfl.steps.size(); ++o) {
      if (tfl.steps[o] == 0) tfl.steps[o] = g.float_steps[o];
      EXPECT_GT(tfl.steps[o], 0) << "output " << o << " has no step to be judged in";
    }
    runtime::Status s = RunOurs(g.model, g.inputs, "", &ref, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    const double e_ref = Compare(ref, tfl, 0, 0, 0, "reference vs TFLite");
    worst_ref = std::max(worst_ref, e_ref);
    runtime::Placement placement;
    s = RunOurs(g.model, g.inputs, "xnnpack", &xnn, &placement);
    ASSERT_TRUE(s.ok()) << s.message();
    int claimed = 0;
    std::string on_cpu;
    for (const runtime::NodePlacement& n : placement.nodes) {
      if (n.delegate == "xnnpack") {
        ++claimed;
      } else {
        on_cpu += (on_cpu.empty() ? "" : ", ") + n.op + (n.folded ? " (folded)" : "");
      }
    }
    char line[512];
    int len = std::snprintf(line, sizeof line, "%-48s reference max %g LSB", g.name.c_str(), e_ref);
    if (claimed > 0) {
      const double e_xnn =
          Compare(xnn, tfl, 0, 0, conformance::kQuantizedSteps, "xnnpack vs TFLite");
      worst_xnn = std::max(worst_xnn, e_xnn);
      ++claimed_graphs;
      std::snprintf(line + len, sizeof line - len, ", xnnpack %g LSB (%d/%zu nodes; cpu: %s)",
                    e_xnn, claimed, placement.nodes.size(), on_cpu.c_str());
    } else {
      std::snprintf(line + len, sizeof line - len, ", xnnpack claims no node");
    }
    std::printf("%s\n", line);
  }
  std::printf(
      "quantized graphs: reference max %.0f LSB, xnnpack max %.0f LSB (%d graphs claimed)\n",
      worst_ref, worst_xnn, claimed_graphs);
}

// Delegation parity: graphs TensorFlow Lite's XNNPACK delegate takes whole
// are taken whole by ours (and by gpu), and still match TFLite.
namespace parity {

namespace tfl = ::dfarm::tflite;
using Op = tfl::BuiltinOperator;
using testing::Conv2DParams;
using testing::DepthwiseConv2DParams;
using testing::ModelBuilder;
using tfl::TensorType;

std::vector<float> Seeded(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// A converted Keras classifier with a dynamic batch: every activation is
// declared with batch 1 and -1 in shape_signature. x [1,16,16,3] -> CONV_2D
// 3x3 RELU -> DEPTHWISE_CONV_2D 3x3 -> ADD (residual) -> MEAN over H, W
// (keep_dims) -> RESHAPE [-1,8] -> FULLY_CONNECTED -> SOFTMAX [1,4].
std::vector<uint8_t> DynamicBatchClassifier() {
  ModelBuilder b;
  auto act = [&](std::vector<int32_t> shape, const char* name) {
    const int t = b.AddTensor(TensorType::FLOAT32, shape, name);
    shape[0] = -1;
    b.SetShapeSignature(t, shape);
    return t;
  };
  const int x = act({1, 16, 16, 3}, "input");
  const int conv = act({1, 16, 16, 8}, "conv");
  const int dw = act({1, 16, 16, 8}, "depthwise");
  const int sum = act({1, 16, 16, 8}, "residual");
  const int mean = act({1, 1, 1, 8}, "pooled");
  const int flat = act({1, 8}, "flat");
  const int logits = act({1, 4}, "logits");
  const int probs = act({1, 4}, "probs");
  Conv2DParams cp;
  cp.padding = tfl::Padding::SAME;
  cp.activation = tfl::ActivationFunctionType::RELU;
  b.AddConv2D(x, b.AddConstFloat32({8, 3, 3, 3}, Seeded(8 * 27, -0.5f, 0.5f, 1), "conv_w"),
              b.AddConstFloat32({8}, Seeded(8, -0.1f, 0.1f, 2), "conv_b"), conv, cp);
  DepthwiseConv2DParams dp;
  dp.padding = tfl::Padding::SAME;
  b.AddDepthwiseConv2D(conv, b.AddConstFloat32({1, 3, 3, 8}, Seeded(72, -0.5f, 0.5f, 3), "dw_w"),
                       b.AddConstFloat32({8}, Seeded(8, -0.1f, 0.1f, 4), "dw_b"), dw, dp);
  b.AddAdd(conv, dw, sum);
  b.AddReducer(Op::MEAN, sum, b.AddConstInt32({2}, {1, 2}, "axes"), mean, /*keep_dims=*/true);
  b.AddReshape(mean, flat, {-1, 8});
  b.AddFullyConnected(flat, b.AddConstFloat32({4, 8}, Seeded(32, -1.0f, 1.0f, 5), "fc_w"),
                      b.AddConstFloat32({4}, Seeded(4, -0.1f, 0.1f, 6), "fc_b"), logits);
  b.AddOperator(Op::SOFTMAX, {logits}, {probs}, tfl::BuiltinOptions::SoftmaxOptions,
                [](flatbuffers::FlatBufferBuilder& fb) {
                  return tfl::CreateSoftmaxOptions(fb, 1.0f).Union();
                });
  b.SetInputs({x});
  b.SetOutputs({probs});
  return b.Build();
}

// PRELU with slopes stored as float16 and DEQUANTIZEd, as MediaPipe's face
// and palm models write them (folded at load by us, unpacked by TFLite's
// XNNPACK delegate): x [1,8,8,4] -> CONV_2D 1x1 (float16 weights) -> PRELU
// (slope [1,1,8]) -> DEPTHWISE_CONV_2D 3x3 -> PRELU (slope [8]) -> ADD.
std::vector<uint8_t> Fp16SlopePrelu() {
  ModelBuilder b;
  auto fp16 = [&](std::vector<int32_t> shape, size_t n, float lo, float hi, uint32_t seed,
                  const char* name) {
    const int half = b.AddConstFloat16(shape, Seeded(n, lo, hi, seed), name);
    const int full = b.AddTensor(TensorType::FLOAT32, shape, std::string(name) + "_f32");
    b.AddDequantize(half, full);
    return full;
  };
  const int x = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 4}, "input");
  const int conv = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 8}, "conv");
  const int p1 = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 8}, "prelu1");
  const int dw = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 8}, "depthwise");
  const int p2 = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 8}, "prelu2");
  const int out = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 8}, "output");
  b.AddConv2D(x, fp16({8, 1, 1, 4}, 32, -1.0f, 1.0f, 11, "conv_w"),
              fp16({8}, 8, -0.1f, 0.1f, 12, "conv_b"), conv, Conv2DParams{});
  b.AddBinary(Op::PRELU, conv, fp16({1, 1, 8}, 8, 0.05f, 0.5f, 13, "slope1"), p1);
  DepthwiseConv2DParams dp;
  dp.padding = tfl::Padding::SAME;
  b.AddDepthwiseConv2D(p1, fp16({1, 3, 3, 8}, 72, -0.5f, 0.5f, 14, "dw_w"),
                       fp16({8}, 8, -0.1f, 0.1f, 15, "dw_b"), dw, dp);
  b.AddBinary(Op::PRELU, dw, fp16({8}, 8, 0.05f, 0.5f, 16, "slope2"), p2);
  b.AddAdd(p1, p2, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b.Build();
}

// The nodes TFLite's XNNPACK delegate takes from `model` (probed: see
// InterpreterConfig::probe_xnnpack), with MediaPipe's custom op registered
// without a kernel so the selfie models can be probed too. False with
// `error` when TFLite cannot build the interpreter.
bool TfliteXnnpackNodes(const std::vector<uint8_t>& model, std::set<int>* nodes,
                        std::string* error) {
  InterpreterConfig config;
  config.delegate = InterpreterConfig::Delegate::kXnnpack;
  config.probe_xnnpack = true;
  config.placeholder_custom_ops = {"Convolution2DTransposeBias"};
  CreateInfo info;
  if (Tflite()->Create(model, config, &info) == nullptr) {
    *error = info.error;
    return false;
  }
  if (!info.xnnpack_probed) {
    *error = "TensorFlow Lite never asked to replace nodes (the probe saw no Prepare)";
    return false;
  }
  nodes->clear();
  nodes->insert(info.xnnpack_nodes.begin(), info.xnnpack_nodes.end());
  return true;
}

// How `model` splits when the nodes `claimed` run on a delegate: delegated
// partitions and CPU runs, by our partitioner (TFLite's algorithm), over the
// nodes that are not `folded` (constants we evaluate at load and TFLite's
// XNNPACK unpacks, so neither side runs them as a step).
struct Split {
  int delegated = 0;
  int cpu = 0;
};
Split SplitOf(const std::vector<uint8_t>& bytes, const std::vector<bool>& folded,
              const std::set<int>& claimed) {
  std::unique_ptr<runtime::Model> model;
  EXPECT_TRUE(runtime::Model::FromBuffer("model.tflite", bytes, &model).ok());
  if (model == nullptr) return {};
  std::vector<runtime::PartitionerNode> graph;
  const auto* ops = model->subgraph()->operators();
  for (uint32_t i = 0; ops != nullptr && i < ops->size(); ++i) {
    if (i < folded.size() && folded[i]) continue;
    runtime::PartitionerNode n;
    if (ops->Get(i)->inputs() != nullptr) {
      n.inputs.assign(ops->Get(i)->inputs()->begin(), ops->Get(i)->inputs()->end());
    }
    if (ops->Get(i)->outputs() != nullptr) {
      n.outputs.assign(ops->Get(i)->outputs()->begin(), ops->Get(i)->outputs()->end());
    }
    n.supported = claimed.count(static_cast<int>(i)) > 0;
    graph.push_back(std::move(n));
  }
  Split split;
  for (const runtime::NodeSubset& subset : runtime::PartitionGraph(graph)) {
    ++(subset.supported ? split.delegated : split.cpu);
  }
  return split;
}

// `model` on `delegate`: one partition holding every node that is not
// folded, no reason left, outputs within the corpus tolerance of `tfl`.
void ExpectDelegatedWhole(const std::vector<uint8_t>& model,
                          const std::vector<std::vector<uint8_t>>& inputs,
                          const std::string& delegate, const Outputs& tfl) {
  SCOPED_TRACE(delegate);
  Outputs got;
  runtime::Placement placement;
  runtime::Status s = RunOurs(model, inputs, delegate, &got, &placement);
  if (delegate == "gpu" && s.code() == runtime::StatusCode::kUnsupported &&
      s.message().find("OpenCL") != std::string::npos) {
    std::printf("gpu not compared: %s\n", s.message().c_str());
    return;
  }
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(placement.partitions, 1);
  for (const runtime::NodePlacement& n : placement.nodes) {
    EXPECT_TRUE(n.folded || n.delegate == delegate)
        << "node " << n.node << " " << n.op << " on " << n.delegate << ": " << n.reason;
  }
  const double err = Compare(got, tfl, 1e-4, 1e-4, 1, delegate + " vs TFLite");
  std::printf("%-8s %d partition(s), max abs error vs TFLite %.3g\n", delegate.c_str(),
              placement.partitions, err);
}

void ExpectParity(const std::vector<uint8_t>& model) {
  REQUIRE_TFLITE();
  std::vector<size_t> counts;
  ASSERT_TRUE(InputCounts(model, &counts));
  const auto inputs = FloatInputs(counts, -1.0f, 1.0f, 2026);
  Outputs tfl, tfl_xnn;
  std::string error;
  ASSERT_TRUE(RunTflite(model, inputs, 0, &tfl, &error)) << error;
  ASSERT_TRUE(RunTflite(model, inputs, 1, &tfl_xnn, &error)) << error;
  Compare(tfl_xnn, tfl, 1e-4, 1e-4, 1, "TFLite's XNNPACK vs TFLite");
  ExpectDelegatedWhole(model, inputs, "xnnpack", tfl);
  ExpectDelegatedWhole(model, inputs, "gpu", tfl);
  // TFLite's XNNPACK delegate takes every node we do not fold: one partition too.
  std::set<int> claimed;
  ASSERT_TRUE(TfliteXnnpackNodes(model, &claimed, &error)) << error;
  Outputs ours;
  runtime::Placement placement;
  runtime::Status s = RunOurs(model, inputs, "", &ours, &placement);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<bool> folded;
  for (const runtime::NodePlacement& n : placement.nodes) folded.push_back(n.folded);
  const Split split = SplitOf(model, folded, claimed);
  EXPECT_EQ(split.delegated, 1);
  EXPECT_EQ(split.cpu, 0);
}

}  // namespace parity

// A dynamic batch (-1 in shape_signature) is fixed at the declared 1 before
// delegation: xnnpack and gpu take the graph whole, as TFLite's XNNPACK.
TEST(TfliteCrossCheckTest, DynamicBatchGraphIsDelegatedWholeAsInTensorFlowLite) {
  parity::ExpectParity(parity::DynamicBatchClassifier());
}

// A slope folded from float16 at load is a constant for xnnpack's PRELU.
TEST(TfliteCrossCheckTest, Fp16SlopePreluIsDelegatedWholeAsInTensorFlowLite) {
  parity::ExpectParity(parity::Fp16SlopePrelu());
}

// Every corpus model: the partitions of our xnnpack (and gpu) delegate
// against the nodes TFLite 2.9's XNNPACK delegate takes (probed, then split
// by the same partitioner): as many delegated partitions, every node TFLite's
// takes among ours, gpu no more partitions than xnnpack. Prints the table the
// delegation notes quote, and the nodes only ours takes.
TEST(TfliteCrossCheckTest, CorpusPartitionsMatchTensorFlowLitesXnnpack) {
  REQUIRE_TFLITE();
  const fs::path dir = DFARM_MODELS_DIR;
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".tflite") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  std::printf("%-40s %5s %6s | %-22s | %-22s | %s\n", "model", "nodes", "folded", "ours xnnpack",
              "TFLite 2.9 XNNPACK", "ours gpu");
  for (const fs::path& path : paths) {
    const std::string name = path.filename().string();
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = Slurp(path);
    std::vector<size_t> counts;
    ASSERT_TRUE(InputCounts(bytes, &counts));
    const auto inputs = FloatInputs(counts, -1.0f, 1.0f, 2024);
    Outputs out;
    runtime::Placement xnn;
    runtime::Status s = RunOurs(bytes, inputs, "xnnpack", &out, &xnn);
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<bool> folded;
    std::set<int> ours;
    for (const runtime::NodePlacement& n : xnn.nodes) {
      folded.push_back(n.folded);
      if (n.delegate == "xnnpack") ours.insert(n.node);
    }
    const int num_folded = static_cast<int>(std::count(folded.begin(), folded.end(), true));
    const parity::Split our_split = parity::SplitOf(bytes, folded, ours);
    EXPECT_EQ(our_split.delegated, xnn.partitions);
    std::set<int> theirs;
    std::string error;
    ASSERT_TRUE(parity::TfliteXnnpackNodes(bytes, &theirs, &error)) << error;
    std::set<int> theirs_run;  // without the nodes we fold
    for (int n : theirs) {
      if (!folded[n]) theirs_run.insert(n);
    }
    const parity::Split their_split = parity::SplitOf(bytes, folded, theirs_run);
    // As many delegated partitions, and never a node fewer: ours may take
    // more (ops this XNNPACK has that 2.9's delegate does not map).
    EXPECT_EQ(our_split.delegated, their_split.delegated);
    std::string more;
    for (int n : theirs_run) {
      EXPECT_TRUE(ours.count(n) > 0) << "TFLite's XNNPACK takes node " << n << " ("
                                     << xnn.nodes[n].op << "), ours not: " << xnn.nodes[n].reason;
    }
    for (int n : ours) {
      if (theirs_run.count(n) == 0) more += " " + std::to_string(n) + " " + xnn.nodes[n].op;
    }
    runtime::Placement gpu;
    Outputs gpu_out;
    s = RunOurs(bytes, inputs, "gpu", &gpu_out, &gpu);
    std::string gpu_cell = "no OpenCL";
    if (s.ok()) {
      gpu_cell = std::to_string(gpu.partitions) + " partition(s)";
      EXPECT_LE(gpu.partitions, xnn.partitions);
    } else {
      EXPECT_EQ(s.code(), runtime::StatusCode::kUnsupported) << s.message();
    }
    auto cell = [](const parity::Split& split, size_t taken) {
      return std::to_string(split.delegated) + " + " + std::to_string(split.cpu) + " cpu (" +
             std::to_string(taken) + " nodes)";
    };
    std::printf("%-40s %5zu %6d | %-22s | %-22s | %s\n", name.c_str(), xnn.nodes.size(), num_folded,
                cell(our_split, ours.size()).c_str(), cell(their_split, theirs_run.size()).c_str(),
                gpu_cell.c_str());
    if (!more.empty()) std::printf("  ours only:%s\n", more.c_str());
  }
}

// The same graphs on our gpu delegate, which takes quantized models as
// TensorFlow Lite's GPU delegate does by default (computed in float, weights
// dequantized once, inputs and outputs converted at the partition's edges,
// every quantized tensor rounded to its grid): each graph one partition, within
// kQuantizedSteps of TFLite's builtin kernels, with fp32 and fp16 storage.
// Skipped without the gpu delegate or an OpenCL device.
TEST(TfliteCrossCheckTest, QuantizedGraphsOnGpuMatchTensorFlowLite) {
  REQUIRE_TFLITE();
  const delegates::RegisteredDelegate* entry = nullptr;
  if (!delegates::FindDelegate("gpu", &entry).ok()) GTEST_SKIP() << "no gpu delegate in this build";
  std::unique_ptr<runtime::Delegate> probe;
  const runtime::Status made = entry->create({}, &probe);
  if (made.code() == runtime::StatusCode::kUnsupported) GTEST_SKIP() << made.message();
  ASSERT_TRUE(made.ok()) << made.message();
  double worst[2] = {0, 0};
  for (const graphs::QuantGraph& g : graphs::Graphs()) {
    SCOPED_TRACE(g.name);
    Outputs tfl;
    std::string error;
    ASSERT_TRUE(RunTflite(g.model, g.inputs, 0, &tfl, &error)) << error;
    for (size_t o = 0; o < tfl.steps.size(); ++o) {
      if (tfl.steps[o] == 0) tfl.steps[o] = g.float_steps[o];
    }
    for (int fp16 = 0; fp16 < 2; ++fp16) {
      Outputs gpu;
      runtime::Placement placement;
      runtime::Status s = RunOurs(g.model, g.inputs, "gpu", &gpu, &placement,
                                  {{"precision_loss_allowed", fp16 ? "true" : "false"}});
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(placement.partitions, 1);
      for (const runtime::NodePlacement& n : placement.nodes) {
        EXPECT_TRUE(n.folded || n.delegate == "gpu") << n.op << ": " << n.reason;
      }
      const double e = Compare(gpu, tfl, 0, 0, conformance::kQuantizedSteps,
                               fp16 ? "gpu fp16 vs TFLite" : "gpu vs TFLite");
      worst[fp16] = std::max(worst[fp16], e);
      std::printf("%-48s gpu%s %g LSB\n", g.name.c_str(), fp16 ? " fp16" : "", e);
    }
  }
  std::printf("quantized graphs on gpu: max %.0f LSB, fp16 max %.0f LSB\n", worst[0], worst[1]);
}

}  // namespace
}  // namespace dfarm::runner::tflite
