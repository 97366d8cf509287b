// The digits fixture's models (tests/eval/digits_fixture.h) through
// TensorFlow Lite 2.9's builtin kernels (1 thread) and through our runtime,
// on every held-out image preprocessed by the product: the float32 model's
// top-1 is the same wherever numpy's top-2 logits are apart, and the int8
// model's outputs are the same bit for bit. Skips, naming the path, when
// TFLite's library is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "agent/runner/tflite_c.h"
#include "tests/eval/digits_fixture.h"
#include "tests/tflite/tflite_test_util.h"

namespace dfarm::runner::tflite {
namespace {

namespace fs = std::filesystem;
using ::dfarm::testing::DigitsFixture;
using ::dfarm::tflite_test::Tflite;

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// TFLite's float32 output 0 for each input; empty, with a failure, on error.
std::vector<std::vector<float>> RunTflite(const std::string& model,
                                          const std::vector<std::string>& inputs) {
  std::string error;
  std::unique_ptr<Interpreter> in = Tflite()->Create(ReadBytes(model), 1, 0, &error);
  EXPECT_NE(in, nullptr) << model << ": " << error;
  if (in == nullptr) return {};
  std::vector<std::vector<float>> outputs;
  for (const std::string& input : inputs) {
    const bool set = in->SetInput(0, std::vector<uint8_t>(input.begin(), input.end()));
    EXPECT_TRUE(set && in->Invoke()) << model << ": " << in->last_error();
    if (!set) return {};
    TensorData out = in->Output(0);
    EXPECT_EQ(out.type, CType::kFloat32) << model;
    std::vector<float>& values = outputs.emplace_back(out.bytes.size() / sizeof(float));
    std::memcpy(values.data(), out.bytes.data(), values.size() * sizeof(float));
  }
  return outputs;
}

TEST(TfliteDigitsTest, BothModelsMatchTensorFlowLite) {
  REQUIRE_TFLITE();
  std::string dir = (fs::temp_directory_path() / "dfarm-tflite-digits-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto fixture = testing::MakeDigitsFixture(dir);
  ASSERT_TRUE(fixture) << fixture.message();
  auto inputs = testing::DigitsInputs(*fixture);
  ASSERT_TRUE(inputs) << inputs.message();
  const size_t n = fixture->images.size();

  auto ours_float = testing::RunDigitsModel(fixture->float_model, *inputs);
  ASSERT_TRUE(ours_float) << ours_float.message();
  const std::vector<std::vector<float>> theirs_float = RunTflite(fixture->float_model, *inputs);
  ASSERT_EQ(theirs_float.size(), n);
  int compared = 0, tflite_correct = 0;
  double max_error = 0;
  for (size_t i = 0; i < n; ++i) {
    const int top1 = testing::ArgMax(theirs_float[i]);
    tflite_correct += top1 == fixture->images[i].label;
    ASSERT_EQ(theirs_float[i].size(), ours_float->outputs[i].size());
    for (size_t c = 0; c < theirs_float[i].size(); ++c) {
      max_error =
          std::max(max_error, std::fabs(double{theirs_float[i][c]} - ours_float->outputs[i][c]));
    }
    if (fixture->images[i].margin <= 1e-4) continue;
    ++compared;
    EXPECT_EQ(top1, testing::ArgMax(ours_float->outputs[i])) << fixture->images[i].path;
    EXPECT_EQ(top1, fixture->images[i].numpy_top1) << fixture->images[i].path;
  }
  EXPECT_LT(max_error, 1e-5);

  auto ours_int8 = testing::RunDigitsModel(fixture->int8_model, *inputs);
  ASSERT_TRUE(ours_int8) << ours_int8.message();
  const std::vector<std::vector<float>> theirs_int8 = RunTflite(fixture->int8_model, *inputs);
  ASSERT_EQ(theirs_int8.size(), n);
  int int8_correct = 0, int8_differ = 0;
  for (size_t i = 0; i < n; ++i) {
    int8_correct += testing::ArgMax(theirs_int8[i]) == fixture->images[i].label;
    int8_differ += theirs_int8[i] != ours_int8->outputs[i];
    EXPECT_EQ(theirs_int8[i], ours_int8->outputs[i]) << fixture->images[i].path;
  }
  std::printf(
      "digits on TFLite %s: float32 top-1 %.4f (%d of %zu compared with numpy, max "
      "probability error vs ours %.3g); int8 top-1 %.4f, %d outputs differ from ours\n",
      Tflite()->Version().c_str(), tflite_correct / static_cast<double>(n), compared, n, max_error,
      int8_correct / static_cast<double>(n), int8_differ);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace dfarm::runner::tflite
