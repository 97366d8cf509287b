// Cross-check of our runtime against an independent engine: Debian's Arm NN
// (TfLiteParser + the CpuRef backend) runs the same .tflite bytes on the same
// seeded inputs, and every output must agree within 1e-4 abs + 1e-4 rel
// (float) or one quantum (uint8/int8). See tests/armnn/README.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <armnn/ArmNN.hpp>
#include <armnn/Exceptions.hpp>
#include <armnnTfLiteParser/ITfLiteParser.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>

#include "flatbuffers/flexbuffers.h"
#include "runtime/fp16.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {
namespace {

using runtime::DType;

constexpr double kAbsTol = 1e-4;
constexpr double kRelTol = 1e-4;

struct TensorBytes {
  std::string name;
  DType dtype = DType::kFloat32;
  bool quantized = false;
  float scale = 0;
  int64_t zero_point = 0;
  std::vector<uint8_t> bytes;
};

// Seeded inputs for the model's inputs: float32 uniform in [-1, 1], uint8/int8
// over their whole range, int32 in [0, 4).
std::vector<TensorBytes> MakeInputs(const runtime::Interpreter& interpreter, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TensorBytes> inputs;
  for (const runtime::Tensor* t : interpreter.inputs()) {
    TensorBytes in{t->name,  t->dtype,      t->quantized,
                   t->scale, t->zero_point, std::vector<uint8_t>(t->bytes)};
    const int64_t n = t->num_elements();
    for (int64_t i = 0; i < n; ++i) {
      switch (t->dtype) {
        case DType::kFloat32: {
          const float v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
          std::memcpy(in.bytes.data() + i * 4, &v, 4);
          break;
        }
        case DType::kUint8:
        case DType::kInt8:
          in.bytes[i] = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 255)(rng));
          break;
        case DType::kInt32: {
          const int32_t v = std::uniform_int_distribution<int32_t>(0, 3)(rng);
          std::memcpy(in.bytes.data() + i * 4, &v, 4);
          break;
        }
        default:
          break;  // left zero
      }
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

// Runs our runtime (every reference kernel) on `model`; the inputs are
// `fixed` when given, else made from `seed`, and returned in `inputs_out`.
runtime::Status RunOurs(const std::vector<uint8_t>& model, uint32_t seed,
                        std::vector<TensorBytes>* inputs_out, std::vector<TensorBytes>* outputs_out,
                        const std::vector<std::vector<uint8_t>>* fixed = nullptr) {
  std::unique_ptr<runtime::Model> m;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("model.tflite", model, &m));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::Interpreter interpreter(*m, resolver);
  DFARM_RETURN_IF_ERROR(interpreter.AllocateTensors());
  *inputs_out = MakeInputs(interpreter, seed);
  if (fixed != nullptr) {
    if (fixed->size() != inputs_out->size()) return runtime::Status::Error("wrong input count");
    for (size_t i = 0; i < fixed->size(); ++i) {
      if ((*fixed)[i].size() != (*inputs_out)[i].bytes.size()) {
        return runtime::Status::Error("input " + std::to_string(i) + " has the wrong size");
      }
      (*inputs_out)[i].bytes = (*fixed)[i];
    }
  }
  for (size_t i = 0; i < inputs_out->size(); ++i) {
    std::memcpy(interpreter.inputs()[i]->data, (*inputs_out)[i].bytes.data(),
                (*inputs_out)[i].bytes.size());
  }
  DFARM_RETURN_IF_ERROR(interpreter.Invoke());
  outputs_out->clear();
  for (const runtime::Tensor* t : interpreter.outputs()) {
    TensorBytes out{t->name,  t->dtype,      t->quantized,
                    t->scale, t->zero_point, std::vector<uint8_t>(t->bytes)};
    if (t->bytes > 0) std::memcpy(out.bytes.data(), t->data, t->bytes);
    outputs_out->push_back(std::move(out));
  }
  return runtime::Status::Ok();
}

// Whether Arm NN has its CpuRef backend: Debian ships it as a dynamic backend
// in its own package, which Arm NN loads when the runtime is created.
bool ArmnnHasCpuRef() {
  static const bool has = [] {
    try {
      armnn::IRuntime::CreationOptions options;
      armnn::IRuntimePtr runtime = armnn::IRuntime::Create(options);
      return runtime->GetDeviceSpec().GetSupportedBackends().count(
                 armnn::BackendId(armnn::Compute::CpuRef)) > 0;
    } catch (const std::exception&) {
      return false;
    }
  }();
  return has;
}

#define SKIP_WITHOUT_CPUREF()                                          \
  if (!ArmnnHasCpuRef())                                               \
  GTEST_SKIP() << "Arm NN has no CpuRef backend here (Debian package " \
                  "libarmnn-cpuref-backend22)"

// Runs Arm NN's TfLiteParser + CpuRef on `model`. Returns "" or why Arm NN
// could not run it (parse, optimize or load failure).
std::string RunArmnn(const std::vector<uint8_t>& model, const std::vector<TensorBytes>& inputs,
                     std::vector<std::vector<uint8_t>>* outputs_out) {
  try {
    auto parser = armnnTfLiteParser::ITfLiteParser::Create();
    armnn::INetworkPtr network = parser->CreateNetworkFromBinary(model);
    armnn::IRuntime::CreationOptions options;
    armnn::IRuntimePtr runtime = armnn::IRuntime::Create(options);
    std::vector<std::string> messages;
    armnn::IOptimizedNetworkPtr optimized = armnn::Optimize(
        *network, {armnn::Compute::CpuRef}, runtime->GetDeviceSpec(), armnn::OptimizerOptions(),
        armnn::Optional<std::vector<std::string>&>(messages));
    if (!optimized) return "Arm NN could not optimize the network for CpuRef";
    armnn::NetworkId id;
    std::string load_error;
    if (runtime->LoadNetwork(id, std::move(optimized), load_error) != armnn::Status::Success) {
      return "Arm NN could not load the network: " + load_error;
    }
    const std::vector<std::string> in_names = parser->GetSubgraphInputTensorNames(0);
    const std::vector<std::string> out_names = parser->GetSubgraphOutputTensorNames(0);
    if (in_names.size() != inputs.size()) return "Arm NN sees another number of inputs";
    armnn::InputTensors in_tensors;
    for (size_t i = 0; i < inputs.size(); ++i) {
      armnn::BindingPointInfo info = parser->GetNetworkInputBindingInfo(0, in_names[i]);
      if (info.second.GetNumBytes() != inputs[i].bytes.size()) {
        return "Arm NN input '" + in_names[i] + "' has another size";
      }
      in_tensors.emplace_back(info.first, armnn::ConstTensor(info.second, inputs[i].bytes.data()));
    }
    outputs_out->assign(out_names.size(), {});
    armnn::OutputTensors out_tensors;
    for (size_t i = 0; i < out_names.size(); ++i) {
      armnn::BindingPointInfo info = parser->GetNetworkOutputBindingInfo(0, out_names[i]);
      (*outputs_out)[i].resize(info.second.GetNumBytes());
      out_tensors.emplace_back(info.first, armnn::Tensor(info.second, (*outputs_out)[i].data()));
    }
    if (runtime->EnqueueWorkload(id, in_tensors, out_tensors) != armnn::Status::Success) {
      return "Arm NN failed to run the network";
    }
  } catch (const armnn::Exception& e) {
    return std::string("Arm NN refused the model: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("Arm NN threw: ") + e.what();
  }
  return {};
}

double Value(const TensorBytes& t, const std::vector<uint8_t>& bytes, size_t i) {
  switch (t.dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      return v;
    }
    case DType::kUint8:
      return bytes[i];
    case DType::kInt8:
      return static_cast<int8_t>(bytes[i]);
    default:
      return std::nan("");
  }
}

// Compares each output; returns "" or the first mismatches, named.
std::string Compare(const std::vector<TensorBytes>& ours,
                    const std::vector<std::vector<uint8_t>>& theirs) {
  if (ours.size() != theirs.size()) {
    return "we have " + std::to_string(ours.size()) + " outputs, Arm NN " +
           std::to_string(theirs.size());
  }
  std::ostringstream why;
  for (size_t o = 0; o < ours.size(); ++o) {
    const TensorBytes& t = ours[o];
    if (t.bytes.size() != theirs[o].size()) {
      why << "output " << o << " '" << t.name << "': " << t.bytes.size() << " bytes, Arm NN "
          << theirs[o].size() << "; ";
      continue;
    }
    const size_t n = t.bytes.size() / runtime::DTypeSize(t.dtype);
    int reported = 0;
    for (size_t i = 0; i < n && reported < 5; ++i) {
      const double a = Value(t, t.bytes, i), b = Value(t, theirs[o], i);
      const bool integral = t.dtype != DType::kFloat32;
      const double tol = integral ? (t.quantized ? 1.0 : 0.0) : kAbsTol + kRelTol * std::fabs(b);
      if (!(std::fabs(a - b) <= tol)) {
        why << "output " << o << " '" << t.name << "' [" << i << "]: ours " << a << ", Arm NN " << b
            << "; ";
        ++reported;
      }
    }
  }
  return why.str();
}

// --- single-op models -------------------------------------------------------

struct OpCase {
  std::string name;
  std::function<void(ModelBuilder&)> build;
};

std::vector<float> Ramp(int n, float start, float step) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

int Input(ModelBuilder& b, std::vector<int32_t> shape, const char* name = "x",
          tfl::TensorType type = tfl::TensorType::FLOAT32) {
  return b.AddTensor(type, std::move(shape), name);
}

// x -> op -> y, for ops with one input and one output.
OpCase Unary(std::string name, tfl::BuiltinOperator code) {
  return {name, [code](ModelBuilder& b) {
            int x = Input(b, {1, 3, 4, 2});
            int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 4, 2}, "y");
            b.AddUnary(code, x, y);
            b.SetInputs({x});
            b.SetOutputs({y});
          }};
}

// x (and a broadcast constant, or a second input) -> op -> y.
OpCase Binary(std::string name, tfl::BuiltinOperator code, bool second_is_input,
              tfl::ActivationFunctionType act = tfl::ActivationFunctionType::NONE) {
  return {name, [=](ModelBuilder& b) {
            int x = Input(b, {1, 2, 3, 4});
            int z = second_is_input ? Input(b, {1, 2, 3, 4}, "z")
                                    : b.AddConstFloat32({4}, {0.5f, -1.25f, 2.0f, 0.75f}, "c");
            int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3, 4}, "y");
            b.AddBinary(code, x, z, y, act);
            b.SetInputs(second_is_input ? std::vector<int32_t>{x, z} : std::vector<int32_t>{x});
            b.SetOutputs({y});
          }};
}

// 12 anchors on a grid, 3 classes + background; random encodings and scores.
OpCase DetectionCase(std::string name, bool regular, int max_classes_per_detection) {
  return {name, [=](ModelBuilder& b) {
            int enc = Input(b, {1, 12, 4}, "box_encodings");
            int cls = Input(b, {1, 12, 4}, "class_predictions");
            std::vector<float> anchors;
            for (int i = 0; i < 12; ++i) {
              anchors.insert(anchors.end(), {0.2f + 0.15f * static_cast<float>(i / 4),
                                             0.1f + 0.2f * static_cast<float>(i % 4), 0.5f, 0.4f});
            }
            int anc = b.AddConstFloat32({12, 4}, anchors, "anchors");
            const int rows = 4 * max_classes_per_detection;
            int ob = b.AddTensor(tfl::TensorType::FLOAT32, {1, rows, 4}, "boxes");
            int oc = b.AddTensor(tfl::TensorType::FLOAT32, {1, rows}, "classes");
            int os = b.AddTensor(tfl::TensorType::FLOAT32, {1, rows}, "scores");
            int on = b.AddTensor(tfl::TensorType::FLOAT32, {1}, "num");
            flexbuffers::Builder fbb;
            fbb.Map([&] {
              fbb.Int("max_detections", 4);
              fbb.Int("max_classes_per_detection", max_classes_per_detection);
              fbb.Int("detections_per_class", 2);
              fbb.Bool("use_regular_nms", regular);
              fbb.Float("nms_score_threshold", 0.1f);
              fbb.Float("nms_iou_threshold", 0.4f);
              fbb.Int("num_classes", 3);
              fbb.Float("y_scale", 10.0f);
              fbb.Float("x_scale", 10.0f);
              fbb.Float("h_scale", 5.0f);
              fbb.Float("w_scale", 5.0f);
            });
            fbb.Finish();
            b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc}, {ob, oc, os, on},
                                fbb.GetBuffer());
            b.SetInputs({enc, cls});
            b.SetOutputs({ob, oc, os, on});
          }};
}

std::vector<OpCase> FloatCases() {
  using Op = tfl::BuiltinOperator;
  using Act = tfl::ActivationFunctionType;
  std::vector<OpCase> cases = {
      Unary("Relu", Op::RELU),
      Unary("Relu6", Op::RELU6),
      Unary("Logistic", Op::LOGISTIC),
      Unary("Tanh", Op::TANH),
      Unary("HardSwish", Op::HARD_SWISH),
      Unary("Exp", Op::EXP),
      Unary("Neg", Op::NEG),
      Binary("AddBroadcast", Op::ADD, false),
      Binary("AddRelu6", Op::ADD, true, Act::RELU6),
      Binary("Sub", Op::SUB, true),
      Binary("MulBroadcast", Op::MUL, false, Act::RELU),
      Binary("Div", Op::DIV, false),
      Binary("Maximum", Op::MAXIMUM, true),
      Binary("Minimum", Op::MINIMUM, false),
  };
  cases.push_back({"LeakyRelu", [](ModelBuilder& b) {
                     int x = Input(b, {2, 5});
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {2, 5}, "y");
                     b.AddLeakyRelu(x, y, 0.2f);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Conv2DSameStride2", [](ModelBuilder& b) {
                     int x = Input(b, {1, 7, 6, 3});
                     int w = b.AddConstFloat32({4, 3, 3, 3}, Ramp(108, -0.5f, 0.01f), "w");
                     int bias = b.AddConstFloat32({4}, {0.1f, -0.2f, 0.3f, 0.0f}, "bias");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 3, 4}, "y");
                     Conv2DParams p;
                     p.padding = tfl::Padding::SAME;
                     p.stride_h = p.stride_w = 2;
                     p.activation = tfl::ActivationFunctionType::RELU;
                     b.AddConv2D(x, w, bias, y, p);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Conv2DValidDilated", [](ModelBuilder& b) {
                     int x = Input(b, {1, 8, 8, 2});
                     int w = b.AddConstFloat32({3, 3, 3, 2}, Ramp(54, 0.3f, -0.011f), "w");
                     int bias = b.AddConstFloat32({3}, {0.0f, 0.5f, -0.5f}, "bias");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 3}, "y");
                     Conv2DParams p;
                     p.dilation_h = p.dilation_w = 2;
                     b.AddConv2D(x, w, bias, y, p);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"DepthwiseConv2DMultiplier2", [](ModelBuilder& b) {
                     int x = Input(b, {1, 5, 5, 2});
                     int w = b.AddConstFloat32({1, 3, 3, 4}, Ramp(36, -0.4f, 0.025f), "w");
                     int bias = b.AddConstFloat32({4}, {0.1f, 0.2f, 0.3f, 0.4f}, "bias");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 5, 4}, "y");
                     DepthwiseConv2DParams p;
                     p.padding = tfl::Padding::SAME;
                     p.depth_multiplier = 2;
                     p.activation = tfl::ActivationFunctionType::RELU6;
                     b.AddDepthwiseConv2D(x, w, bias, y, p);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"FullyConnected", [](ModelBuilder& b) {
                     int x = Input(b, {2, 6});
                     int w = b.AddConstFloat32({3, 6}, Ramp(18, -0.3f, 0.04f), "w");
                     int bias = b.AddConstFloat32({3}, {1.0f, 0.0f, -1.0f}, "bias");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3}, "y");
                     b.AddFullyConnected(x, w, bias, y);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  for (Op code : {Op::AVERAGE_POOL_2D, Op::MAX_POOL_2D}) {
    cases.push_back(
        {code == Op::MAX_POOL_2D ? "MaxPoolSame" : "AveragePoolSame", [code](ModelBuilder& b) {
           int x = Input(b, {1, 5, 5, 2});
           int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 3, 2}, "y");
           Pool2DParams p;
           p.padding = tfl::Padding::SAME;
           p.stride_h = p.stride_w = 2;
           p.filter_h = p.filter_w = 3;
           b.AddPool2D(code, x, y, p);
           b.SetInputs({x});
           b.SetOutputs({y});
         }});
  }
  cases.push_back({"Softmax", [](ModelBuilder& b) {
                     int x = Input(b, {3, 7});
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {3, 7}, "y");
                     b.AddOperator(tfl::BuiltinOperator::SOFTMAX, {x}, {y},
                                   tfl::BuiltinOptions::SoftmaxOptions,
                                   [](flatbuffers::FlatBufferBuilder& fbb) {
                                     return tfl::CreateSoftmaxOptions(fbb, 1.0f).Union();
                                   });
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Concatenation", [](ModelBuilder& b) {
                     int x = Input(b, {1, 2, 3, 2});
                     int z = Input(b, {1, 2, 3, 3}, "z");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3, 5}, "y");
                     b.AddConcatenation({x, z}, y, 3);
                     b.SetInputs({x, z});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Reshape", [](ModelBuilder& b) {
                     int x = Input(b, {1, 2, 3, 4});
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {6, 4}, "y");
                     b.AddReshape(x, y, {6, 4});
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Pad", [](ModelBuilder& b) {
                     int x = Input(b, {1, 2, 3, 1});
                     int pads = b.AddConstInt32({4, 2}, {0, 0, 1, 2, 2, 1, 0, 0}, "pads");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 6, 1}, "y");
                     b.AddPad(x, pads, y);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"MeanKeepDims", [](ModelBuilder& b) {
                     int x = Input(b, {1, 4, 5, 3});
                     int axes = b.AddConstInt32({2}, {1, 2}, "axes");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 3}, "y");
                     b.AddReducer(tfl::BuiltinOperator::MEAN, x, axes, y, true);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Transpose", [](ModelBuilder& b) {
                     int x = Input(b, {2, 3, 4});
                     int perm = b.AddConstInt32({3}, {2, 0, 1}, "perm");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {4, 2, 3}, "y");
                     b.AddOperator(tfl::BuiltinOperator::TRANSPOSE, {x, perm}, {y});
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Slice", [](ModelBuilder& b) {
                     int x = Input(b, {3, 4, 5});
                     int begin = b.AddConstInt32({3}, {1, 0, 2}, "begin");
                     // An explicit size: Arm NN 20.08 mis-infers size -1 (README).
                     int size = b.AddConstInt32({3}, {2, 4, 3}, "size");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {2, 4, 3}, "y");
                     b.AddOperator(tfl::BuiltinOperator::SLICE, {x, begin, size}, {y});
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"StridedSliceMasksAndShrink", [](ModelBuilder& b) {
                     // x[:, 1, ::-2] on [3,4,5] -> [3,3]
                     int x = Input(b, {3, 4, 5});
                     int begin = b.AddConstInt32({3}, {0, 1, -1}, "begin");
                     int end = b.AddConstInt32({3}, {0, 2, 0}, "end");
                     int strides = b.AddConstInt32({3}, {1, 1, -2}, "strides");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {3, 3}, "y");
                     b.AddOperator(
                         tfl::BuiltinOperator::STRIDED_SLICE, {x, begin, end, strides}, {y},
                         tfl::BuiltinOptions::StridedSliceOptions,
                         [](flatbuffers::FlatBufferBuilder& fbb) {
                           return tfl::CreateStridedSliceOptions(fbb, 1, 5, 0, 0, 2).Union();
                         });
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"ResizeBilinearAlignCorners", [](ModelBuilder& b) {
                     int x = Input(b, {1, 3, 4, 2});
                     int size = b.AddConstInt32({2}, {5, 7}, "size");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 7, 2}, "y");
                     b.AddResize(tfl::BuiltinOperator::RESIZE_BILINEAR, x, size, y, true, false);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"ResizeBilinear", [](ModelBuilder& b) {
                     int x = Input(b, {1, 3, 4, 2});
                     int size = b.AddConstInt32({2}, {6, 8}, "size");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 8, 2}, "y");
                     b.AddResize(tfl::BuiltinOperator::RESIZE_BILINEAR, x, size, y, false, false);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"ResizeNearestNeighbor", [](ModelBuilder& b) {
                     int x = Input(b, {1, 3, 4, 2});
                     int size = b.AddConstInt32({2}, {6, 8}, "size");
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 8, 2}, "y");
                     b.AddResize(tfl::BuiltinOperator::RESIZE_NEAREST_NEIGHBOR, x, size, y, false,
                                 false);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"TransposeConvValidStride2", [](ModelBuilder& b) {
                     // VALID only: Arm NN 20.08 pads SAME from the input size
                     // (TransposeConvSameIsDecidedByHand below).
                     int shape = b.AddConstInt32({4}, {1, 7, 7, 2}, "shape");
                     int w = b.AddConstFloat32({2, 3, 3, 3}, Ramp(54, -0.2f, 0.009f), "w");
                     int x = Input(b, {1, 3, 3, 3});
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 7, 7, 2}, "y");
                     TransposeConvParams p;
                     p.stride_h = p.stride_w = 2;
                     b.AddTransposeConv(shape, w, x, -1, y, p);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Squeeze", [](ModelBuilder& b) {
                     int x = Input(b, {1, 3, 1, 4});
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {3, 4}, "y");
                     b.AddOperator(tfl::BuiltinOperator::SQUEEZE, {x}, {y},
                                   tfl::BuiltinOptions::SqueezeOptions,
                                   [](flatbuffers::FlatBufferBuilder& fbb) {
                                     std::vector<int32_t> dims = {0, 2};
                                     return tfl::CreateSqueezeOptionsDirect(fbb, &dims).Union();
                                   });
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"Split", [](ModelBuilder& b) {
                     int axis = b.AddConstInt32({}, {2}, "axis");
                     int x = Input(b, {1, 2, 6});
                     int y0 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2}, "y0");
                     int y1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2}, "y1");
                     int y2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2}, "y2");
                     b.AddOperator(tfl::BuiltinOperator::SPLIT, {axis, x}, {y0, y1, y2},
                                   tfl::BuiltinOptions::SplitOptions,
                                   [](flatbuffers::FlatBufferBuilder& fbb) {
                                     return tfl::CreateSplitOptions(fbb, 3).Union();
                                   });
                     b.SetInputs({x});
                     b.SetOutputs({y0, y1, y2});
                   }});
  cases.push_back({"L2Normalization", [](ModelBuilder& b) {
                     int x = Input(b, {2, 3, 5});
                     int y = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3, 5}, "y");
                     b.AddOperator(tfl::BuiltinOperator::L2_NORMALIZATION, {x}, {y});
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  // One class per detection only: Arm NN 20.08's fast NMS mixes up boxes and
  // classes when it keeps more (README); our hand-computed kernel test decides.
  cases.push_back(DetectionCase("DetectionPostProcessFast", false, 1));
  cases.push_back(DetectionCase("DetectionPostProcessRegular", true, 1));
  return cases;
}

// --- quantized single-op models ----------------------------------------------

int QTensor(ModelBuilder& b, tfl::TensorType type, std::vector<int32_t> shape, float scale,
            int64_t zero_point, const char* name) {
  int t = b.AddTensor(type, std::move(shape), name);
  b.SetQuantization(t, scale, zero_point);
  return t;
}

std::vector<uint8_t> Bytes(int n, int start, int step) {
  std::vector<uint8_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((start + step * i) & 0xff);
  return v;
}

std::vector<uint8_t> Int32Bytes(const std::vector<int32_t>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<OpCase> QuantizedCases() {
  using T = tfl::TensorType;
  std::vector<OpCase> cases;
  cases.push_back({"QuantizeToUint8", [](ModelBuilder& b) {
                     int x = Input(b, {2, 8});
                     int y = QTensor(b, T::UINT8, {2, 8}, 1.0f / 64, 128, "y");
                     b.AddOperator(tfl::BuiltinOperator::QUANTIZE, {x}, {y});
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  cases.push_back({"DequantizeUint8", [](ModelBuilder& b) {
                     int x = QTensor(b, T::UINT8, {2, 8}, 0.05f, 100, "x");
                     int y = b.AddTensor(T::FLOAT32, {2, 8}, "y");
                     b.AddDequantize(x, y);
                     b.SetInputs({x});
                     b.SetOutputs({y});
                   }});
  for (tfl::TensorType type : {T::UINT8, T::INT8}) {
    const bool u8 = type == T::UINT8;
    const int64_t zp = u8 ? 128 : 0;
    const std::string suffix = u8 ? "Uint8" : "Int8";
    cases.push_back({"Add" + suffix, [=](ModelBuilder& b) {
                       int x = QTensor(b, type, {1, 2, 3, 4}, 0.02f, zp, "x");
                       int z = QTensor(b, type, {1, 2, 3, 4}, 0.03f, zp - 8, "z");
                       int y = QTensor(b, type, {1, 2, 3, 4}, 0.04f, zp - 3, "y");
                       b.AddAdd(x, z, y);
                       b.SetInputs({x, z});
                       b.SetOutputs({y});
                     }});
    cases.push_back({"Conv2D" + suffix, [=](ModelBuilder& b) {
                       int x = QTensor(b, type, {1, 5, 5, 2}, 0.02f, zp, "x");
                       int w = b.AddConstRaw(type, {3, 3, 3, 2}, Bytes(54, u8 ? 100 : -27, 1), "w");
                       b.SetQuantization(w, 0.01f, u8 ? 127 : 0);
                       int bias = b.AddConstRaw(T::INT32, {3}, Int32Bytes({100, -250, 40}), "bias");
                       b.SetQuantization(bias, 0.02f * 0.01f, 0);
                       int y = QTensor(b, type, {1, 5, 5, 3}, 0.05f, zp - 28, "y");
                       Conv2DParams p;
                       p.padding = tfl::Padding::SAME;
                       b.AddConv2D(x, w, bias, y, p);
                       b.SetInputs({x});
                       b.SetOutputs({y});
                     }});
    cases.push_back({"FullyConnected" + suffix, [=](ModelBuilder& b) {
                       int x = QTensor(b, type, {2, 6}, 0.02f, zp, "x");
                       int w = b.AddConstRaw(type, {3, 6}, Bytes(18, u8 ? 110 : -9, 1), "w");
                       b.SetQuantization(w, 0.015f, u8 ? 120 : 0);
                       int bias = b.AddConstRaw(T::INT32, {3}, Int32Bytes({30, 0, -60}), "bias");
                       b.SetQuantization(bias, 0.02f * 0.015f, 0);
                       int y = QTensor(b, type, {2, 3}, 0.03f, zp, "y");
                       b.AddFullyConnected(x, w, bias, y);
                       b.SetInputs({x});
                       b.SetOutputs({y});
                     }});
    for (tfl::BuiltinOperator code :
         {tfl::BuiltinOperator::AVERAGE_POOL_2D, tfl::BuiltinOperator::MAX_POOL_2D}) {
      const bool max = code == tfl::BuiltinOperator::MAX_POOL_2D;
      cases.push_back({(max ? "MaxPool" : "AveragePool") + suffix, [=](ModelBuilder& b) {
                         int x = QTensor(b, type, {1, 4, 4, 2}, 0.1f, zp, "x");
                         int y = QTensor(b, type, {1, 2, 2, 2}, 0.1f, zp, "y");
                         Pool2DParams p;
                         p.stride_h = p.stride_w = 2;
                         p.filter_h = p.filter_w = 2;
                         b.AddPool2D(code, x, y, p);
                         b.SetInputs({x});
                         b.SetOutputs({y});
                       }});
    }
    cases.push_back({"Reshape" + suffix, [=](ModelBuilder& b) {
                       int x = QTensor(b, type, {1, 2, 3, 4}, 0.1f, zp, "x");
                       int y = QTensor(b, type, {6, 4}, 0.1f, zp, "y");
                       b.AddReshape(x, y, {6, 4});
                       b.SetInputs({x});
                       b.SetOutputs({y});
                     }});
    cases.push_back({"Softmax" + suffix, [=](ModelBuilder& b) {
                       int x = QTensor(b, type, {2, 7}, 0.1f, zp, "x");
                       int y = QTensor(b, type, {2, 7}, 1.0f / 256, u8 ? 0 : -128, "y");
                       b.AddOperator(tfl::BuiltinOperator::SOFTMAX, {x}, {y},
                                     tfl::BuiltinOptions::SoftmaxOptions,
                                     [](flatbuffers::FlatBufferBuilder& fbb) {
                                       return tfl::CreateSoftmaxOptions(fbb, 1.0f).Union();
                                     });
                       b.SetInputs({x});
                       b.SetOutputs({y});
                     }});
    cases.push_back({"Slice" + suffix, [=](ModelBuilder& b) {
                       int x = QTensor(b, type, {3, 4, 5}, 0.1f, zp, "x");
                       int begin = b.AddConstInt32({3}, {1, 0, 2}, "begin");
                       int size = b.AddConstInt32({3}, {2, 4, 3}, "size");
                       int y = QTensor(b, type, {2, 4, 3}, 0.1f, zp, "y");
                       b.AddOperator(tfl::BuiltinOperator::SLICE, {x, begin, size}, {y});
                       b.SetInputs({x});
                       b.SetOutputs({y});
                     }});
    cases.push_back({"StridedSlice" + suffix, [=](ModelBuilder& b) {
                       // x[:, 1, ::-2] on [3,4,5] -> [3,3]
                       int x = QTensor(b, type, {3, 4, 5}, 0.1f, zp, "x");
                       int begin = b.AddConstInt32({3}, {0, 1, -1}, "begin");
                       int end = b.AddConstInt32({3}, {0, 2, 0}, "end");
                       int strides = b.AddConstInt32({3}, {1, 1, -2}, "strides");
                       int y = QTensor(b, type, {3, 3}, 0.1f, zp, "y");
                       b.AddOperator(
                           tfl::BuiltinOperator::STRIDED_SLICE, {x, begin, end, strides}, {y},
                           tfl::BuiltinOptions::StridedSliceOptions,
                           [](flatbuffers::FlatBufferBuilder& fbb) {
                             return tfl::CreateStridedSliceOptions(fbb, 1, 5, 0, 0, 2).Union();
                           });
                       b.SetInputs({x});
                       b.SetOutputs({y});
                     }});
    cases.push_back({"Logistic" + suffix, [=](ModelBuilder& b) {
                       int x = QTensor(b, type, {2, 7}, 0.05f, zp, "x");
                       int y = QTensor(b, type, {2, 7}, 1.0f / 256, u8 ? 0 : -128, "y");
                       b.AddUnary(tfl::BuiltinOperator::LOGISTIC, x, y);
                       b.SetInputs({x});
                       b.SetOutputs({y});
                     }});
  }
  cases.push_back({"DetectionPostProcessUint8", [](ModelBuilder& b) {
                     // Quantized boxes, anchors and scores; fast NMS.
                     int enc = QTensor(b, T::UINT8, {1, 12, 4}, 0.05f, 128, "box_encodings");
                     int cls = QTensor(b, T::UINT8, {1, 12, 4}, 1.0f / 256, 0, "class_predictions");
                     std::vector<uint8_t> anchors;
                     for (int i = 0; i < 12; ++i) {
                       anchors.insert(anchors.end(),
                                      {static_cast<uint8_t>(20 + 15 * (i / 4)),
                                       static_cast<uint8_t>(10 + 20 * (i % 4)), 50, 40});
                     }
                     int anc = b.AddConstRaw(T::UINT8, {12, 4}, anchors, "anchors");
                     b.SetQuantization(anc, 0.01f, 0);
                     int ob = b.AddTensor(T::FLOAT32, {1, 4, 4}, "boxes");
                     int oc = b.AddTensor(T::FLOAT32, {1, 4}, "classes");
                     int os = b.AddTensor(T::FLOAT32, {1, 4}, "scores");
                     int on = b.AddTensor(T::FLOAT32, {1}, "num");
                     flexbuffers::Builder fbb;
                     fbb.Map([&] {
                       fbb.Int("max_detections", 4);
                       fbb.Int("max_classes_per_detection", 1);
                       fbb.Float("nms_score_threshold", 0.2f);
                       fbb.Float("nms_iou_threshold", 0.4f);
                       fbb.Int("num_classes", 3);
                       fbb.Float("y_scale", 10.0f);
                       fbb.Float("x_scale", 10.0f);
                       fbb.Float("h_scale", 5.0f);
                       fbb.Float("w_scale", 5.0f);
                     });
                     fbb.Finish();
                     b.AddCustomOperator("TFLite_Detection_PostProcess", {enc, cls, anc},
                                         {ob, oc, os, on}, fbb.GetBuffer());
                     b.SetInputs({enc, cls});
                     b.SetOutputs({ob, oc, os, on});
                   }});
  return cases;
}

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class ArmnnSingleOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(ArmnnSingleOpTest, MatchesOurRuntime) {
  SKIP_WITHOUT_CPUREF();
  ModelBuilder b;
  GetParam().build(b);
  const std::vector<uint8_t> model = b.Build();
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::vector<TensorBytes> inputs, ours;
    runtime::Status s = RunOurs(model, seed, &inputs, &ours);
    if (s.code() == runtime::StatusCode::kUnsupported) {
      GTEST_SKIP() << "our runtime lacks this case (yet): " << s.message();
    }
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<std::vector<uint8_t>> theirs;
    const std::string armnn_error = RunArmnn(model, inputs, &theirs);
    ASSERT_EQ(armnn_error, "");
    EXPECT_EQ(Compare(ours, theirs), "") << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Float, ArmnnSingleOpTest, ::testing::ValuesIn(FloatCases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

INSTANTIATE_TEST_SUITE_P(Quantized, ArmnnSingleOpTest, ::testing::ValuesIn(QuantizedCases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

// --- where Arm NN 20.08 disagrees, a hand-computed expectation decides --------

std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> Floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), values.size() * 4);
  return values;
}

// Runs both engines on `inputs`; checks ours against `expected` and reports
// (without failing) whether Arm NN agrees.
void ExpectByHand(const ModelBuilder& b, const std::vector<std::vector<float>>& inputs,
                  const std::vector<float>& expected) {
  const std::vector<uint8_t> model = b.Build();
  std::vector<std::vector<uint8_t>> fixed;
  for (const auto& in : inputs) fixed.push_back(FloatBytes(in));
  std::vector<TensorBytes> used, ours;
  runtime::Status s = RunOurs(model, 0, &used, &ours, &fixed);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(Floats(ours[0].bytes), ::testing::Pointwise(::testing::FloatNear(1e-6f), expected));
  if (!ArmnnHasCpuRef()) return;
  std::vector<std::vector<uint8_t>> theirs;
  const std::string armnn_error = RunArmnn(model, used, &theirs);
  const bool agrees = armnn_error.empty() && Compare(ours, theirs).empty();
  ::testing::Test::RecordProperty("armnn_agrees", agrees ? "true" : "false");
  std::printf("Arm NN %s the hand-computed result%s%s\n", agrees ? "matches" : "differs from",
              armnn_error.empty() ? "" : ": ", armnn_error.c_str());
}

TEST(ArmnnDisagreementTest, TransposeConvSameIsDecidedByHand) {
  // Input 3x3 of ones, 3x3 filter of ones, stride 2, SAME, output 6x6.
  // TFLite pads from the output size: out' = ceil(6/2) = 3, pad_total =
  // (3-1)*2 + 3 - 6 = 1, pad_top = pad_left = 0. Input row iy covers output
  // rows 2iy..2iy+2 of the 7x7 full result, so rows 0..5 are covered by
  // 1, 1, 2, 1, 2, 1 input rows (likewise columns); out = product.
  // (Arm NN 20.08 pads from the input size: ceil(3/2) = 2, (2-1)*2 + 3 - 3 = 2,
  // pad_top 1, which shifts the window by one.)
  ModelBuilder b;
  int shape = b.AddConstInt32({4}, {1, 6, 6, 1}, "shape");
  int w = b.AddConstFloat32({1, 3, 3, 1}, std::vector<float>(9, 1.0f), "w");
  int x = Input(b, {1, 3, 3, 1});
  int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 1}, "y");
  TransposeConvParams p;
  p.padding = tfl::Padding::SAME;
  p.stride_h = p.stride_w = 2;
  b.AddTransposeConv(shape, w, x, -1, y, p);
  b.SetInputs({x});
  b.SetOutputs({y});
  const float cover[] = {1, 1, 2, 1, 2, 1};
  std::vector<float> expected;
  for (float r : cover) {
    for (float c : cover) expected.push_back(r * c);
  }
  ExpectByHand(b, {std::vector<float>(9, 1.0f)}, expected);
}

TEST(ArmnnDisagreementTest, ResizeBilinearHalfPixelCentersIsDecidedByHand) {
  // 2x2 [[0,1],[2,3]] (value = x + 2y) to 4x4 with half_pixel_centers:
  // source = (d + 0.5) * 0.5 - 0.5 = -0.25, 0.25, 0.75, 1.25, clamped by the
  // corner rule to 0, 0.25, 0.75, 1; bilinear is exact on x + 2y.
  // (Arm NN 20.08 ignores half_pixel_centers: source 0, 0.5, 1, 1.)
  ModelBuilder b;
  int x = Input(b, {1, 2, 2, 1});
  int size = b.AddConstInt32({2}, {4, 4}, "size");
  int y = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 1}, "y");
  b.AddResize(tfl::BuiltinOperator::RESIZE_BILINEAR, x, size, y, false, true);
  b.SetInputs({x});
  b.SetOutputs({y});
  const float s[] = {0.0f, 0.25f, 0.75f, 1.0f};
  std::vector<float> expected;
  for (float sy : s) {
    for (float sx : s) expected.push_back(sx + 2 * sy);
  }
  ExpectByHand(b, {{0, 1, 2, 3}}, expected);
}

// --- the real-model corpus ---------------------------------------------------

// Arm NN 20.08 wants the weights of CONV_2D and friends as constant tensors,
// but the corpus stores them as float16 constants behind DEQUANTIZE. This
// makes an equivalent copy for Arm NN: each float16 constant's data is
// widened to float32 in a vector appended to the file (its Buffer points
// there), the tensor becomes FLOAT32, consumers of the DEQUANTIZE output read
// it directly, and the DEQUANTIZE ops (now dead) become RELU ops on float32.
// False (with `why`) when the model has another kind of DEQUANTIZE.
bool FoldFloat16Dequantize(const std::vector<uint8_t>& model, std::vector<uint8_t>* out,
                           std::string* why) {
  namespace tf = ::dfarm::tflite;
  const tf::Model* m = tf::GetModel(model.data());
  const tf::SubGraph* sg = m->subgraphs()->Get(0);
  auto code_of = [&](uint32_t opcode_index) {
    const tf::OperatorCode* c = m->operator_codes()->Get(opcode_index);
    return std::max(static_cast<int32_t>(c->deprecated_builtin_code()),
                    static_cast<int32_t>(c->builtin_code()));
  };
  struct Pair {
    int32_t x, w;
    uint32_t buffer;
    size_t vec_pos;
  };
  std::vector<Pair> pairs;
  for (const tf::Operator* op : *sg->operators()) {
    if (code_of(op->opcode_index()) != static_cast<int32_t>(tf::BuiltinOperator::DEQUANTIZE)) {
      continue;
    }
    const int32_t x = op->inputs()->Get(0), w = op->outputs()->Get(0);
    const tf::Tensor* t = sg->tensors()->Get(x);
    const tf::Buffer* buf = m->buffers()->Get(t->buffer());
    if (t->type() != tf::TensorType::FLOAT16 || buf->data() == nullptr ||
        buf->data()->size() == 0) {
      *why = "DEQUANTIZE of tensor " + std::to_string(x) + " is not of a float16 constant";
      return false;
    }
    pairs.push_back({x, w, t->buffer(), 0});
  }
  if (pairs.empty()) {
    *why = "no float16 DEQUANTIZE";
    return false;
  }
  *out = model;
  for (Pair& p : pairs) {
    const auto* data = m->buffers()->Get(p.buffer)->data();
    const uint32_t n = data->size() / 2;
    while ((out->size() + 4) % 16 != 0) out->push_back(0);
    p.vec_pos = out->size();
    const uint32_t bytes = n * 4;
    out->insert(out->end(), reinterpret_cast<const uint8_t*>(&bytes),
                reinterpret_cast<const uint8_t*>(&bytes) + 4);
    for (uint32_t i = 0; i < n; ++i) {
      const uint16_t h = static_cast<uint16_t>(data->Get(2 * i) | (data->Get(2 * i + 1) << 8));
      const float f = runtime::HalfToFloat(h);
      out->insert(out->end(), reinterpret_cast<const uint8_t*>(&f),
                  reinterpret_cast<const uint8_t*>(&f) + 4);
    }
  }
  // Patch in place (no more appends, so the pointers stay valid).
  const tf::Model* mo = tf::GetModel(out->data());
  const tf::SubGraph* so = mo->subgraphs()->Get(0);
  auto mutable_table = [](const void* t) {
    return const_cast<flatbuffers::Table*>(reinterpret_cast<const flatbuffers::Table*>(t));
  };
  for (const Pair& p : pairs) {
    if (!mutable_table(mo->buffers()->Get(p.buffer))
             ->SetPointer(tf::Buffer::VT_DATA, out->data() + p.vec_pos) ||
        !mutable_table(so->tensors()->Get(p.x))
             ->SetField<int8_t>(tf::Tensor::VT_TYPE, static_cast<int8_t>(tf::TensorType::FLOAT32),
                                0)) {
      *why = "could not patch tensor " + std::to_string(p.x);
      return false;
    }
    for (const tf::Operator* op : *so->operators()) {
      if (code_of(op->opcode_index()) == static_cast<int32_t>(tf::BuiltinOperator::DEQUANTIZE)) {
        continue;
      }
      auto* inputs = const_cast<flatbuffers::Vector<int32_t>*>(op->inputs());
      for (uint32_t i = 0; i < inputs->size(); ++i) {
        if (inputs->Get(i) == p.w) inputs->Mutate(i, p.x);
      }
    }
  }
  for (uint32_t i = 0; i < mo->operator_codes()->size(); ++i) {
    if (code_of(i) != static_cast<int32_t>(tf::BuiltinOperator::DEQUANTIZE)) continue;
    flatbuffers::Table* c = mutable_table(mo->operator_codes()->Get(i));
    const auto relu = tf::BuiltinOperator::RELU;
    c->SetField<int8_t>(tf::OperatorCode::VT_DEPRECATED_BUILTIN_CODE, static_cast<int8_t>(relu), 0);
    c->SetField<int32_t>(tf::OperatorCode::VT_BUILTIN_CODE, static_cast<int32_t>(relu), 0);
  }
  return true;
}

// Why Arm NN 20.08 would compute another result than TFLite for `model`
// (an op whose semantics it gets wrong), or "".
std::string KnownArmnnDivergence(const std::vector<uint8_t>& model) {
  namespace tf = ::dfarm::tflite;
  const tf::Model* m = tf::GetModel(model.data());
  const tf::SubGraph* sg = m->subgraphs()->Get(0);
  for (uint32_t k = 0; k < sg->operators()->size(); ++k) {
    const tf::Operator* op = sg->operators()->Get(k);
    const tf::OperatorCode* c = m->operator_codes()->Get(op->opcode_index());
    const auto code = static_cast<tf::BuiltinOperator>(
        std::max(static_cast<int32_t>(c->deprecated_builtin_code()),
                 static_cast<int32_t>(c->builtin_code())));
    if (code == tf::BuiltinOperator::RESIZE_BILINEAR) {
      const auto* o = op->builtin_options_as_ResizeBilinearOptions();
      if (o != nullptr && o->half_pixel_centers()) {
        return "node " + std::to_string(k) +
               " is RESIZE_BILINEAR with half_pixel_centers, which Arm NN 20.08 ignores "
               "(ArmnnDisagreementTest.ResizeBilinearHalfPixelCentersIsDecidedByHand decides)";
      }
    }
    if (code == tf::BuiltinOperator::TRANSPOSE_CONV) {
      const auto* o = op->builtin_options_as_TransposeConvOptions();
      if (o != nullptr && o->padding() == tf::Padding::SAME) {
        return "node " + std::to_string(k) +
               " is TRANSPOSE_CONV with SAME padding, which Arm NN 20.08 pads from the input "
               "size (ArmnnDisagreementTest.TransposeConvSameIsDecidedByHand decides)";
      }
    }
  }
  return {};
}

class ArmnnCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArmnnCorpusTest, MatchesOurRuntime) {
  SKIP_WITHOUT_CPUREF();
  const std::filesystem::path path = std::filesystem::path(DFARM_MODELS_DIR) / GetParam();
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is missing (scripts/setup.sh fetches the corpus)";
  }
  std::ifstream file(path, std::ios::binary);
  const std::vector<uint8_t> model((std::istreambuf_iterator<char>(file)),
                                   std::istreambuf_iterator<char>());
  std::vector<TensorBytes> inputs, ours;
  runtime::Status s = RunOurs(model, 7, &inputs, &ours);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string divergence = KnownArmnnDivergence(model);
  if (!divergence.empty()) GTEST_SKIP() << divergence;
  std::vector<uint8_t> for_armnn = model;
  std::string fold_note;
  if (FoldFloat16Dequantize(model, &for_armnn, &fold_note)) {
    std::printf("float16 weights behind DEQUANTIZE folded to float32 for Arm NN\n");
  }
  std::vector<std::vector<uint8_t>> theirs;
  const std::string armnn_error = RunArmnn(for_armnn, inputs, &theirs);
  if (!armnn_error.empty()) GTEST_SKIP() << armnn_error;
  EXPECT_EQ(Compare(ours, theirs), "");
}

INSTANTIATE_TEST_SUITE_P(Models, ArmnnCorpusTest,
                         ::testing::Values("face_detection_short_range.tflite",
                                           "face_detection_full_range.tflite",
                                           "face_detection_full_range_sparse.tflite",
                                           "hand_landmark_lite.tflite", "hand_landmark_full.tflite",
                                           "selfie_segmentation.tflite",
                                           "selfie_segmentation_landscape.tflite"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.find('.'));
                           return name;
                         });

}  // namespace
}  // namespace dfarm::testing
