#include "tests/eval/digits_fixture.h"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "agent/base/regular_file.h"
#include "agent/base/subprocess.h"
#include "delegates/registry.h"
#include "nlohmann/json.hpp"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"

namespace dfarm::testing {
namespace {

namespace fs = std::filesystem;
using tfl::TensorType;

constexpr int kHidden = 32;
constexpr int kDepth = 64;
constexpr float kInputScale = 1.0f / 255.0f;

// The python with numpy and scikit-learn, and the script (CMake sets both).
std::string Python() {
  const char* env = std::getenv("DFARM_DIGITS_PYTHON");
  return env != nullptr && *env != '\0' ? env : DFARM_DIGITS_PYTHON;
}

Result<std::vector<float>> FloatArray(const nlohmann::json& doc, const char* key, size_t rows,
                                      size_t cols, const std::string& file) {
  std::vector<float> out;
  const nlohmann::json* v = doc.contains(key) ? &doc.at(key) : nullptr;
  auto bad = [&](const std::string& why) {
    return MakeError("'" + file + "': \"" + key + "\" " + why + " (rerun tests/eval/digits.py)");
  };
  if (v == nullptr || !v->is_array()) return bad("is missing or not an array");
  auto take_row = [&](const nlohmann::json& row, size_t n) -> bool {
    if (!row.is_array() || row.size() != n) return false;
    for (const auto& x : row) {
      if (!x.is_number()) return false;
      out.push_back(x.get<float>());  // digits.py writes float32 values exactly
    }
    return true;
  };
  if (cols == 0) {
    if (!take_row(*v, rows)) return bad("must hold " + std::to_string(rows) + " numbers");
    return out;
  }
  if (v->size() != rows) return bad("must have " + std::to_string(rows) + " rows");
  for (const auto& row : *v) {
    if (!take_row(row, cols)) return bad("rows must hold " + std::to_string(cols) + " numbers");
  }
  return out;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream s(line);
  for (std::string cell; std::getline(s, cell, ',');) cells.push_back(cell);
  return cells;
}

// predictions.csv: "image,label,top1,margin,logit0..logit9" after a header.
Result<std::vector<DigitsImage>> ReadPredictions(const std::string& dir,
                                                 const std::string& dataset_dir) {
  const std::string file = (fs::path(dir) / "predictions.csv").string();
  auto text = ReadRegularFile(file, "digits predictions", 16u << 20);
  if (!text) return text.error();
  std::vector<DigitsImage> images;
  std::stringstream lines(*text);
  std::string line;
  std::getline(lines, line);  // the header
  for (int row = 2; std::getline(lines, line); ++row) {
    const std::vector<std::string> cells = SplitCsv(line);
    if (cells.size() != 4 + kDigitsClasses) {
      return MakeError("'" + file + "' line " + std::to_string(row) + " has " +
                       std::to_string(cells.size()) + " cells, expected " +
                       std::to_string(4 + kDigitsClasses));
    }
    DigitsImage image;
    image.path = (fs::path(dataset_dir) / cells[0]).string();
    try {
      image.label = std::stoi(cells[1]);
      image.numpy_top1 = std::stoi(cells[2]);
      image.margin = std::stod(cells[3]);
      for (int c = 0; c < kDigitsClasses; ++c) image.logits[c] = std::stod(cells[4 + c]);
    } catch (const std::exception&) {
      return MakeError("'" + file + "' line " + std::to_string(row) + " holds a cell that is not " +
                       "a number: '" + line + "'");
    }
    images.push_back(std::move(image));
  }
  if (images.empty()) return MakeError("'" + file + "' lists no image");
  return images;
}

// TFLite's symmetric per-tensor int8 weights: scale max|w| / 127.
std::vector<int8_t> QuantizeSymmetric(const std::vector<float>& w, float* scale_out) {
  float max_abs = 0;
  for (float x : w) max_abs = std::max(max_abs, std::fabs(x));
  const float scale = max_abs > 0 ? max_abs / 127.0f : 1.0f;
  std::vector<int8_t> q;
  q.reserve(w.size());
  for (float x : w) {
    q.push_back(static_cast<int8_t>(std::clamp(std::round(x / scale), -127.0f, 127.0f)));
  }
  *scale_out = scale;
  return q;
}

std::vector<int32_t> QuantizeBias(const std::vector<float>& b, float scale) {
  std::vector<int32_t> q;
  for (float x : b) q.push_back(static_cast<int32_t>(std::lround(x / scale)));
  return q;
}

// An activation range [lo, hi] (widened to hold 0, as TFLite's calibration
// does) as an int8 scale and zero point.
void AsymmetricParams(double lo, double hi, float* scale, int64_t* zero_point) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (hi - lo <= 0) hi = lo + 1;
  *scale = static_cast<float>((hi - lo) / 255.0);
  *zero_point = std::clamp<int64_t>(std::llround(-128.0 - lo / *scale), -128, 127);
}

// Adds one int8 FULLY_CONNECTED from `input` (scale `input_scale`) to a new
// int8 tensor of the given shape and quantization; returns that tensor.
int AddInt8Dense(ModelBuilder& b, int input, float input_scale, const std::vector<float>& w,
                 const std::vector<float>& bias, int units, int depth, float out_scale,
                 int64_t out_zero_point, tfl::ActivationFunctionType activation,
                 const std::string& name) {
  float w_scale = 1;
  const std::vector<int8_t> qw = QuantizeSymmetric(w, &w_scale);
  const int weights = b.AddConstInt8({units, depth}, qw, name + "/weights");
  b.SetQuantization(weights, w_scale, 0);
  const int qbias = b.AddQuantizedBias(QuantizeBias(bias, input_scale * w_scale), input_scale,
                                       {w_scale}, name + "/bias");
  const int out = b.AddTensor(TensorType::INT8, {1, units}, name);
  b.SetQuantization(out, out_scale, out_zero_point);
  b.AddFullyConnected(input, weights, qbias, out, activation);
  return out;
}

// The registry's delegate `name` made with `options` into `delegate_out`
// (left null for "cpu"), its kernels added to `resolver`.
Result<void> MakeDelegate(const std::string& name, const delegates::DelegateOptions& options,
                          runtime::OpResolver& resolver,
                          std::unique_ptr<runtime::Delegate>* delegate_out) {
  const delegates::RegisteredDelegate* registered = nullptr;
  runtime::Status s = delegates::FindDelegate(name, &registered);
  if (!s.ok()) return MakeError(ErrorKind::kNotFound, s.message());
  registered->add_kernels(resolver);
  if (registered->create == nullptr) return Ok();
  s = registered->create(options, delegate_out);
  if (s.code() == runtime::StatusCode::kUnsupported) {
    return MakeError(ErrorKind::kNotFound,
                     "delegate '" + name + "' is unavailable here: " + s.message());
  }
  if (!s.ok()) return MakeError("cannot make delegate '" + name + "': " + s.message());
  return Ok();
}

}  // namespace

harness::ImageInputsSpec DigitsInputSpec() {
  harness::ImageInputsSpec spec;
  spec.height = 8;
  spec.width = 8;
  spec.layout = "NHWC";
  spec.channels = "GRAY";
  spec.scale = 1.0 / 255.0;
  spec.offset = 0.0;
  spec.dtype = "float32";
  return spec;
}

Result<void> RunDigitsScript(const std::string& dir, int seed) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return MakeError("cannot create the digits folder '" + dir + "': " + ec.message());
  const std::string log = (fs::path(dir) / "digits.log").string();
  fs::remove(log, ec);
  auto log_fd = OpenForAppend(log);
  if (!log_fd) return log_fd.error();
  SpawnOptions options;
  options.stdout_fd = log_fd->get();
  options.stderr_fd = log_fd->get();
  options.terminate_with_parent = true;
  const std::vector<std::string> argv = {Python(), DFARM_DIGITS_SCRIPT, dir, "--seed",
                                         std::to_string(seed)};
  auto pid = SpawnProcess(argv, options);
  if (!pid) return pid.error();
  // A generous bound: the script trains in about a second of CPU.
  const int status = ReapProcess(*pid, std::chrono::minutes(5));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Ok();
  auto text = ReadRegularFile(log, "digits.py log", 1u << 20);
  return MakeError(std::string(DFARM_DIGITS_SCRIPT) + " (run with " + Python() + ") " +
                   DescribeWaitStatus(status) + "; its output:\n" + (text ? *text : "") +
                   "\nIt needs python3-numpy and python3-sklearn (scripts/setup.sh); "
                   "$DFARM_DIGITS_PYTHON picks another python");
}

Result<DigitsWeights> ReadDigitsWeights(const std::string& dir) {
  const std::string file = (fs::path(dir) / "weights.json").string();
  auto text = ReadRegularFile(file, "digits weights", 16u << 20);
  if (!text) return text.error();
  const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return MakeError("'" + file + "' is not a JSON object");
  DigitsWeights w;
  auto w1 = FloatArray(doc, "w1", kHidden, kDepth, file);
  auto b1 = FloatArray(doc, "b1", kHidden, 0, file);
  auto w2 = FloatArray(doc, "w2", kDigitsClasses, kHidden, file);
  auto b2 = FloatArray(doc, "b2", kDigitsClasses, 0, file);
  for (const auto* r : {&w1, &b1, &w2, &b2}) {
    if (!*r) return r->error();
  }
  w.w1 = std::move(*w1);
  w.b1 = std::move(*b1);
  w.w2 = std::move(*w2);
  w.b2 = std::move(*b2);
  const nlohmann::json calibration = doc.value("calibration", nlohmann::json::object());
  w.hidden_max = calibration.value("hidden_max", 0.0);
  w.logits_min = calibration.value("logits_min", 0.0);
  w.logits_max = calibration.value("logits_max", 0.0);
  w.numpy_held_out_top1 = doc.value("held_out_top1", 0.0);
  if (!(w.hidden_max > 0) || !(w.logits_max > w.logits_min)) {
    return MakeError("'" + file + "': \"calibration\" needs hidden_max > 0 and logits_max > " +
                     "logits_min (rerun tests/eval/digits.py)");
  }
  return w;
}

ModelBuilder BuildDigitsFloatModel(const DigitsWeights& w) {
  ModelBuilder b;
  const int input = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 1}, "image");
  const int w1 = b.AddConstFloat32({kHidden, kDepth}, w.w1, "dense1/weights");
  const int b1 = b.AddConstFloat32({kHidden}, w.b1, "dense1/bias");
  const int hidden = b.AddTensor(TensorType::FLOAT32, {1, kHidden}, "dense1");
  b.AddFullyConnected(input, w1, b1, hidden, tfl::ActivationFunctionType::RELU);
  const int w2 = b.AddConstFloat32({kDigitsClasses, kHidden}, w.w2, "dense2/weights");
  const int b2 = b.AddConstFloat32({kDigitsClasses}, w.b2, "dense2/bias");
  const int logits = b.AddTensor(TensorType::FLOAT32, {1, kDigitsClasses}, "logits");
  b.AddFullyConnected(hidden, w2, b2, logits);
  const int probs = b.AddTensor(TensorType::FLOAT32, {1, kDigitsClasses}, "probabilities");
  b.AddOperator(tfl::BuiltinOperator::SOFTMAX, {logits}, {probs},
                tfl::BuiltinOptions::SoftmaxOptions, [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateSoftmaxOptions(fbb, 1.0f).Union();
                });
  b.SetInputs({input});
  b.SetOutputs({probs});
  return b;
}

ModelBuilder BuildDigitsInt8Model(const DigitsWeights& w) {
  ModelBuilder b;
  const int input = b.AddTensor(TensorType::FLOAT32, {1, 8, 8, 1}, "image");
  const int qinput = b.AddTensor(TensorType::INT8, {1, 8, 8, 1}, "image/quantized");
  b.SetQuantization(qinput, kInputScale, -128);
  b.AddUnary(tfl::BuiltinOperator::QUANTIZE, input, qinput);
  float hidden_scale = 1, logits_scale = 1;
  int64_t hidden_zp = 0, logits_zp = 0;
  AsymmetricParams(0.0, w.hidden_max, &hidden_scale, &hidden_zp);
  AsymmetricParams(w.logits_min, w.logits_max, &logits_scale, &logits_zp);
  const int hidden = AddInt8Dense(b, qinput, kInputScale, w.w1, w.b1, kHidden, kDepth, hidden_scale,
                                  hidden_zp, tfl::ActivationFunctionType::RELU, "dense1");
  const int logits =
      AddInt8Dense(b, hidden, hidden_scale, w.w2, w.b2, kDigitsClasses, kHidden, logits_scale,
                   logits_zp, tfl::ActivationFunctionType::NONE, "logits");
  const int qprobs = b.AddTensor(TensorType::INT8, {1, kDigitsClasses}, "probabilities/quantized");
  b.SetQuantization(qprobs, 1.0f / 256.0f, -128);
  b.AddOperator(tfl::BuiltinOperator::SOFTMAX, {logits}, {qprobs},
                tfl::BuiltinOptions::SoftmaxOptions, [](flatbuffers::FlatBufferBuilder& fbb) {
                  return tfl::CreateSoftmaxOptions(fbb, 1.0f).Union();
                });
  const int probs = b.AddTensor(TensorType::FLOAT32, {1, kDigitsClasses}, "probabilities");
  b.AddDequantize(qprobs, probs);
  b.SetInputs({input});
  b.SetOutputs({probs});
  return b;
}

Result<std::vector<std::string>> DigitsInputs(const DigitsFixture& fixture) {
  std::vector<std::string> inputs;
  for (const DigitsImage& image : fixture.images) {
    auto decoded = harness::DecodeImage(image.path);
    if (!decoded) return decoded.error();
    auto tensor = harness::ImageToTensor(*decoded, DigitsInputSpec());
    if (!tensor) return MakeError("'" + image.path + "': " + tensor.message());
    inputs.push_back(std::move(*tensor));
  }
  return inputs;
}

Result<DigitsRun> RunDigitsModel(const std::string& model, const std::vector<std::string>& inputs,
                                 const std::string& delegate,
                                 const delegates::DelegateOptions& options) {
  std::unique_ptr<runtime::Model> loaded;
  runtime::Status s = runtime::Model::Load(model, &loaded);
  if (!s.ok()) return MakeError("cannot load '" + model + "': " + s.message());
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  std::unique_ptr<runtime::Delegate> made;
  if (auto r = MakeDelegate(delegate, options, resolver, &made); !r) return r.error();
  runtime::Interpreter interpreter(*loaded, resolver);
  if (made != nullptr) interpreter.AddDelegate(made.get());
  s = interpreter.AllocateTensors();
  if (!s.ok()) return MakeError("'" + model + "' on " + delegate + ": " + s.message());
  runtime::Tensor* in = interpreter.inputs()[0];
  const runtime::Tensor* out = interpreter.outputs()[0];
  if (out->dtype != runtime::DType::kFloat32) {
    return MakeError("'" + model + "': output 0 is not float32");
  }
  DigitsRun run;
  for (const runtime::NodePlacement& node : interpreter.placement().nodes) {
    ++run.nodes;
    run.delegated_nodes += node.delegate != "cpu";
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].size() != in->bytes) {
      return MakeError("'" + model + "': input " + std::to_string(i) + " has " +
                       std::to_string(inputs[i].size()) + " bytes, the model takes " +
                       std::to_string(in->bytes));
    }
    std::memcpy(in->data, inputs[i].data(), in->bytes);
    s = interpreter.Invoke();
    if (!s.ok()) {
      return MakeError("'" + model + "' on " + delegate + ": run " + std::to_string(i) +
                       " failed: " + s.message());
    }
    std::vector<float>& values = run.outputs.emplace_back(out->bytes / sizeof(float));
    std::memcpy(values.data(), out->data, out->bytes);
  }
  return run;
}

int ArgMax(const std::vector<float>& values) {
  return static_cast<int>(std::max_element(values.begin(), values.end()) - values.begin());
}

Result<DigitsFixture> MakeDigitsFixture(const std::string& dir, int seed) {
  if (auto r = RunDigitsScript(dir, seed); !r) return r.error();
  DigitsFixture f;
  f.dir = dir;
  f.dataset_dir = (fs::path(dir) / "digits").string();
  f.list_file = (fs::path(f.dataset_dir) / "images.csv").string();
  f.labels_file = (fs::path(f.dataset_dir) / "labels.txt").string();
  f.float_model = (fs::path(dir) / "digits_float.tflite").string();
  f.int8_model = (fs::path(dir) / "digits_int8.tflite").string();
  auto weights = ReadDigitsWeights(dir);
  if (!weights) return weights.error();
  f.weights = std::move(*weights);
  auto images = ReadPredictions(dir, f.dataset_dir);
  if (!images) return images.error();
  f.images = std::move(*images);
  if (!BuildDigitsFloatModel(f.weights).WriteFile(f.float_model)) {
    return MakeError("cannot write the digits model '" + f.float_model + "'");
  }
  if (!BuildDigitsInt8Model(f.weights).WriteFile(f.int8_model)) {
    return MakeError("cannot write the digits model '" + f.int8_model + "'");
  }
  return f;
}

}  // namespace dfarm::testing
