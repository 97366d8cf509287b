// ProfileRuns on the delegates that time the nodes inside their partitions
// (xnnpack; gpu where an OpenCL device is): a partition's DELEGATE entry is
// its time in the profiled runs, which its nodes' entries split, so they add
// up to it but for rounding. Structure only: no verdict reads how long
// anything took.
#include "agent/runner/profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "delegates/registry.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::runner {
namespace {

namespace tfl = ::dfarm::tflite;
using ::dfarm::testing::Conv2DParams;
using ::dfarm::testing::ModelBuilder;
using runtime::Status;
using runtime::StatusCode;
using ::testing::HasSubstr;

// Profiles `bytes` on `delegate` (node timing enabled) over `runs` runs, on
// inputs filled with a fixed pattern. kUnsupported: the delegate cannot run
// here.
Status ProfileModel(const std::vector<uint8_t>& bytes, const std::string& delegate, uint32_t runs,
                    Profile* out) {
  std::unique_ptr<runtime::Model> model;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("profiled.tflite", bytes, &model));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  const delegates::RegisteredDelegate* entry = nullptr;
  DFARM_RETURN_IF_ERROR(delegates::FindDelegate(delegate, &entry));
  std::unique_ptr<runtime::Delegate> d;
  DFARM_RETURN_IF_ERROR(entry->create({}, &d));
  DFARM_RETURN_IF_ERROR(d->EnableProfiling());
  runtime::Interpreter interpreter(*model, resolver);
  interpreter.AddDelegate(d.get());
  DFARM_RETURN_IF_ERROR(interpreter.AllocateTensors());
  for (runtime::Tensor* t : interpreter.inputs()) {
    if (t->dtype != runtime::DType::kFloat32) continue;
    float* f = t->data_as<float>();
    for (int64_t i = 0; i < t->num_elements(); ++i) f[i] = std::sin(0.1f * static_cast<float>(i));
  }
  return ProfileRuns(interpreter, interpreter.placement(), runs, out);
}

// Every partition whose nodes were timed: one entry per node after its own,
// in the partition's order, each >= 0, adding up to the partition's entry;
// PartitionTimes() and the text say the same. Returns how many partitions.
size_t ExpectNodesAddUp(const Profile& p) {
  size_t timed = 0;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const NodeProfile& whole = p.nodes[i];
    if (whole.in_partition || whole.partition < 0) continue;
    EXPECT_EQ(whole.op, "DELEGATE");
    size_t k = i + 1;
    double sum = 0;
    for (; k < p.nodes.size() && p.nodes[k].in_partition; ++k) {
      const NodeProfile& n = p.nodes[k];
      EXPECT_EQ(n.partition, whole.partition);
      EXPECT_EQ(n.delegate, whole.delegate);
      EXPECT_NE(n.op, "DELEGATE");
      EXPECT_TRUE(n.nodes.empty());
      const size_t at = k - i - 1;
      EXPECT_EQ(n.index, at < whole.nodes.size() ? whole.nodes[at] : -1);
      EXPECT_GE(n.mean_us, 0);
      sum += n.mean_us;
    }
    if (k == i + 1) continue;  // timed as a whole only
    ++timed;
    SCOPED_TRACE("partition " + std::to_string(whole.partition));
    EXPECT_EQ(k - i - 1, whole.nodes.size());
    EXPECT_TRUE(std::isfinite(sum));
    EXPECT_NEAR(sum, whole.mean_us, 1e-9 * whole.mean_us);
    EXPECT_GE(whole.plain_us, 0);
  }
  const std::vector<PartitionTime> times = PartitionTimes(p);
  EXPECT_EQ(times.size(), timed);
  for (const PartitionTime& t : times) EXPECT_NEAR(t.nodes_us, t.whole_us, 1e-9 * t.whole_us);
  if (timed > 0) {
    EXPECT_THAT(PartitionProfileText(p), HasSubstr(" us run plainly ("));
  }
  return timed;
}

// CONV_2D -> TANH -> CONV_2D: xnnpack leaves the TANH to the CPU, so two
// partitions of one node each.
std::vector<uint8_t> ConvTanhConv() {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "x");
  std::vector<float> w(3 * 3 * 3 * 2), w2(2 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = std::cos(static_cast<float>(i));
  const int f1 = b.AddConstFloat32({3, 3, 3, 2}, w);
  const int b1 = b.AddConstFloat32({3}, {0.1f, -0.2f, 0.3f});
  const int f2 = b.AddConstFloat32({2, 3, 3, 3}, w2);
  const int b2 = b.AddConstFloat32({2}, {0.5f, -0.5f});
  const int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3});
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "out");
  const Conv2DParams same{tfl::Padding::SAME};
  b.AddConv2D(x, f1, b1, t1, same);
  b.AddUnary(tfl::BuiltinOperator::TANH, t1, t2);
  b.AddConv2D(t2, f2, b2, out, same);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b.Build();
}

// The model XNNPACK fuses nodes of (the PAD and clamps read 0 on xnnpack).
std::vector<uint8_t> PadConvReluAdd() { return ::dfarm::testing::PadConvReluAdd().Build(); }

// The delegates that time nodes, each skipped where it cannot run.
const char* const kNodeTimingDelegates[] = {"xnnpack", "gpu"};

TEST(ProfileTest, NodeTimesAddUpToTheirPartitionOnBuiltModels) {
  for (const char* delegate : kNodeTimingDelegates) {
    SCOPED_TRACE(delegate);
    Profile p;
    Status s = ProfileModel(ConvTanhConv(), delegate, 3, &p);
    if (s.code() == StatusCode::kUnsupported) continue;  // no OpenCL device
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(p.runs, 3u);
    const size_t partitions = ExpectNodesAddUp(p);
    EXPECT_GE(partitions, 1u);
    if (std::string(delegate) == "xnnpack") {
      EXPECT_EQ(partitions, 2u);
    }
    s = ProfileModel(PadConvReluAdd(), delegate, 2, &p);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(ExpectNodesAddUp(p), 1u);
  }
}

TEST(ProfileTest, NodeTimesAddUpToTheirPartitionOnCorpusModels) {
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no models folder " << dir;
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".tflite") continue;
    ++models;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
    for (const char* delegate : kNodeTimingDelegates) {
      SCOPED_TRACE(entry.path().filename().string() + " on " + delegate);
      Profile p;
      const Status s = ProfileModel(bytes, delegate, 1, &p);
      if (s.code() == StatusCode::kUnsupported) continue;  // no OpenCL device
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_GE(ExpectNodesAddUp(p), 1u);
    }
  }
  if (models == 0) GTEST_SKIP() << "no .tflite files in " << dir;
}

}  // namespace
}  // namespace dfarm::runner
