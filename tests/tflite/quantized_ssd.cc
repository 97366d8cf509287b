#include "tests/tflite/quantized_ssd.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <utility>

#include "flatbuffers/flexbuffers.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::tflite_test {
namespace {

namespace tfl = ::dfarm::tflite;
using Act = tfl::ActivationFunctionType;
using testing::Conv2DParams;
using testing::DepthwiseConv2DParams;
using testing::ModelBuilder;
using testing::Pool2DParams;

// A quantized activation: its tensor, real-valued RMS estimate and name.
struct Feature {
  int tensor = -1;
  std::vector<int32_t> shape;
  float scale = 0;
  int zp = 0;       // in uint8 terms (int8 tensors hold zp - 128)
  float rms = 0;    // estimated RMS of the real values, to pick the next scales
  int source = -1;  // RESHAPE's input, which shares the quantization
};

// Writes the network. Scales and zero points are chosen in uint8 terms; the
// int8 variant holds the same real ranges with zero points moved by -128.
class SsdMaker {
 public:
  SsdMaker(bool int8, uint32_t seed) : int8_(int8), rng_(seed) {}

  Feature Input(std::vector<int32_t> shape) {
    Feature f = NewFeature(shape, 1.0f / 128, 128, 0.6f, "input");
    std::uniform_int_distribution<int> u(0, 255);
    input_.resize(Count(shape));
    for (uint8_t& x : input_) x = static_cast<uint8_t>(u(rng_));
    b_.SetInputs({f.tensor});
    return f;
  }

  // CONV_2D; RELU6 outputs take [0, 6], linear ones about +-4 RMS.
  Feature Conv(const Feature& in, int out_c, int k, int stride, Act act, const std::string& name) {
    const int in_c = in.shape[3];
    const int out_h = (in.shape[1] + stride - 1) / stride,
              out_w = (in.shape[2] + stride - 1) / stride;
    std::vector<float> scales;
    const int filter = Weights({out_c, k, k, in_c}, out_c, k * k * in_c, 0, &scales);
    Feature out = Output({1, out_h, out_w, out_c}, in, act, name);
    Conv2DParams p;
    p.padding = tfl::Padding::SAME;
    p.stride_h = p.stride_w = stride;
    p.activation = act;
    b_.AddConv2D(in.tensor, filter, Bias(in.scale, scales, out_c), out.tensor, p);
    return out;
  }

  Feature Depthwise(const Feature& in, int multiplier, int stride, const std::string& name,
                    Act act = Act::RELU6) {
    const int out_c = in.shape[3] * multiplier;
    const int out_h = (in.shape[1] + stride - 1) / stride,
              out_w = (in.shape[2] + stride - 1) / stride;
    std::vector<float> scales;
    const int filter = Weights({1, 3, 3, out_c}, out_c, 9, 3, &scales);
    Feature out = Output({1, out_h, out_w, out_c}, in, act, name);
    DepthwiseConv2DParams p;
    p.padding = tfl::Padding::SAME;
    p.stride_h = p.stride_w = stride;
    p.depth_multiplier = multiplier;
    p.activation = act;
    b_.AddDepthwiseConv2D(in.tensor, filter, Bias(in.scale, scales, out_c), out.tensor, p);
    return out;
  }

  // FULLY_CONNECTED over the last dimension, per-tensor weights (TFLite 2.9
  // has no per-channel FULLY_CONNECTED), linear output.
  Feature FullyConnected(const Feature& in, int units, const std::string& name) {
    const int depth = in.shape.back();
    std::vector<float> scales;
    const int weights = Weights({units, depth}, 1, depth, 0, &scales);
    Feature out = Output({in.shape[0], units}, in, Act::NONE, name);
    b_.AddFullyConnected(in.tensor, weights, Bias(in.scale, scales, units), out.tensor);
    return out;
  }

  // BATCH_MATMUL of `in` [1, rows, depth] by constant per-tensor weights [1, depth, units].
  Feature BatchMatMul(const Feature& in, int units, const std::string& name) {
    const int depth = in.shape[2];
    std::vector<float> scales;
    const int w = Weights({1, depth, units}, 1, depth, 0, &scales);
    Feature out = Output({1, in.shape[1], units}, in, Act::NONE, name);
    b_.AddOperator(tfl::BuiltinOperator::BATCH_MATMUL, {in.tensor, w}, {out.tensor},
                   tfl::BuiltinOptions::BatchMatMulOptions, [](flatbuffers::FlatBufferBuilder& fb) {
                     return tfl::CreateBatchMatMulOptions(fb, false, false).Union();
                   });
    return out;
  }

  // TRANSPOSE_CONV 3x3, stride 2, SAME: doubles `in`'s height and width.
  Feature TransposeConv(const Feature& in, int out_c, const std::string& name) {
    const int in_c = in.shape[3];
    const std::vector<int32_t> shape = {1, in.shape[1] * 2, in.shape[2] * 2, out_c};
    std::vector<float> scales;
    const int w = Weights({out_c, 3, 3, in_c}, out_c, 9 * in_c, 0, &scales);
    Feature out = Output(shape, in, Act::NONE, name);
    testing::TransposeConvParams p;
    p.padding = tfl::Padding::SAME;
    p.stride_h = p.stride_w = 2;
    b_.AddTransposeConv(b_.AddConstInt32({4}, shape), w, in.tensor, Bias(in.scale, scales, out_c),
                        out.tensor, p);
    return out;
  }

  // Residual ADD: the output's range covers both inputs'.
  Feature Add(const Feature& a, const Feature& b, const std::string& name) {
    const float rms = std::sqrt(a.rms * a.rms + b.rms * b.rms);
    Feature out = NewFeature(a.shape, 8 * rms / 255, ZeroPointNear(128), rms, name);
    b_.AddAdd(a.tensor, b.tensor, out.tensor);
    return out;
  }

  Feature AvgPool(const Feature& in, int k, int stride, const std::string& name) {
    const int out_h = (in.shape[1] - k) / stride + 1, out_w = (in.shape[2] - k) / stride + 1;
    Feature out = NewFeature({1, out_h, out_w, in.shape[3]}, in.scale, in.zp, in.rms, name);
    Pool2DParams p;
    p.filter_h = p.filter_w = k;
    p.stride_h = p.stride_w = stride;
    b_.AddPool2D(tfl::BuiltinOperator::AVERAGE_POOL_2D, in.tensor, out.tensor, p);
    return out;
  }

  Feature Reshape(const Feature& in, std::vector<int32_t> shape, const std::string& name) {
    Feature out = NewFeature(shape, in.scale, in.zp, in.rms, name);
    out.source = in.tensor;
    b_.AddReshape(in.tensor, out.tensor, shape);
    return out;
  }

  // Along axis 1; the output's scale is a little above the largest input's.
  Feature Concat(const std::vector<Feature>& ins, const std::string& name) {
    std::vector<int32_t> shape = ins[0].shape, tensors;
    shape[1] = 0;
    float scale = 0, rms = 0;
    for (const Feature& f : ins) {
      shape[1] += f.shape[1];
      scale = std::max(scale, f.scale);
      rms = std::max(rms, f.rms);
      tensors.push_back(f.tensor);
    }
    Feature out = NewFeature(shape, scale * 1.07f, ZeroPointNear(128), rms, name);
    if (int8_) {
      // TFLite's int8 CONCATENATION takes inputs quantized as its output (the
      // converter makes them so); RESHAPEs carry that back to the convolutions.
      for (const Feature& f : ins) {
        b_.SetQuantization(f.tensor, out.scale, out.zp - 128);
        if (f.source >= 0) b_.SetQuantization(f.source, out.scale, out.zp - 128);
      }
    }
    b_.AddConcatenation(tensors, out.tensor, 1);
    return out;
  }

  Feature Logistic(const Feature& in, const std::string& name) {
    Feature out = NewFeature(in.shape, 1.0f / 256, 0, 0.3f, name);
    b_.AddUnary(tfl::BuiltinOperator::LOGISTIC, in.tensor, out.tensor);
    return out;
  }

  // TFLite_Detection_PostProcess of `boxes` [1,N,4] and `scores` [1,N,4]
  // with one anchor (y, x, h, w) per box: `anchors` lists each feature map's
  // side and anchors per cell, as Heads() made them. uint8: the quantized
  // tensors and uint8 anchors (scale 1/255) go in directly; int8: DEQUANTIZE
  // to float first, float anchors. Its four outputs are declared [] and
  // become the model's last outputs.
  void PostProcess(const Feature& boxes, const Feature& scores,
                   const std::vector<std::pair<int, int>>& anchors, bool regular_nms) {
    std::vector<float> yxhw;
    for (auto [side, per_cell] : anchors) {
      for (int cell = 0; cell < side * side; ++cell) {
        for (int a = 0; a < per_cell; ++a) {
          const float size = 0.1f + 0.6f * static_cast<float>(a + 1) / static_cast<float>(per_cell);
          const float aspect = a % 2 == 0 ? 1.0f : 2.0f;
          yxhw.insert(yxhw.end(), {(static_cast<float>(cell / side) + 0.5f) / side,
                                   (static_cast<float>(cell % side) + 0.5f) / side,
                                   size / std::sqrt(aspect), size * std::sqrt(aspect)});
        }
      }
    }
    const int n = boxes.shape[1];
    if (yxhw.size() != static_cast<size_t>(n) * 4) {
      throw std::logic_error("PostProcess: the anchors do not give one per box");
    }
    int box_in = boxes.tensor, score_in = scores.tensor, anchor_in = -1;
    if (!int8_) {
      std::vector<uint8_t> q;
      for (float v : yxhw)
        q.push_back(static_cast<uint8_t>(std::clamp(std::lround(v * 255), 0L, 255L)));
      anchor_in = b_.AddConstUint8({n, 4}, q, "anchors");
      b_.SetQuantization(anchor_in, 1.0f / 255, 0);
    } else {
      box_in = b_.AddTensor(tfl::TensorType::FLOAT32, boxes.shape, "boxes/dequantize");
      b_.AddOperator(tfl::BuiltinOperator::DEQUANTIZE, {boxes.tensor}, {box_in});
      score_in = b_.AddTensor(tfl::TensorType::FLOAT32, scores.shape, "scores/dequantize");
      b_.AddOperator(tfl::BuiltinOperator::DEQUANTIZE, {scores.tensor}, {score_in});
      anchor_in = b_.AddConstFloat32({n, 4}, yxhw, "anchors");
    }
    std::vector<int32_t> out;
    for (const char* name :
         {"detection_boxes", "detection_classes", "detection_scores", "num_detections"}) {
      out.push_back(b_.AddTensor(tfl::TensorType::FLOAT32, {}, name));
      detection_outputs_.push_back(out.back());
    }
    b_.AddCustomOperator("TFLite_Detection_PostProcess", {box_in, score_in, anchor_in}, out,
                         DetectionOptions({.max_detections = 20,
                                           .detections_per_class = 5,
                                           .num_classes = 3,
                                           .score_threshold = 0.6f,
                                           .iou_threshold = 0.45f,
                                           .regular_nms = regular_nms}));
  }

  // Every activation but the input is an output, in creation order; then
  // the post-process's four, if any.
  Network Finish() {
    std::vector<int32_t> outputs = outputs_;
    outputs.insert(outputs.end(), detection_outputs_.begin(), detection_outputs_.end());
    b_.SetOutputs(outputs);
    return {b_.Build(), input_, names_, !detection_outputs_.empty()};
  }

 private:
  static size_t Count(const std::vector<int32_t>& shape) {
    size_t n = 1;
    for (int32_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }

  int ZeroPointNear(int center) {
    std::uniform_int_distribution<int> u(-12, 12);
    return center + u(rng_);
  }

  Feature NewFeature(std::vector<int32_t> shape, float scale, int zp, float rms,
                     const std::string& name) {
    Feature f;
    f.shape = shape;
    f.tensor = b_.AddTensor(int8_ ? tfl::TensorType::INT8 : tfl::TensorType::UINT8, shape, name);
    f.scale = scale;
    f.zp = zp;
    f.rms = rms;
    b_.SetQuantization(f.tensor, scale, int8_ ? zp - 128 : zp);
    if (name != "input") {
      outputs_.push_back(f.tensor);
      names_.push_back(name);
    }
    return f;
  }

  // The output of a convolution of `in`.
  Feature Output(std::vector<int32_t> shape, const Feature& in, Act act, const std::string& name) {
    // He-initialised weights: the output's RMS is about sqrt(2) times the input's.
    const float rms = std::sqrt(2.0f) * in.rms + 0.3f;
    if (act == Act::RELU6) return NewFeature(shape, 6.0f / 255, 0, std::min(rms, 2.5f), name);
    return NewFeature(shape, 8 * rms / 255, ZeroPointNear(128), rms, name);
  }

  // Seeded weights, N(0, sqrt(2 / fan_in)) scaled per channel by 0.5..1.5
  // (channels along `channel_dim`, `channels` of them): uint8 per-tensor
  // asymmetric or int8 per-channel symmetric. `scales_out`: one per tensor or channel.
  int Weights(std::vector<int32_t> shape, int channels, int fan_in, int channel_dim,
              std::vector<float>* scales_out) {
    const size_t n = Count(shape);
    std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / fan_in));
    std::uniform_real_distribution<float> gain(0.5f, 1.5f);
    std::vector<float> channel_gain(channels);
    for (float& g : channel_gain) g = gain(rng_);
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = channel_dim == 0 ? i / (n / channels) : i % channels;
      w[i] = normal(rng_) * channel_gain[c];
    }
    if (!int8_) {
      const float lo = std::min(0.0f, *std::min_element(w.begin(), w.end()));
      const float hi = std::max(0.0f, *std::max_element(w.begin(), w.end()));
      const float scale = (hi - lo) / 255;
      const int zp = static_cast<int>(std::round(-lo / scale));
      std::vector<uint8_t> q(n);
      for (size_t i = 0; i < n; ++i) {
        q[i] = static_cast<uint8_t>(std::clamp<int>(std::lround(w[i] / scale) + zp, 0, 255));
      }
      const int t = b_.AddConstUint8(shape, q);
      b_.SetQuantization(t, scale, zp);
      *scales_out = {scale};
      return t;
    }
    std::vector<float> max_abs(channels, 1e-6f);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = channel_dim == 0 ? i / (n / channels) : i % channels;
      max_abs[c] = std::max(max_abs[c], std::fabs(w[i]));
    }
    std::vector<int8_t> q(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = channel_dim == 0 ? i / (n / channels) : i % channels;
      q[i] = static_cast<int8_t>(std::clamp<long>(std::lround(w[i] / max_abs[c] * 127), -127, 127));
    }
    for (float& s : max_abs) s /= 127;
    const int t = b_.AddConstInt8(shape, q);
    b_.SetQuantization(t, max_abs, std::vector<int64_t>(channels, 0), channel_dim);
    *scales_out = max_abs;
    return t;
  }

  // Real biases N(0, 0.3) in int32 at input_scale * weight scale.
  int Bias(float input_scale, const std::vector<float>& weight_scales, int count) {
    std::normal_distribution<float> normal(0.0f, 0.3f);
    std::vector<int32_t> v(count);
    for (int c = 0; c < count; ++c) {
      const float s = input_scale * weight_scales[weight_scales.size() == 1 ? 0 : c];
      v[c] = static_cast<int32_t>(std::lround(normal(rng_) / s));
    }
    return b_.AddQuantizedBias(v, input_scale, weight_scales);
  }

  bool int8_;
  std::mt19937 rng_;
  ModelBuilder b_;
  std::vector<uint8_t> input_;
  std::vector<int32_t> outputs_;
  std::vector<int32_t> detection_outputs_;
  std::vector<std::string> names_;
};

// Expand (t > 1), depthwise, project; a residual ADD when shapes allow.
Feature InvertedResidual(SsdMaker& m, const Feature& in, int expand, int out_c, int stride,
                         const std::string& name, Feature* expanded = nullptr) {
  Feature x = in;
  if (expand > 1) x = m.Conv(in, in.shape[3] * expand, 1, 1, Act::RELU6, name + "/expand");
  if (expanded != nullptr) *expanded = x;
  x = m.Depthwise(x, 1, stride, name + "/depthwise");
  x = m.Conv(x, out_c, 1, 1, Act::NONE, name + "/project");
  if (stride == 1 && in.shape[3] == out_c) x = m.Add(in, x, name + "/add");
  return x;
}

// Box (3x3 conv) and class (SSDLite: depthwise + 1x1) heads of one feature map,
// reshaped to [1, anchors, 4] and [1, anchors, classes].
void Heads(SsdMaker& m, const Feature& f, int anchors, int classes, const std::string& name,
           std::vector<Feature>* boxes, std::vector<Feature>* scores, bool linear = false) {
  const int n = f.shape[1] * f.shape[2] * anchors;
  Feature box = m.Conv(f, anchors * 4, 3, 1, Act::NONE, name + "/box");
  boxes->push_back(m.Reshape(box, {1, n, 4}, name + "/box_reshape"));
  // Heads a and d have a linear depthwise, so that its negative sums are not clamped away.
  Feature cls = m.Depthwise(f, 1, 1, name + "/class_depthwise", linear ? Act::NONE : Act::RELU6);
  cls = m.Conv(cls, anchors * classes, 1, 1, Act::NONE, name + "/class");
  scores->push_back(m.Reshape(cls, {1, n, classes}, name + "/class_reshape"));
}

}  // namespace

Network BuildSsd(bool int8, uint32_t seed) {
  SsdMaker m(int8, seed);
  Feature x = m.Input({1, 96, 96, 3});
  x = m.Conv(x, 16, 3, 2, Act::RELU6, "stem");                // 48x48
  x = InvertedResidual(m, x, 1, 8, 1, "block1");              // 48x48x8
  x = InvertedResidual(m, x, 6, 16, 2, "block2");             // 24x24x16
  x = InvertedResidual(m, x, 6, 16, 1, "block3");             // + residual
  x = InvertedResidual(m, x, 6, 24, 2, "block4");             // 12x12x24
  x = InvertedResidual(m, x, 6, 24, 1, "block5");             // + residual
  x = InvertedResidual(m, x, 6, 24, 1, "block6");             // + residual
  x = m.Depthwise(x, 2, 1, "multiplier2/depthwise");          // 12x12x48
  x = m.Conv(x, 32, 1, 1, Act::NONE, "multiplier2/project");  // 12x12x32
  Feature feature_a;
  x = InvertedResidual(m, x, 6, 32, 2, "block7", &feature_a);  // 6x6x32; feature A 12x12x192
  x = InvertedResidual(m, x, 6, 32, 1, "block8");
  Feature feature_b = m.Conv(x, 64, 1, 1, Act::RELU6, "feature_b");            // 6x6x64
  Feature squeeze = m.Conv(feature_b, 32, 1, 1, Act::RELU6, "feature_c/1x1");  // 6x6x32
  Feature feature_c = m.Conv(squeeze, 64, 3, 2, Act::RELU6, "feature_c/3x3");  // 3x3x64
  Feature feature_d = m.AvgPool(feature_c, 2, 1, "feature_d");                 // 2x2x64
  // Not in SSD: a FULLY_CONNECTED over feature A's 144 positions.
  Feature rows = m.Reshape(feature_a, {144, 192}, "feature_a/rows");
  m.FullyConnected(rows, 32, "feature_a/fully_connected");
  std::vector<Feature> boxes, scores;
  Heads(m, feature_a, 3, 4, "head_a", &boxes, &scores, /*linear=*/true);
  Heads(m, feature_b, 6, 4, "head_b", &boxes, &scores);
  Heads(m, feature_c, 6, 4, "head_c", &boxes, &scores);
  Heads(m, feature_d, 6, 4, "head_d", &boxes, &scores, /*linear=*/true);
  Feature box_encodings = m.Concat(boxes, "boxes");
  Feature logits = m.Concat(scores, "class_logits");
  Feature class_scores = m.Logistic(logits, "scores");
  m.PostProcess(box_encodings, class_scores, {{12, 3}, {6, 6}, {3, 6}, {2, 6}},
                /*regular_nms=*/seed % 2 == 0);
  return m.Finish();
}

// Ops outside SSD on the same integer arithmetic: TRANSPOSE_CONV (TFLite's own
// requantization, away from zero) and, int8 only as in TFLite 2.9, BATCH_MATMUL
// (TFLite's GEMM, halves upward), after a linear stem convolution.
Network BuildGemmOps(bool int8, uint32_t seed) {
  SsdMaker m(int8, seed);
  Feature x = m.Input({1, 96, 96, 3});
  x = m.Conv(x, 16, 3, 2, Act::NONE, "stem");  // 48x48x16
  m.TransposeConv(x, 8, "transpose_conv");     // 96x96x8
  if (int8) m.BatchMatMul(m.Reshape(x, {1, 48 * 48, 16}, "rows"), 32, "batch_matmul");
  return m.Finish();
}

std::vector<uint8_t> DetectionOptions(const DetectionSpec& spec) {
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", spec.max_detections);
    fbb.Int("max_classes_per_detection", 1);
    fbb.Int("detections_per_class", spec.detections_per_class);
    fbb.Bool("use_regular_nms", spec.regular_nms);
    fbb.Float("nms_score_threshold", spec.score_threshold);
    fbb.Float("nms_iou_threshold", spec.iou_threshold);
    fbb.Int("num_classes", spec.num_classes);
    fbb.Float("y_scale", 10.0f);
    fbb.Float("x_scale", 10.0f);
    fbb.Float("h_scale", 5.0f);
    fbb.Float("w_scale", 5.0f);
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

}  // namespace dfarm::tflite_test
