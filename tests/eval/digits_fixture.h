// The digits fixture: a real labelled classification set and two models for
// it, made without a download (tests/eval/README.md). MakeDigitsFixture runs
// tests/eval/digits.py (scikit-learn's handwritten digits, a seeded split, a
// 64 -> 32 -> 10 perceptron trained in numpy) into a folder and builds the
// trained weights into a float32 and an int8 .tflite with ModelBuilder.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "delegates/delegate_options.h"
#include "harness/spec/input_sets.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {

inline constexpr int kDigitsClasses = 10;

// weights.json: FULLY_CONNECTED's [units][depth] layout, flattened row-major.
struct DigitsWeights {
  std::vector<float> w1;  // [32][64]
  std::vector<float> b1;  // [32]
  std::vector<float> w2;  // [10][32]
  std::vector<float> b2;  // [10]
  // The int8 model's activation ranges, measured on the training images.
  double hidden_max = 0;
  double logits_min = 0;
  double logits_max = 0;
  double numpy_held_out_top1 = 0;  // numpy's accuracy on the held-out images
};

// One held-out image, as numpy saw it.
struct DigitsImage {
  std::string path;  // absolute: <dataset_dir>/<label>/<n>.png
  int label = 0;
  int numpy_top1 = 0;
  double margin = 0;  // numpy's largest logit minus its second largest
  std::array<double, kDigitsClasses> logits{};
};

struct DigitsFixture {
  std::string dir;          // the folder given
  std::string float_model;  // <dir>/digits_float.tflite
  std::string int8_model;   // <dir>/digits_int8.tflite
  std::string dataset_dir;  // <dir>/digits: <label>/<n>.png (ImageNet-style)
  std::string list_file;    // <dataset_dir>/images.csv: "image,label", then one row per image
  std::string labels_file;  // <dataset_dir>/labels.txt: "0".."9", line i names output i
  DigitsWeights weights;
  std::vector<DigitsImage> images;  // the held-out images, in images.csv's order
};

// Runs digits.py (seed `seed`) into `dir` (created; what it holds of a former
// run is overwritten) and writes both models there. Errors name the script,
// file or entry at fault, with the script's output when it failed.
Result<DigitsFixture> MakeDigitsFixture(const std::string& dir, int seed = 0);

// Runs digits.py alone into `dir` (its log in <dir>/digits.log).
Result<void> RunDigitsScript(const std::string& dir, int seed);

// Reads <dir>/weights.json as digits.py writes it.
Result<DigitsWeights> ReadDigitsWeights(const std::string& dir);

// The preprocessing both models expect, as an image input set: 8x8, GRAY,
// NHWC, float32, each pixel p becoming p * (1/255).
harness::ImageInputsSpec DigitsInputSpec();

// Each held-out image as the product preprocesses it (harness::DecodeImage,
// then harness::ImageToTensor under DigitsInputSpec()): the models' input
// bytes, in `fixture.images`' order. Errors name the image.
Result<std::vector<std::string>> DigitsInputs(const DigitsFixture& fixture);

// What RunDigitsModel saw: output 0 (float32) of each run, and where the
// nodes ran.
struct DigitsRun {
  std::vector<std::vector<float>> outputs;
  int nodes = 0;            // the model's nodes
  int delegated_nodes = 0;  // those the delegate took
};

// Runs the .tflite at `model` with our runtime (runtime::Interpreter, every
// reference kernel, and `delegate` from delegates/registry.h with `options`
// unless it is "cpu") once per entry of `inputs` (input 0's bytes). A
// delegate this build or machine lacks (unknown, or its factory answers
// kUnsupported) is an error of kind kNotFound; other errors name the model
// and run.
Result<DigitsRun> RunDigitsModel(const std::string& model, const std::vector<std::string>& inputs,
                                 const std::string& delegate = "cpu",
                                 const delegates::DelegateOptions& options = {});

// The index of the largest value (the first of equals).
int ArgMax(const std::vector<float>& values);

// The float32 model: input [1,8,8,1] float32 -> FULLY_CONNECTED(32, RELU) ->
// FULLY_CONNECTED(10) -> SOFTMAX -> output [1,10] float32 probabilities.
ModelBuilder BuildDigitsFloatModel(const DigitsWeights& w);

// The same network quantized as TensorFlow Lite's post-training int8
// quantization writes it, float in and out: QUANTIZE (int8, scale 1/255,
// zero point -128, so each 8-bit pixel maps to one int8 value) ->
// FULLY_CONNECTED int8 with RELU (weights int8 symmetric per tensor, bias
// int32 at input scale x weight scale; output scale hidden_max/255, zero
// point -128) -> FULLY_CONNECTED int8 (logits over [min(logits_min, 0),
// max(logits_max, 0)]) -> SOFTMAX int8 (scale 1/256, zero point -128) ->
// DEQUANTIZE -> output [1,10] float32 probabilities.
ModelBuilder BuildDigitsInt8Model(const DigitsWeights& w);

}  // namespace dfarm::testing
