#include "delegates/conformance/catalog.h"

#include <cstring>
#include <random>
#include <utility>

#include "tests/model_builder/model_builder.h"

namespace dfarm::conformance {
namespace {

using testing::ModelBuilder;
namespace tfl = ::dfarm::tflite;
using Op = tfl::BuiltinOperator;
using Act = tfl::ActivationFunctionType;
using Shape = std::vector<int32_t>;

// One case under construction: a builder, seeded constants, the op's name.
class Case {
 public:
  explicit Case(std::string op, uint32_t seed) : op_(std::move(op)), rng_(seed) {}
  int In(Shape shape) {
    const int t = b_.AddTensor(tfl::TensorType::FLOAT32, std::move(shape));
    inputs_.push_back(t);
    return t;
  }
  int Out(Shape shape) {
    const int t = b_.AddTensor(tfl::TensorType::FLOAT32, std::move(shape));
    outputs_.push_back(t);
    return t;
  }
  int Const(Shape shape, float lo = -1.0f, float hi = 1.0f) {
    int64_t n = 1;
    for (int32_t d : shape) n *= d;
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng_);
    return b_.AddConstFloat32(std::move(shape), v);
  }
  int Ints(Shape shape, std::vector<int32_t> values) {
    return b_.AddConstInt32(std::move(shape), values);
  }
  ModelBuilder& b() { return b_; }

  // Quantized cases: a model input x, QUANTIZEd into the returned tensor.
  int QIn(Shape shape, tfl::TensorType type, float scale, int64_t zero_point) {
    const int x = In(shape);
    const int q = b_.AddTensor(type, std::move(shape));
    b_.SetQuantization(q, scale, zero_point);
    b_.AddOperator(Op::QUANTIZE, {x}, {q});
    return q;
  }
  // A quantized tensor DEQUANTIZEd (at Done(), after the op) into a model output.
  int QOut(Shape shape, tfl::TensorType type, float scale, int64_t zero_point) {
    const int q = b_.AddTensor(type, shape);
    b_.SetQuantization(q, scale, zero_point);
    dequantize_.emplace_back(q, std::move(shape));
    quantum_ = scale;
    return q;
  }
  // Constant weights of `type`: int8 in [-127, 127] with zero point 0, per
  // channel along `channel_dim` (scales in [0.004, 0.008]) or per tensor
  // (channel_dim < 0, scale 0.006); uint8 per tensor, zero point 120, scale 0.006.
  // `scales_out` gets one scale per channel (or the one).
  int QWeights(Shape shape, tfl::TensorType type, int channel_dim, std::vector<float>* scales_out) {
    int64_t n = 1;
    for (int32_t d : shape) n *= d;
    std::uniform_int_distribution<int> q(type == tfl::TensorType::INT8 ? -127 : 0,
                                         type == tfl::TensorType::INT8 ? 127 : 255);
    std::vector<uint8_t> bytes(static_cast<size_t>(n));
    for (uint8_t& v : bytes) v = static_cast<uint8_t>(q(rng_));
    const int t = b_.AddConstRaw(type, shape, bytes);
    if (channel_dim >= 0) {
      std::uniform_real_distribution<float> u(0.004f, 0.008f);
      scales_out->resize(static_cast<size_t>(shape[channel_dim]));
      for (float& s : *scales_out) s = u(rng_);
      b_.SetQuantization(t, *scales_out, std::vector<int64_t>(scales_out->size(), 0), channel_dim);
    } else {
      *scales_out = {0.006f};
      b_.SetQuantization(t, 0.006f, type == tfl::TensorType::INT8 ? 0 : 120);
    }
    return t;
  }
  // An int32 bias in [-500, 500] of scale input_scale * weight scale (per channel when several).
  int QBias(int channels, float input_scale, const std::vector<float>& weight_scales) {
    std::uniform_int_distribution<int32_t> q(-500, 500);
    std::vector<int32_t> v(static_cast<size_t>(channels));
    for (int32_t& x : v) x = q(rng_);
    return b_.AddQuantizedBias(v, input_scale, weight_scales);
  }

  ConformanceCase Done(std::string detail, float lo = -1.0f, float hi = 1.0f) {
    for (auto& [q, shape] : dequantize_) {
      const int x = Out(shape);
      b_.AddDequantize(q, x);
    }
    b_.SetInputs(inputs_);
    b_.SetOutputs(outputs_);
    return ConformanceCase{op_ + " " + detail, op_, b_.Build(), lo, hi, quantum_};
  }

 private:
  std::string op_;
  std::mt19937 rng_;
  ModelBuilder b_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<std::pair<int, Shape>> dequantize_;
  float quantum_ = 0.0f;
};

std::string Name(Op op) { return tfl::EnumNameBuiltinOperator(op); }

void AddBinaryCases(std::vector<ConformanceCase>* out) {
  const Op ops[] = {
      Op::ADD, Op::SUB, Op::MUL, Op::DIV, Op::MAXIMUM, Op::MINIMUM, Op::SQUARED_DIFFERENCE};
  uint32_t seed = 100;
  for (Op op : ops) {
    const bool fused = op == Op::ADD || op == Op::SUB || op == Op::MUL || op == Op::DIV;
    {  // same shapes; a DIV divisor kept away from zero as a constant
      Case c(Name(op), seed++);
      const int a = c.In({1, 4, 4, 3});
      const int d = op == Op::DIV ? c.Const({1, 4, 4, 3}, 0.5f, 2.0f) : c.In({1, 4, 4, 3});
      c.b().AddBinary(op, a, d, c.Out({1, 4, 4, 3}));
      out->push_back(c.Done("[1,4,4,3] x [1,4,4,3]"));
    }
    {  // broadcast of a per-channel constant, with a fused activation
      Case c(Name(op), seed++);
      const int a = c.In({1, 3, 5, 4});
      const int d = c.Const({4}, 0.5f, 2.0f);
      c.b().AddBinary(op, a, d, c.Out({1, 3, 5, 4}), fused ? Act::RELU6 : Act::NONE);
      out->push_back(c.Done(std::string("[1,3,5,4] x const [4]") + (fused ? " RELU6" : "")));
    }
  }
  {  // broadcast of both operands
    Case c("ADD", seed++);
    const int a = c.In({2, 1, 3});
    const int d = c.In({1, 4, 1});
    c.b().AddBinary(Op::ADD, a, d, c.Out({2, 4, 3}), Act::RELU_N1_TO_1);
    out->push_back(c.Done("[2,1,3] x [1,4,1] RELU_N1_TO_1"));
  }
}

void AddUnaryCases(std::vector<ConformanceCase>* out) {
  struct U {
    Op op;
    float lo, hi;
  };
  const U ops[] = {{Op::RELU, -2, 2},     {Op::RELU6, -3, 9},      {Op::RELU_N1_TO_1, -2, 2},
                   {Op::LOGISTIC, -6, 6}, {Op::HARD_SWISH, -5, 5}, {Op::ABS, -2, 2},
                   {Op::NEG, -2, 2},      {Op::SQRT, 0, 4},        {Op::TANH, -3, 3}};
  uint32_t seed = 200;
  for (const U& u : ops) {
    Case c(Name(u.op), seed++);
    c.b().AddUnary(u.op, c.In({1, 5, 7, 3}), c.Out({1, 5, 7, 3}));
    out->push_back(c.Done("[1,5,7,3]", u.lo, u.hi));
  }
  {
    Case c("LEAKY_RELU", seed++);
    c.b().AddLeakyRelu(c.In({2, 9}), c.Out({2, 9}), 0.2f);
    out->push_back(c.Done("alpha 0.2 [2,9]", -2, 2));
  }
  for (const Shape& s : {Shape{1, 10}, Shape{2, 3, 8}}) {
    Case c("SOFTMAX", seed++);
    c.b().AddOperator(Op::SOFTMAX, {c.In(s)}, {c.Out(s)}, tfl::BuiltinOptions::SoftmaxOptions,
                      [](flatbuffers::FlatBufferBuilder& fb) {
                        return tfl::CreateSoftmaxOptions(fb, 1.0f).Union();
                      });
    out->push_back(c.Done("beta 1 " + std::string(s.size() == 2 ? "[1,10]" : "[2,3,8]"), -4, 4));
  }
  {  // per-channel slope, and one written [1,1,C]
    Case c("PRELU", seed++);
    c.b().AddBinary(Op::PRELU, c.In({1, 4, 4, 3}), c.Const({3}), c.Out({1, 4, 4, 3}));
    out->push_back(c.Done("alpha [3]", -2, 2));
    Case d("PRELU", seed++);
    d.b().AddBinary(Op::PRELU, d.In({1, 4, 4, 3}), d.Const({1, 1, 3}), d.Out({1, 4, 4, 3}));
    out->push_back(d.Done("alpha [1,1,3]", -2, 2));
  }
}

void AddConvCases(std::vector<ConformanceCase>* out) {
  uint32_t seed = 300;
  struct C {
    std::string detail;
    Shape in, filter, out;
    testing::Conv2DParams p;
    bool bias;
  };
  testing::Conv2DParams same_s2{tfl::Padding::SAME, 2, 2, 1, 1, Act::RELU};
  testing::Conv2DParams valid{};
  testing::Conv2DParams dil{tfl::Padding::SAME, 1, 1, 2, 2, Act::NONE};
  testing::Conv2DParams same5{tfl::Padding::SAME, 2, 2, 1, 1, Act::RELU6};
  const C convs[] = {
      {"3x3 VALID s1 [1,6,6,3]->[1,4,4,5]", {1, 6, 6, 3}, {5, 3, 3, 3}, {1, 4, 4, 5}, valid, true},
      // SAME with an even input pads one more at the bottom/right.
      {"3x3 SAME s2 RELU [1,8,8,3]->[1,4,4,4]",
       {1, 8, 8, 3},
       {4, 3, 3, 3},
       {1, 4, 4, 4},
       same_s2,
       true},
      {"1x1 no bias [2,3,3,8]->[2,3,3,6]", {2, 3, 3, 8}, {6, 1, 1, 8}, {2, 3, 3, 6}, valid, false},
      {"3x3 SAME dilation 2 [1,7,7,2]->[1,7,7,3]",
       {1, 7, 7, 2},
       {3, 3, 3, 2},
       {1, 7, 7, 3},
       dil,
       true},
      {"3x3 SAME grouped 2 [1,6,6,4]->[1,6,6,6]",
       {1, 6, 6, 4},
       {6, 3, 3, 2},
       {1, 6, 6, 6},
       {tfl::Padding::SAME, 1, 1, 1, 1, Act::RELU},
       true},
      {"5x5 SAME s2 RELU6 [1,7,6,4]->[1,4,3,8]",
       {1, 7, 6, 4},
       {8, 5, 5, 4},
       {1, 4, 3, 8},
       same5,
       true},
  };
  for (const C& v : convs) {
    Case c("CONV_2D", seed++);
    const int in = c.In(v.in);
    const int f = c.Const(v.filter);
    const int b = v.bias ? c.Const({v.filter[0]}) : -1;
    c.b().AddConv2D(in, f, b, c.Out(v.out), v.p);
    out->push_back(c.Done(v.detail));
  }
  struct D {
    std::string detail;
    Shape in, filter, out;
    testing::DepthwiseConv2DParams p;
  };
  const D dws[] = {
      {"3x3 SAME s1 [1,6,6,4]",
       {1, 6, 6, 4},
       {1, 3, 3, 4},
       {1, 6, 6, 4},
       {tfl::Padding::SAME, 1, 1, 1, 1, 1, Act::NONE}},
      {"3x3 SAME s2 RELU6 [1,8,8,3]->[1,4,4,3]",
       {1, 8, 8, 3},
       {1, 3, 3, 3},
       {1, 4, 4, 3},
       {tfl::Padding::SAME, 2, 2, 1, 1, 1, Act::RELU6}},
      {"5x5 VALID multiplier 2 [1,7,7,2]->[1,3,3,4]",
       {1, 7, 7, 2},
       {1, 5, 5, 4},
       {1, 3, 3, 4},
       {tfl::Padding::VALID, 1, 1, 2, 1, 1, Act::NONE}},
  };
  for (const D& v : dws) {
    Case c("DEPTHWISE_CONV_2D", seed++);
    const int in = c.In(v.in);
    const int f = c.Const(v.filter);
    const int b = c.Const({v.filter[3]});
    c.b().AddDepthwiseConv2D(in, f, b, c.Out(v.out), v.p);
    out->push_back(c.Done(v.detail));
  }
  {  // TRANSPOSE_CONV SAME stride 2: out = in * stride
    Case c("TRANSPOSE_CONV", seed++);
    const int shape = c.Ints({4}, {1, 8, 8, 3});
    const int f = c.Const({3, 3, 3, 2});
    const int in = c.In({1, 4, 4, 2});
    c.b().AddTransposeConv(shape, f, in, c.Const({3}), c.Out({1, 8, 8, 3}),
                           {tfl::Padding::SAME, 2, 2, Act::NONE});
    out->push_back(c.Done("3x3 SAME s2 [1,4,4,2]->[1,8,8,3]"));
  }
  {  // with a fused activation
    Case c("TRANSPOSE_CONV", seed++);
    const int shape = c.Ints({4}, {1, 6, 6, 2});
    const int f = c.Const({2, 3, 3, 3});
    const int in = c.In({1, 3, 3, 3});
    c.b().AddTransposeConv(shape, f, in, c.Const({2}), c.Out({1, 6, 6, 2}),
                           {tfl::Padding::SAME, 2, 2, Act::RELU6});
    out->push_back(c.Done("3x3 SAME s2 RELU6 [1,3,3,3]->[1,6,6,2]", -3, 3));
  }
  {  // MediaPipe's: SAME (1), stride 2x2; 4x4 kernel: out = 2*(4-1)+4-2 = 8
    Case c("Convolution2DTransposeBias", seed++);
    const int in = c.In({1, 4, 4, 3});
    const int f = c.Const({2, 4, 4, 3});
    const int b = c.Const({2});
    const int32_t opts[3] = {1, 2, 2};
    std::vector<uint8_t> bytes(sizeof(opts));
    std::memcpy(bytes.data(), opts, sizeof(opts));
    c.b().AddCustomOperator("Convolution2DTransposeBias", {in, f, b}, {c.Out({1, 8, 8, 2})}, bytes);
    out->push_back(c.Done("4x4 SAME s2 [1,4,4,3]->[1,8,8,2]"));
  }
}

void AddOtherCases(std::vector<ConformanceCase>* out) {
  uint32_t seed = 400;
  {
    Case c("FULLY_CONNECTED", seed++);
    c.b().AddFullyConnected(c.In({2, 8}), c.Const({4, 8}), c.Const({4}), c.Out({2, 4}));
    out->push_back(c.Done("[2,8] x [4,8] + bias"));
  }
  {
    Case c("FULLY_CONNECTED", seed++);
    c.b().AddFullyConnected(c.In({1, 2, 2, 4}), c.Const({5, 16}), -1, c.Out({1, 5}), Act::RELU);
    out->push_back(c.Done("[1,2,2,4] flattened x [5,16] RELU"));
  }
  {
    Case c("FULLY_CONNECTED", seed++);
    c.b().AddFullyConnected(c.In({1, 3, 8}), c.Const({6, 8}), c.Const({6}), c.Out({1, 3, 6}),
                            Act::NONE, /*keep_num_dims=*/true);
    out->push_back(c.Done("keep_num_dims [1,3,8] x [6,8]"));
  }
  struct P {
    Op op;
    std::string detail;
    Shape in, out;
    testing::Pool2DParams p;
  };
  const P pools[] = {
      {Op::MAX_POOL_2D,
       "2x2 VALID s2 [1,6,6,3]",
       {1, 6, 6, 3},
       {1, 3, 3, 3},
       {tfl::Padding::VALID, 2, 2, 2, 2, Act::NONE}},
      {Op::MAX_POOL_2D,
       "3x3 SAME s2 [1,7,7,2]",
       {1, 7, 7, 2},
       {1, 4, 4, 2},
       {tfl::Padding::SAME, 2, 2, 3, 3, Act::RELU}},
      // The padded cells are left out of the average.
      {Op::AVERAGE_POOL_2D,
       "3x3 SAME s1 [1,5,5,3]",
       {1, 5, 5, 3},
       {1, 5, 5, 3},
       {tfl::Padding::SAME, 1, 1, 3, 3, Act::NONE}},
      {Op::AVERAGE_POOL_2D,
       "2x2 SAME s2 [1,5,4,2]",
       {1, 5, 4, 2},
       {1, 3, 2, 2},
       {tfl::Padding::SAME, 2, 2, 2, 2, Act::RELU6}},
      {Op::AVERAGE_POOL_2D,
       "2x2 VALID s2 [1,6,6,3]",
       {1, 6, 6, 3},
       {1, 3, 3, 3},
       {tfl::Padding::VALID, 2, 2, 2, 2, Act::NONE}},
  };
  for (const P& v : pools) {
    Case c(Name(v.op), seed++);
    c.b().AddPool2D(v.op, c.In(v.in), c.Out(v.out), v.p);
    out->push_back(c.Done(v.detail));
  }
  for (bool keep : {true, false}) {
    Case c("MEAN", seed++);
    const int in = c.In({1, 5, 6, 4});
    c.b().AddReducer(Op::MEAN, in, c.Ints({2}, {1, 2}),
                     c.Out(keep ? Shape{1, 1, 1, 4} : Shape{1, 4}), keep);
    out->push_back(c.Done(std::string("over H,W ") + (keep ? "keep_dims" : "[1,5,6,4]->[1,4]")));
  }
  {
    Case c("MEAN", seed++);
    c.b().AddReducer(Op::MEAN, c.In({1, 3, 3, 4}), c.Ints({1}, {3}), c.Out({1, 3, 3}), false);
    out->push_back(c.Done("over C (not H,W)"));
  }
  {
    Case c("RESHAPE", seed++);
    c.b().AddReshape(c.In({1, 2, 3, 4}), c.Out({1, 24}), {1, 24});
    out->push_back(c.Done("[1,2,3,4]->[1,24]"));
  }
  {
    Case c("PAD", seed++);
    const int pads = c.Ints({4, 2}, {0, 0, 1, 2, 2, 1, 0, 0});
    c.b().AddPad(c.In({1, 3, 3, 2}), pads, c.Out({1, 6, 6, 2}));
    out->push_back(c.Done("[1,3,3,2] by (1,2),(2,1)"));
  }
  struct R {
    std::string detail;
    Shape in, out;
    bool align, half;
  };
  const R resizes[] = {
      {"half_pixel_centers [1,4,4,3]->[1,8,8,3]", {1, 4, 4, 3}, {1, 8, 8, 3}, false, true},
      {"legacy [1,3,3,2]->[1,5,7,2]", {1, 3, 3, 2}, {1, 5, 7, 2}, false, false},
      {"align_corners [1,3,4,2]->[1,6,7,2]", {1, 3, 4, 2}, {1, 6, 7, 2}, true, false},
  };
  for (const R& v : resizes) {
    Case c("RESIZE_BILINEAR", seed++);
    const int size = c.Ints({2}, {v.out[1], v.out[2]});
    c.b().AddResize(Op::RESIZE_BILINEAR, c.In(v.in), size, c.Out(v.out), v.align, v.half);
    out->push_back(c.Done(v.detail));
  }
  {
    Case c("DEPTH_TO_SPACE", seed++);
    c.b().AddBlockOp(Op::DEPTH_TO_SPACE, c.In({1, 2, 3, 8}), c.Out({1, 4, 6, 2}), 2);
    out->push_back(c.Done("block 2 [1,2,3,8]->[1,4,6,2]"));
  }
  {
    Case c("CONCATENATION", seed++);
    const int a = c.In({1, 2, 2, 3});
    const int d = c.In({1, 2, 2, 2});
    c.b().AddConcatenation({a, d}, c.Out({1, 2, 2, 5}), 3);
    out->push_back(c.Done("axis 3"));
  }
  {  // blocks of the output, with a fused activation
    Case c("CONCATENATION", seed++);
    const int a = c.In({1, 5, 4});
    const int d = c.In({1, 3, 4});
    const int e = c.In({1, 1, 4});
    c.b().AddConcatenation({a, d, e}, c.Out({1, 9, 4}), -2, Act::RELU6);
    out->push_back(c.Done("axis -2 [1,5,4]+[1,3,4]+[1,1,4] RELU6", -2, 8));
  }
  {  // of computed tensors, read again by a later node in the same partition
    Case c("CONCATENATION", seed++);
    const int x = c.In({1, 2, 3});
    const int y = c.In({1, 4, 3});
    const int x2 = c.b().AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3});
    const int y2 = c.b().AddTensor(tfl::TensorType::FLOAT32, {1, 4, 3});
    const int cat = c.b().AddTensor(tfl::TensorType::FLOAT32, {1, 6, 3});
    c.b().AddUnary(Op::ABS, x, x2);
    c.b().AddUnary(Op::NEG, y, y2);
    c.b().AddConcatenation({x2, y2}, cat, 1);
    c.b().AddBinary(Op::ADD, cat, cat, c.Out({1, 6, 3}));
    out->push_back(c.Done("axis 1 between ABS/NEG and ADD"));
  }
}

// Quantized cases: float inputs in [-1, 1] QUANTIZEd (int8 scale 1/128 zero
// point 0; uint8 scale 1/127.5 zero point 128), the op on quantized tensors,
// its output DEQUANTIZEd. Output scales are chosen to hold the op's range.
void AddQuantizedCases(std::vector<ConformanceCase>* out) {
  using T = tfl::TensorType;
  constexpr T kI8 = T::INT8, kU8 = T::UINT8;
  constexpr float kS8 = 1.0f / 128, kSu8 = 1.0f / 127.5f;
  uint32_t seed = 500;
  auto in_scale = [&](T t) { return t == kI8 ? kS8 : kSu8; };
  auto in_zp = [&](T t) { return t == kI8 ? int64_t{0} : int64_t{128}; };
  auto type_name = [](T t) { return std::string(t == kI8 ? "int8" : "uint8"); };
  for (Op op : {Op::ADD, Op::SUB}) {
    for (T t : {kI8, kU8}) {
      Case c(Name(op), seed++);
      const int a = c.QIn({1, 4, 4, 3}, t, in_scale(t), in_zp(t));
      const int d = c.QIn({1, 4, 4, 3}, t, in_scale(t), in_zp(t));
      c.b().AddBinary(op, a, d, c.QOut({1, 4, 4, 3}, t, 2.0f / 128, t == kI8 ? 3 : 130),
                      t == kI8 ? Act::NONE : Act::RELU);
      out->push_back(c.Done(type_name(t) + " [1,4,4,3] x [1,4,4,3]" + (t == kI8 ? "" : " RELU")));
    }
  }
  {  // a per-channel constant broadcast
    Case c("MUL", seed++);
    const int a = c.QIn({1, 3, 5, 4}, kI8, kS8, 0);
    const int k = c.b().AddConstRaw(T::INT8, {4}, {64, 200, 127, 32});  // int8 64, -56, 127, 32
    c.b().SetQuantization(k, 1.0f / 64, 0);
    c.b().AddBinary(Op::MUL, a, k, c.QOut({1, 3, 5, 4}, kI8, 2.0f / 128, 0));
    out->push_back(c.Done("int8 [1,3,5,4] x const [4]"));
  }
  struct Conv {
    std::string detail;
    T type;
    bool per_channel, bias;
    Shape in, filter, out;
    testing::Conv2DParams p;
  };
  const Conv convs[] = {
      {"int8 per-channel 3x3 SAME s2 RELU6 [1,8,8,3]->[1,4,4,4]",
       kI8,
       true,
       true,
       {1, 8, 8, 3},
       {4, 3, 3, 3},
       {1, 4, 4, 4},
       {tfl::Padding::SAME, 2, 2, 1, 1, Act::RELU6}},
      {"int8 per-tensor 1x1 no bias [1,5,5,8]->[1,5,5,6]",
       kI8,
       false,
       false,
       {1, 5, 5, 8},
       {6, 1, 1, 8},
       {1, 5, 5, 6},
       {}},
      {"int8 per-channel grouped 4 3x3 SAME [1,6,6,8]->[1,6,6,8]",
       kI8,
       true,
       true,
       {1, 6, 6, 8},
       {8, 3, 3, 2},
       {1, 6, 6, 8},
       {tfl::Padding::SAME, 1, 1, 1, 1, Act::NONE}},
      {"uint8 3x3 VALID [1,6,6,3]->[1,4,4,5]",
       kU8,
       false,
       true,
       {1, 6, 6, 3},
       {5, 3, 3, 3},
       {1, 4, 4, 5},
       {}},
  };
  for (const Conv& v : convs) {
    Case c("CONV_2D", seed++);
    const int in = c.QIn(v.in, v.type, in_scale(v.type), in_zp(v.type));
    std::vector<float> ws;
    const int f = c.QWeights(v.filter, v.type, v.per_channel ? 0 : -1, &ws);
    const int b = v.bias ? c.QBias(v.filter[0], in_scale(v.type), ws) : -1;
    c.b().AddConv2D(in, f, b, c.QOut(v.out, v.type, 0.05f, v.type == kI8 ? -2 : 125), v.p);
    out->push_back(c.Done(v.detail));
  }
  struct Dw {
    std::string detail;
    T type;
    bool per_channel;
    Shape in, filter, out;
    testing::DepthwiseConv2DParams p;
  };
  const Dw dws[] = {
      {"int8 per-channel 3x3 SAME [1,6,6,4]",
       kI8,
       true,
       {1, 6, 6, 4},
       {1, 3, 3, 4},
       {1, 6, 6, 4},
       {tfl::Padding::SAME, 1, 1, 1, 1, 1, Act::NONE}},
      {"uint8 3x3 VALID multiplier 2 [1,6,6,2]->[1,4,4,4]",
       kU8,
       false,
       {1, 6, 6, 2},
       {1, 3, 3, 4},
       {1, 4, 4, 4},
       {tfl::Padding::VALID, 1, 1, 2, 1, 1, Act::RELU}},
  };
  for (const Dw& v : dws) {
    Case c("DEPTHWISE_CONV_2D", seed++);
    const int in = c.QIn(v.in, v.type, in_scale(v.type), in_zp(v.type));
    std::vector<float> ws;
    const int f = c.QWeights(v.filter, v.type, v.per_channel ? 3 : -1, &ws);
    const int b = c.QBias(v.filter[3], in_scale(v.type), ws);
    c.b().AddDepthwiseConv2D(in, f, b, c.QOut(v.out, v.type, 0.02f, v.type == kI8 ? 1 : 128), v.p);
    out->push_back(c.Done(v.detail));
  }
  for (bool per_channel : {false, true}) {  // xnnpack has per-tensor deconvolution only
    Case c("TRANSPOSE_CONV", seed++);
    const int shape = c.Ints({4}, {1, 8, 8, 3});
    std::vector<float> ws;
    const int f = c.QWeights({3, 3, 3, 2}, kI8, per_channel ? 0 : -1, &ws);
    const int in = c.QIn({1, 4, 4, 2}, kI8, kS8, 0);
    c.b().AddTransposeConv(shape, f, in, c.QBias(3, kS8, ws), c.QOut({1, 8, 8, 3}, kI8, 0.02f, 0),
                           {tfl::Padding::SAME, 2, 2, Act::NONE});
    out->push_back(c.Done(std::string("int8 ") + (per_channel ? "per-channel" : "per-tensor") +
                          " 3x3 SAME s2 [1,4,4,2]->[1,8,8,3]"));
  }
  struct Fc {
    std::string detail;
    T type;
    bool per_channel;
    Shape in, w, out;
    Act act;
  };
  const Fc fcs[] = {
      {"int8 per-tensor [2,8] x [4,8]", kI8, false, {2, 8}, {4, 8}, {2, 4}, Act::NONE},
      {"uint8 [1,16] x [5,16] RELU", kU8, false, {1, 16}, {5, 16}, {1, 5}, Act::RELU},
      {"int8 per-channel [2,8] x [4,8]", kI8, true, {2, 8}, {4, 8}, {2, 4}, Act::NONE},
  };
  for (const Fc& v : fcs) {
    Case c("FULLY_CONNECTED", seed++);
    const int in = c.QIn(v.in, v.type, in_scale(v.type), in_zp(v.type));
    std::vector<float> ws;
    const int w = c.QWeights(v.w, v.type, v.per_channel ? 0 : -1, &ws);
    c.b().AddFullyConnected(in, w, c.QBias(v.w[0], in_scale(v.type), ws),
                            c.QOut(v.out, v.type, 0.03f, v.type == kI8 ? 0 : 128), v.act);
    out->push_back(c.Done(v.detail));
  }
  for (Op op : {Op::MAX_POOL_2D, Op::AVERAGE_POOL_2D}) {  // xnnpack: max pooling only
    Case c(Name(op), seed++);
    const int in = c.QIn({1, 6, 6, 3}, kI8, kS8, 0);
    c.b().AddPool2D(op, in, c.QOut({1, 3, 3, 3}, kI8, kS8, 0),
                    {tfl::Padding::VALID, 2, 2, 2, 2, Act::NONE});
    out->push_back(c.Done("int8 2x2 VALID s2 [1,6,6,3]"));
  }
  for (T t : {kI8, kU8}) {
    Case c("MEAN", seed++);
    const int in = c.QIn({1, 5, 6, 4}, t, in_scale(t), in_zp(t));
    const bool keep = t == kI8;
    c.b().AddReducer(Op::MEAN, in, c.Ints({2}, {1, 2}),
                     c.QOut(keep ? Shape{1, 1, 1, 4} : Shape{1, 4}, t, in_scale(t) / 2, in_zp(t)),
                     keep);
    out->push_back(c.Done(type_name(t) + " over H,W " + (keep ? "keep_dims" : "[1,5,6,4]->[1,4]")));
  }
  for (T t : {kI8, kU8}) {
    Case c("LOGISTIC", seed++);
    const int in = c.QIn({1, 5, 7, 3}, t, in_scale(t), in_zp(t));
    c.b().AddUnary(Op::LOGISTIC, in, c.QOut({1, 5, 7, 3}, t, 1.0f / 256, t == kI8 ? -128 : 0));
    out->push_back(c.Done(type_name(t) + " [1,5,7,3]"));
  }
  {  // same quantization in and out (xnnpack's clamp), then different (refused)
    Case c("RELU6", seed++);
    const int in = c.QIn({1, 5, 7, 3}, kI8, 0.05f, -68);
    c.b().AddUnary(Op::RELU6, in, c.QOut({1, 5, 7, 3}, kI8, 0.05f, -68));
    out->push_back(c.Done("int8 [1,5,7,3]", -3, 9));
    Case d("RELU", seed++);
    const int x = d.QIn({1, 5, 7, 3}, kI8, kS8, 0);
    d.b().AddUnary(Op::RELU, x, d.QOut({1, 5, 7, 3}, kI8, 1.0f / 255, -128));
    out->push_back(d.Done("int8 output rescaled [1,5,7,3]"));
  }
  {
    Case c("PAD", seed++);
    const int pads = c.Ints({4, 2}, {0, 0, 1, 2, 2, 1, 0, 0});
    c.b().AddPad(c.QIn({1, 3, 3, 2}, kI8, kS8, 5), pads, c.QOut({1, 6, 6, 2}, kI8, kS8, 5));
    out->push_back(c.Done("int8 zero point 5 [1,3,3,2] by (1,2),(2,1)"));
  }
  {
    Case c("RESHAPE", seed++);
    c.b().AddReshape(c.QIn({1, 2, 3, 4}, kU8, kSu8, 128), c.QOut({1, 24}, kU8, kSu8, 128), {1, 24});
    out->push_back(c.Done("uint8 [1,2,3,4]->[1,24]"));
  }
  {
    Case c("RESIZE_BILINEAR", seed++);
    const int size = c.Ints({2}, {8, 8});
    c.b().AddResize(Op::RESIZE_BILINEAR, c.QIn({1, 4, 4, 3}, kI8, kS8, 0), size,
                    c.QOut({1, 8, 8, 3}, kI8, kS8, 0), false, true);
    out->push_back(c.Done("int8 half_pixel_centers [1,4,4,3]->[1,8,8,3]"));
  }
  {
    Case c("CONCATENATION", seed++);
    const int a = c.QIn({1, 5, 4}, kI8, kS8, 0);
    const int d = c.QIn({1, 3, 4}, kI8, kS8, 0);
    c.b().AddConcatenation({a, d}, c.QOut({1, 8, 4}, kI8, kS8, 0), -2);
    out->push_back(c.Done("int8 axis -2 [1,5,4]+[1,3,4]"));
  }
  for (const char* op : {"QUANTIZE", "DEQUANTIZE"}) {  // float -> QUANTIZE -> DEQUANTIZE -> float
    Case c(op, seed++);
    const int q = c.QIn({1, 4, 4, 3}, kU8, 1.0f / 100, 100);
    const int y = c.QOut({1, 4, 4, 3}, kU8, 1.0f / 100, 100);
    c.b().AddReshape(q, y, {1, 4, 4, 3});
    out->push_back(c.Done("uint8 [1,4,4,3] (around a RESHAPE)"));
  }
}

}  // namespace

std::vector<ConformanceCase> Catalog() {
  std::vector<ConformanceCase> cases;
  AddBinaryCases(&cases);
  AddUnaryCases(&cases);
  AddConvCases(&cases);
  AddOtherCases(&cases);
  AddQuantizedCases(&cases);
  return cases;
}

std::vector<PartitionCase> PartitionCatalog() {
  std::vector<PartitionCase> cases;
  // x -> ADD -> EXP -> ADD -> EXP -> ADD -> out: each ADD is cut off from
  // the next by an EXP, so 3 partitions of 1 node. The later ADDs add x (not
  // their input twice), which keeps the values inside float16's range.
  {
    ModelBuilder b;
    const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "x");
    int t = x;
    b.SetInputs({x});
    for (int i = 0; i < 5; ++i) {
      const int next = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
      if (i % 2 == 0) {
        b.AddAdd(t, i == 0 ? t : x, next);
      } else {
        b.AddUnary(Op::EXP, t, next);
      }
      t = next;
    }
    b.SetOutputs({t});
    cases.push_back({"ADD EXP ADD EXP ADD", b.Build(), 3, 3});
  }
  // x -> ADD -> ADD -> EXP -> ADD -> ADD -> out, and a side branch
  // ADD(x, x) read only by the last ADD: it has no path through the EXP, so
  // it joins the first partition: {ADD, ADD, ADD(x,x)} and {ADD, ADD}.
  {
    ModelBuilder b;
    const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "x");
    const int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
    const int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
    const int t3 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
    const int side = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
    const int t4 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
    const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
    b.AddAdd(x, x, t1);
    b.AddAdd(t1, t1, t2);
    b.AddUnary(Op::EXP, t2, t3);
    b.AddAdd(x, x, side);
    b.AddAdd(t3, t3, t4);
    b.AddAdd(t4, side, out);
    b.SetInputs({x});
    b.SetOutputs({out});
    cases.push_back({"ADD ADD EXP ADD ADD + side ADD", b.Build(), 2, 5});
  }
  return cases;
}

}  // namespace dfarm::conformance
