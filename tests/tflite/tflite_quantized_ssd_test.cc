// The deep quantized SSD-like network (quantized_ssd.h), uint8 and
// int8, 3 seeds: our kernels must match TensorFlow Lite 2.9's builtin
// kernels bit for bit on every layer (every activation is a model output, so
// a difference prints the first layer that makes it) and on the detections
// (shapes, count, and every box, class and score up to the count). Skips,
// naming the path, when TFLite's library is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "agent/runner/tflite_c.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/tflite/quantized_ssd.h"
#include "tests/tflite/tflite_test_util.h"

namespace dfarm::runner::tflite {
namespace {

using ::dfarm::tflite_test::BuildGemmOps;
using ::dfarm::tflite_test::BuildSsd;
using ::dfarm::tflite_test::Network;
using ::dfarm::tflite_test::Tflite;

// Each quantized output's codes, widened to int; the post-process's float
// outputs and their shapes apart.
using Codes = std::vector<std::vector<int>>;
struct SsdOutputs {
  Codes codes;
  std::vector<std::vector<float>> detections;
  std::vector<std::vector<int32_t>> detection_shapes;
};

template <typename T>
std::vector<int> Widen(const void* data, size_t n) {
  const T* p = static_cast<const T*>(data);
  return std::vector<int>(p, p + n);
}

// Files output `bytes` (of type int8, uint8 or float32) into `out`.
void Collect(bool is_float, bool is_int8, const void* data, size_t bytes,
             std::vector<int32_t> shape, SsdOutputs* out) {
  if (is_float) {
    std::vector<float> v(bytes / sizeof(float));
    std::memcpy(v.data(), data, v.size() * sizeof(float));
    out->detections.push_back(std::move(v));
    out->detection_shapes.push_back(std::move(shape));
  } else {
    out->codes.push_back(is_int8 ? Widen<int8_t>(data, bytes) : Widen<uint8_t>(data, bytes));
  }
}

runtime::Status RunOurs(const Network& net, SsdOutputs* out) {
  std::unique_ptr<runtime::Model> model;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("ssd.tflite", net.model, &model));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(*model, resolver);
  DFARM_RETURN_IF_ERROR(interpreter.AllocateTensors());
  runtime::Tensor* in = interpreter.inputs()[0];
  if (in->bytes != net.input.size()) return runtime::Status::Error("input size differs");
  std::memcpy(in->data, net.input.data(), in->bytes);
  DFARM_RETURN_IF_ERROR(interpreter.Invoke());
  for (const runtime::Tensor* t : interpreter.outputs()) {
    Collect(t->dtype == runtime::DType::kFloat32, t->dtype == runtime::DType::kInt8, t->data,
            t->bytes, t->shape, out);
  }
  return runtime::Status::Ok();
}

bool RunTflite(const Network& net, SsdOutputs* out, std::string* error) {
  std::unique_ptr<Interpreter> in = Tflite()->Create(net.model, 1, 0, error);
  if (in == nullptr) return false;
  if (!in->SetInput(0, net.input)) {
    *error = in->last_error();
    return false;
  }
  if (!in->Invoke()) {
    *error = "Invoke failed: " + in->last_error();
    return false;
  }
  for (size_t o = 0; o < in->num_outputs(); ++o) {
    const TensorData t = in->Output(o);
    Collect(t.type == CType::kFloat32, t.type == CType::kInt8, t.bytes.data(), t.bytes.size(),
            t.shape, out);
  }
  return true;
}

// The post-process's outputs: the shapes TFLite computed, the count, and
// every box, class and score up to the count, bit for bit (rows past it are
// padding TFLite leaves unspecified). Returns the number of detections.
int CompareDetections(const SsdOutputs& ours, const SsdOutputs& want) {
  EXPECT_EQ(ours.detection_shapes, want.detection_shapes);
  if (want.detections.size() != 4 || ours.detections.size() != 4 ||
      want.detections[3].size() != 1 || ours.detections[3].size() != 1) {
    ADD_FAILURE() << "expected 4 detection outputs, the last a count";
    return 0;
  }
  const float count = want.detections[3][0];
  EXPECT_EQ(ours.detections[3][0], count) << "num_detections";
  const size_t rows = static_cast<size_t>(count);
  const size_t widths[] = {4, 1, 1};
  for (size_t o = 0; o < 3; ++o) {
    const size_t n = std::min(rows * widths[o], want.detections[o].size());
    if (ours.detections[o].size() < n) {
      ADD_FAILURE() << "detection output " << o << " has " << ours.detections[o].size()
                    << " values, TFLite's " << want.detections[o].size();
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      const float a = ours.detections[o][i], b = want.detections[o][i];
      EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0)
          << "detection output " << o << " [" << i << "]: ours " << a << ", TFLite " << b;
    }
  }
  return static_cast<int>(count);
}

// Compares layer by layer; prints each differing layer (the first one is
// where the arithmetic departs from TFLite's). Returns the largest difference
// in quantization steps over all layers.
int CompareLayers(const Network& net, const Codes& ours, const Codes& want) {
  EXPECT_EQ(ours.size(), want.size());
  int worst = 0;
  for (size_t o = 0; o < std::min(ours.size(), want.size()); ++o) {
    EXPECT_EQ(ours[o].size(), want[o].size()) << net.names[o];
    int max_diff = 0, count = 0, first = -1;
    for (size_t i = 0; i < std::min(ours[o].size(), want[o].size()); ++i) {
      const int d = std::abs(ours[o][i] - want[o][i]);
      if (d == 0) continue;
      if (first < 0) first = static_cast<int>(i);
      max_diff = std::max(max_diff, d);
      ++count;
    }
    // A layer stuck on a few codes (saturated) would hide arithmetic differences.
    std::vector<bool> seen(256, false);
    int distinct = 0;
    for (int v : want[o]) {
      if (!seen[v & 255]) ++distinct;
      seen[v & 255] = true;
    }
    EXPECT_GE(distinct, 24) << net.names[o] << " holds too few distinct values";
    if (count > 0) {
      std::printf("  %-28s %6d of %6zu differ, max %d steps (first [%d]: ours %d, TFLite %d)\n",
                  net.names[o].c_str(), count, want[o].size(), max_diff, first, ours[o][first],
                  want[o][first]);
    }
    worst = std::max(worst, max_diff);
  }
  return worst;
}

void ExpectBitExact(bool int8, Network (*build)(bool int8, uint32_t seed) = &BuildSsd) {
  REQUIRE_TFLITE();
  int detections = 0;
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Network net = build(int8, seed);
    SsdOutputs want, ours;
    std::string error;
    ASSERT_TRUE(RunTflite(net, &want, &error)) << error;
    const runtime::Status s = RunOurs(net, &ours);
    ASSERT_TRUE(s.ok()) << s.message();
    std::printf("%s %s, seed %u, %zu layers compared:\n", int8 ? "int8" : "uint8",
                build == &BuildSsd ? "SSD" : "GEMM ops", seed, net.names.size());
    const int worst = CompareLayers(net, ours.codes, want.codes);
    std::printf("  max difference %d steps\n", worst);
    EXPECT_EQ(worst, 0) << "reference kernels differ from TFLite 2.9 (first layer listed above)";
    ASSERT_EQ(want.detections.size(), net.detections ? 4u : 0u);
    if (net.detections) {
      const int count = CompareDetections(ours, want);
      std::printf("  %d detections, the same bits\n", count);
      detections += count;
    }
  }
  if (build == &BuildSsd) {
    EXPECT_GE(detections, 6) << "the seeds should give detections to compare";
  }
}

TEST(TfliteQuantizedSsdTest, Uint8NetworkIsBitExactWithTensorFlowLite) { ExpectBitExact(false); }

TEST(TfliteQuantizedSsdTest, Int8NetworkIsBitExactWithTensorFlowLite) { ExpectBitExact(true); }

TEST(TfliteQuantizedSsdTest, TransposeConvAndBatchMatMulAreBitExactWithTensorFlowLite) {
  ExpectBitExact(false, &BuildGemmOps);
  ExpectBitExact(true, &BuildGemmOps);
}

}  // namespace
}  // namespace dfarm::runner::tflite
