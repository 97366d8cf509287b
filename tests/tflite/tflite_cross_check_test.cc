// DelegateFarm against TensorFlow Lite itself (2.9's C library, loaded with
// dlopen; see tflite_c.h): the corpus models and the conformance catalog run
// through TFLite and through our reference kernels and xnnpack delegate on the
// same input bytes. Float outputs agree within 1e-4 abs + 1e-4 rel; quantized
// ones within 1 quantization step (reference kernels, which follow TFLite's
// fixed-point arithmetic) or 2 (xnnpack, which requantizes in float32).
// Skips, naming the path, when the library is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "delegates/conformance/catalog.h"
#include "delegates/registry.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/tflite/tflite_c.h"

namespace dfarm::tflite_ref {
namespace {

namespace fs = std::filesystem;

Library* Tflite() {
  static std::string error;
  static std::unique_ptr<Library> lib = Library::Load(DefaultLibraryPath(DFARM_TFLITE_LIB), &error);
  if (lib == nullptr) std::fprintf(stderr, "%s\n", error.c_str());
  return lib.get();
}

#define REQUIRE_TFLITE()                                                                     \
  if (Tflite() == nullptr) {                                                                 \
    GTEST_SKIP() << "no TensorFlow Lite library at " << DefaultLibraryPath(DFARM_TFLITE_LIB) \
                 << " (scripts/setup.sh)";                                                   \
  }

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
                        const std::string& delegate, Outputs* out, int* partitions) {
  std::unique_ptr<runtime::Model> model;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("model.tflite", model_bytes, &model));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  std::unique_ptr<runtime::Delegate> d;
  if (!delegate.empty()) {
    const delegates::Delegate* entry = nullptr;
    DFARM_RETURN_IF_ERROR(delegates::FindDelegate(delegate, &entry));
    DFARM_RETURN_IF_ERROR(entry->create({}, &d));
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
  if (partitions != nullptr) *partitions = interpreter.placement().partitions;
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
    int partitions = 0;
    runtime::Status s = RunOurs(bytes, inputs, "", &ref, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    s = RunOurs(bytes, inputs, "xnnpack", &xnn, &partitions);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(partitions, 1);
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
    if (c.name.find("FULLY_CONNECTED int8 per-channel") == 0) {
      // TFLite 2.9 predates per-channel FULLY_CONNECTED: it returns zeros.
      ++refused;
      std::printf("%-66s not compared: TFLite 2.9 has no per-channel FULLY_CONNECTED\n",
                  c.name.c_str());
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
      worst_steps_ref =
          std::max(worst_steps_ref, Compare(ref, tfl, 0, 0, 1, "reference vs TFLite"));
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

}  // namespace
}  // namespace dfarm::tflite_ref
