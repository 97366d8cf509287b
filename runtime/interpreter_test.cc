#include "runtime/interpreter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "runtime/kernels/gemm.h"
#include "tests/model_builder/graph_runner.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::runtime {
namespace {

using ::testing::ElementsAre;
using testing::GraphRunner;
using ::testing::HasSubstr;
using testing::ModelBuilder;
namespace tfl = ::dfarm::tflite;

// input -> RELU -> RELU6 -> RELU -> RELU6 -> output, each [1,8,8,4] float32.
ModelBuilder ChainModel(int length) {
  ModelBuilder b;
  int prev = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 4}, "input");
  b.SetInputs({prev});
  for (int i = 0; i < length; ++i) {
    int next = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 4},
                           std::string("t").append(std::to_string(i)));
    b.AddUnary(i % 2 == 0 ? tfl::BuiltinOperator::RELU : tfl::BuiltinOperator::RELU6, prev, next);
    prev = next;
  }
  b.SetOutputs({prev});
  return b;
}

TEST(InterpreterTest, ChainArenaIsSmallerThanTheSumOfTensors) {
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(ChainModel(6)).ok());
  const Interpreter& interpreter = runner.interpreter();
  size_t sum = 0;
  for (size_t t = 0; t < interpreter.tensors_size(); ++t) sum += interpreter.tensor(t).bytes;
  EXPECT_EQ(sum, 7u * 1024u);
  // The input and output live throughout; the intermediates share one more slot pair.
  EXPECT_LT(interpreter.arena_bytes(), sum);
  EXPECT_LE(interpreter.arena_bytes(), 4u * 1024u);
  for (size_t t = 0; t < interpreter.tensors_size(); ++t) {
    EXPECT_EQ(interpreter.tensor(t).allocation, Allocation::kArena);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(interpreter.tensor(t).data) % 64, 0u);
  }
}

TEST(InterpreterTest, InvokeTwiceGivesTheSameResult) {
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(ChainModel(4)).ok());
  std::vector<float> input(256);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-10, 10);
  for (float& v : input) v = dist(rng);
  ASSERT_TRUE(runner.SetInput(0, input));
  ASSERT_TRUE(runner.Invoke().ok());
  std::vector<float> first = runner.Output(0);
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_EQ(runner.Output(0), first);
  for (size_t i = 0; i < input.size(); ++i) {
    EXPECT_EQ(first[i], std::clamp(input[i], 0.0f, 6.0f));
  }
}

// input -> +1 -> +1 -> +1 -> +1 -> output: no op here is idempotent, so an
// arena slot that reused the input's memory would change the next Invoke().
TEST(InterpreterTest, GraphInputsSurviveInvokeAndRepeatedInvokesAgree) {
  ModelBuilder b;
  int prev = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 4}, "input");
  b.SetInputs({prev});
  const int one = b.AddConstFloat32({1}, {1.0f}, "one");
  for (int i = 0; i < 4; ++i) {
    int next = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 4},
                           std::string("t").append(std::to_string(i)));
    b.AddAdd(prev, one, next);
    prev = next;
  }
  b.SetOutputs({prev});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  std::vector<float> input(256);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i) * 0.5f - 20.0f;
  ASSERT_TRUE(runner.SetInput(0, input));
  const Tensor* in = runner.interpreter().inputs()[0];
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE(runner.Invoke().ok());
    std::vector<float> out = runner.Output(0);
    ASSERT_EQ(out.size(), input.size());
    for (size_t i = 0; i < input.size(); ++i) ASSERT_EQ(out[i], input[i] + 4.0f) << "run " << run;
    EXPECT_EQ(std::memcmp(in->data, input.data(), input.size() * sizeof(float)), 0);
  }
}

TEST(InterpreterTest, FoldsConstantSubgraphs) {
  // fp16 weights -> DEQUANTIZE -> ADD(input, weights): only ADD runs in Invoke().
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2}, "in");
  int w16 = b.AddConstFloat16({2}, {0.25f, -4.0f}, "w");
  int w = b.AddTensor(tfl::TensorType::FLOAT32, {2}, "w_dequantize");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2}, "out");
  b.AddDequantize(w16, w);
  b.AddAdd(in, w, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(b).ok());
  const Interpreter& interpreter = runner.interpreter();
  EXPECT_EQ(interpreter.nodes_size(), 2u);
  EXPECT_EQ(interpreter.invoked_nodes_size(), 1u);
  EXPECT_EQ(interpreter.node(0).op_name, "DEQUANTIZE");
  EXPECT_TRUE(interpreter.node(0).folded);
  EXPECT_EQ(interpreter.node(1).op_name, "ADD");
  EXPECT_EQ(interpreter.tensor(w).allocation, Allocation::kFolded);
  EXPECT_EQ(interpreter.tensor(w16).allocation, Allocation::kConstant);
  EXPECT_EQ(interpreter.persistent_bytes(), 64u);
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 1}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(1.25f, -3.0f));
}

// Loads `b`'s model with every reference kernel (CONV_2D's replaced by
// `conv` when given) and `options`; null when it does not load.
struct Loaded {
  std::unique_ptr<Model> model;
  OpResolver resolver;
  std::unique_ptr<Interpreter> interpreter;
};
std::unique_ptr<Loaded> Load(const ModelBuilder& b, const InterpreterOptions& options,
                             const OpRegistration* conv = nullptr) {
  auto loaded = std::make_unique<Loaded>();
  if (!Model::FromBuffer("fold.tflite", b.Build(), &loaded->model).ok()) return nullptr;
  loaded->resolver.AddAllReferenceOps();
  if (conv != nullptr) loaded->resolver.AddBuiltin(tfl::BuiltinOperator::CONV_2D, conv);
  loaded->interpreter = std::make_unique<Interpreter>(*loaded->model, loaded->resolver, options);
  if (!loaded->interpreter->AllocateTensors().ok()) return nullptr;
  return loaded;
}

// Loads `b` with `with` (*folded) and with `without` (*plain), CONV_2D's
// kernel `conv` (null: the default) in both; both must load.
void LoadBoth(const ModelBuilder& b, const InterpreterOptions& with,
              const InterpreterOptions& without, const OpRegistration* conv,
              std::unique_ptr<Loaded>* folded, std::unique_ptr<Loaded>* plain) {
  *folded = Load(b, with, conv);
  *plain = Load(b, without, conv);
  ASSERT_NE(*folded, nullptr);
  ASSERT_NE(*plain, nullptr);
}

// Loads `b` folding activations, pads and ADDs (*folded) and none of them
// (*plain); both must load.
void LoadBoth(const ModelBuilder& b, std::unique_ptr<Loaded>* folded,
              std::unique_ptr<Loaded>* plain) {
  InterpreterOptions none;
  none.fold_activations = none.fold_pads = none.fold_adds = none.fuse_rows = false;
  LoadBoth(b, InterpreterOptions{}, none, nullptr, folded, plain);
}

// Loads `b` on `threads` threads with the default options (*on) and with
// `turn_off` applied to them (*off); both must load.
void LoadOnAndOff(const ModelBuilder& b, int threads, void (*turn_off)(InterpreterOptions&),
                  const OpRegistration* conv, std::unique_ptr<Loaded>* on,
                  std::unique_ptr<Loaded>* off) {
  InterpreterOptions with;
  with.num_threads = threads;
  InterpreterOptions without = with;
  turn_off(without);
  LoadBoth(b, with, without, conv, on, off);
}

// A constant float tensor of `shape` with values drawn from [-0.5, 0.5).
int RandomConst(ModelBuilder& b, std::mt19937& rng, const std::vector<int32_t>& shape) {
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  size_t n = 1;
  for (int32_t d : shape) n *= static_cast<size_t>(d);
  std::vector<float> w(n);
  for (float& x : w) x = dist(rng);
  return b.AddConstFloat32(shape, w);
}

// Runs both interpreters on the same input (values spread over [-8, 8], so
// every clamp bites) and expects every output to be bit-identical (or, with
// `zero_sign_may_differ`, equal as floats: +0 == -0).
void ExpectSameOutputs(Interpreter& folded, Interpreter& plain, bool zero_sign_may_differ = false) {
  ASSERT_EQ(folded.inputs().size(), plain.inputs().size());
  for (size_t i = 0; i < folded.inputs().size(); ++i) {
    Tensor* a = folded.inputs()[i];
    Tensor* b = plain.inputs()[i];
    ASSERT_EQ(a->bytes, b->bytes);
    float* values = reinterpret_cast<float*>(a->data);
    for (size_t k = 0; k < a->bytes / sizeof(float); ++k) {
      values[k] = static_cast<float>((k * 37) % 161) * 0.1f - 8.0f;
    }
    std::memcpy(b->data, a->data, a->bytes);
  }
  ASSERT_TRUE(folded.Invoke().ok());
  ASSERT_TRUE(plain.Invoke().ok());
  for (size_t i = 0; i < folded.outputs().size(); ++i) {
    const Tensor* a = folded.outputs()[i];
    const Tensor* b = plain.outputs()[i];
    ASSERT_EQ(a->bytes, b->bytes);
    if (!zero_sign_may_differ) {
      EXPECT_EQ(std::memcmp(a->data, b->data, a->bytes), 0) << "output " << i;
      continue;
    }
    for (size_t k = 0; k < a->bytes / sizeof(float); ++k) {
      ASSERT_EQ(a->data_as<float>()[k], b->data_as<float>()[k]) << "output " << i << " at " << k;
    }
  }
}

// in -> CONV_2D -> RELU6 -> ADD(., c) -> RELU -> DEPTHWISE -> RELU_N1_TO_1 -> out:
// each activation is its input's only reader, so all three fold.
TEST(InterpreterTest, FoldsActivationsIntoTheNodeBeforeThemBitForBit) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 3}, "in");
  std::vector<float> w(4 * 3 * 3 * 3);
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(k % 7) * 0.3f - 0.9f;
  int filter = b.AddConstFloat32({4, 3, 3, 3}, w, "filter");
  int bias = b.AddConstFloat32({4}, {0.5f, -0.5f, 1.0f, 0.0f}, "bias");
  int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "conv");
  testing::Conv2DParams conv_params;
  conv_params.padding = tfl::Padding::SAME;
  b.AddConv2D(in, filter, bias, conv, conv_params);
  int relu6 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "relu6");
  b.AddUnary(tfl::BuiltinOperator::RELU6, conv, relu6);
  int c = b.AddConstFloat32({4}, {-3.0f, 1.0f, -1.0f, 0.25f}, "c");
  int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "sum");
  b.AddAdd(relu6, c, sum);
  int relu = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "relu");
  b.AddUnary(tfl::BuiltinOperator::RELU, sum, relu);
  int dw_filter = b.AddConstFloat32({1, 3, 3, 4}, std::vector<float>(36, -0.2f), "dw_filter");
  int dw = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "dw");
  testing::DepthwiseConv2DParams dw_params;
  dw_params.padding = tfl::Padding::SAME;
  b.AddDepthwiseConv2D(relu, dw_filter, -1, dw, dw_params);
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "out");
  b.AddUnary(tfl::BuiltinOperator::RELU_N1_TO_1, dw, out);
  b.SetInputs({in});
  b.SetOutputs({out});

  std::unique_ptr<Loaded> folded, plain;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(b, &folded, &plain));
  const Interpreter& it = *folded->interpreter;
  EXPECT_EQ(plain->interpreter->invoked_nodes_size(), 6u);
  EXPECT_EQ(it.invoked_nodes_size(), 3u);
  using Act = tfl::ActivationFunctionType;
  EXPECT_EQ(it.node(0).folded_activation, Act::RELU6);
  EXPECT_EQ(it.node(1).folded_into, 0);
  EXPECT_EQ(it.node(2).folded_activation, Act::RELU);
  EXPECT_EQ(it.node(3).folded_into, 2);
  EXPECT_EQ(it.node(4).folded_activation, Act::RELU_N1_TO_1);
  EXPECT_EQ(it.node(5).folded_into, 4);
  EXPECT_EQ(it.node(0).outputs[0]->index, relu6);
  for (size_t i = 0; i < plain->interpreter->nodes_size(); ++i) {
    EXPECT_EQ(plain->interpreter->node(i).folded_into, -1);
    EXPECT_EQ(plain->interpreter->node(i).folded_activation, Act::NONE);
  }
  ExpectSameOutputs(*folded->interpreter, *plain->interpreter);
  ExpectSameOutputs(*folded->interpreter, *plain->interpreter);  // and again
}

// An activation stays a node of its own when its input has another reader,
// is a model output, or comes from a node that already has an activation
// or whose kernel does not apply one (here MAX_POOL_2D).
// Random float16 weights of `shape` and their DEQUANTIZE (folded at
// AllocateTensors()): the float32 tensor's index.
int HalfWeights(ModelBuilder& b, std::mt19937& rng, const std::vector<int32_t>& shape,
                const std::string& name) {
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  size_t n = 1;
  for (int32_t d : shape) n *= static_cast<size_t>(d);
  std::vector<float> w(n);
  for (float& x : w) x = dist(rng);
  const int half = b.AddConstFloat16(shape, w, name + "_fp16");
  const int weights = b.AddTensor(tfl::TensorType::FLOAT32, shape, name);
  b.AddDequantize(half, weights);
  return weights;
}

// Whether this CPU's GEMM packs a constant filter (else CONV_2D reads its
// weights as they are and keeps none).
bool GemmPacksConstantB() {
  Gemm probe;
  probe.Plan(36, 16, 8);
  const std::vector<float> b(16 * 8);
  probe.SetConstantB({b.data(), 8, true});
  return probe.has_constant_b();
}

// Float16 weights dequantized once are freed as soon as only packed
// CONV_2Ds read them, even where a conv is prepared again for the RELU or
// ADD folded into it; a DEPTHWISE_CONV_2D's (read as they are) and a model
// output's stay. The same bits as keeping them all.
TEST(InterpreterTest, FreesFoldedWeightsOnlyPackedConvsRead) {
  ModelBuilder b;
  std::mt19937 rng(7);
  auto tensor = [&](int channels, const char* name) {
    return b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, channels}, name);
  };
  const int in = tensor(8, "in");
  const int shared = HalfWeights(b, rng, {16, 1, 1, 8}, "shared");  // read by convs A and B
  const int dw = HalfWeights(b, rng, {1, 3, 3, 16}, "dw");
  const int exposed = HalfWeights(b, rng, {8, 3, 3, 16}, "exposed");  // also a model output
  const int c0 = tensor(16, "c0"), r0 = tensor(16, "r0"), d0 = tensor(16, "d0");
  const int c1 = tensor(16, "c1"), s = tensor(16, "s"), out = tensor(8, "out");
  b.AddConv2D(in, shared, -1, c0, testing::Conv2DParams{});  // A
  b.AddUnary(tfl::BuiltinOperator::RELU, c0, r0);            // into A
  testing::DepthwiseConv2DParams same_dw;
  same_dw.padding = tfl::Padding::SAME;
  b.AddDepthwiseConv2D(r0, dw, -1, d0, same_dw);
  b.AddConv2D(in, shared, -1, c1, testing::Conv2DParams{});  // B
  b.AddAdd(d0, c1, s);                                       // into B
  testing::Conv2DParams same;
  same.padding = tfl::Padding::SAME;
  b.AddConv2D(s, exposed, -1, out, same);
  b.SetInputs({in});
  b.SetOutputs({out, exposed});

  const bool packs = GemmPacksConstantB();
  const size_t kept_bytes = 16 * 9 * 4 + 8 * 9 * 16 * 4;  // dw and exposed
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    InterpreterOptions freeing, keeping;
    freeing.num_threads = keeping.num_threads = threads;
    keeping.free_kept_folded = false;
    std::unique_ptr<Loaded> freed_model, kept_model;
    ASSERT_NO_FATAL_FAILURE(LoadBoth(b, freeing, keeping, nullptr, &freed_model, &kept_model));
    Interpreter& freed = *freed_model->interpreter;
    Interpreter& kept = *kept_model->interpreter;
    EXPECT_EQ(freed.invoked_nodes_size(), 4u);  // A, depthwise, B, the last conv
    EXPECT_EQ(freed.node(4).folded_into, 3);    // the RELU, into A
    EXPECT_EQ(freed.node(7).folded_into, 6);    // the ADD, into B
    EXPECT_EQ(kept.persistent_bytes(), kept_bytes + 16 * 8 * 4);
    EXPECT_NE(kept.tensor(shared).data, nullptr);
    EXPECT_EQ(freed.tensor(shared).allocation, Allocation::kFolded);
    EXPECT_EQ(freed.tensor(shared).data == nullptr, packs);
    EXPECT_EQ(freed.persistent_bytes(), packs ? kept_bytes : kept_bytes + 16 * 8 * 4);
    EXPECT_NE(freed.tensor(dw).data, nullptr);
    EXPECT_NE(freed.tensor(exposed).data, nullptr);
    ExpectSameOutputs(freed, kept);
    ExpectSameOutputs(freed, kept);  // and again
  }
}

TEST(InterpreterTest, ActivationsThatCannotFoldStayNodes) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "in");
  int c = b.AddConstFloat32({2}, {1.0f, -2.0f}, "c");
  int shared = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "shared");
  b.AddAdd(in, c, shared);  // node 0
  int r0 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "r0");
  b.AddUnary(tfl::BuiltinOperator::RELU, shared, r0);  // 1: shared has two readers
  int both = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "both");
  b.AddAdd(shared, r0, both);  // 2
  int visible = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "visible");
  b.AddAdd(both, c, visible);  // 3
  int r1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "r1");
  b.AddUnary(tfl::BuiltinOperator::RELU6, visible, r1);  // 4: visible is an output
  int fused = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "fused");
  b.AddAdd(r1, c, fused, tfl::ActivationFunctionType::RELU_N1_TO_1);  // 5
  int r2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "r2");
  b.AddUnary(tfl::BuiltinOperator::RELU6, fused, r2);  // 6: ADD has its own
  int pooled = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2}, "pooled");
  testing::Pool2DParams pool;
  pool.filter_h = pool.filter_w = pool.stride_h = pool.stride_w = 2;
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, r2, pooled, pool);  // 7
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2}, "out");
  b.AddUnary(tfl::BuiltinOperator::RELU, pooled, out);  // 8: pooling applies none
  b.SetInputs({in});
  b.SetOutputs({visible, out});

  std::unique_ptr<Loaded> folded, plain;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(b, &folded, &plain));
  const Interpreter& it = *folded->interpreter;
  EXPECT_EQ(it.invoked_nodes_size(), it.nodes_size());
  for (size_t i = 0; i < it.nodes_size(); ++i) {
    EXPECT_EQ(it.node(i).folded_into, -1) << "node " << i;
    EXPECT_EQ(it.node(i).folded_activation, tfl::ActivationFunctionType::NONE) << "node " << i;
  }
  ExpectSameOutputs(*folded->interpreter, *plain->interpreter);
}

// in -> PAD(h 1,1 w 1,1) -> DEPTHWISE 3x3 VALID -> PAD(h 0,1 w 0,1) -> CONV
// 3x3 stride 2 VALID -> PAD(h 2,0 w 1,3) -> DEPTHWISE 3x3 stride 2 SAME -> out:
// each PAD's zeros become its conv's padding, and the PADs leave the plan.
TEST(InterpreterTest, FoldsPadsIntoTheConvAfterThem) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 9, 7, 4}, "in");
  auto pad = [&](int x, std::vector<int32_t> amounts, std::vector<int32_t> shape) {
    int paddings = b.AddConstInt32({4, 2}, amounts);
    int out = b.AddTensor(tfl::TensorType::FLOAT32, shape);
    b.AddPad(x, paddings, out);
    return out;
  };
  std::vector<float> w(3 * 3 * 4 * 4);
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(k % 11) * 0.17f - 0.8f;
  int p0 = pad(in, {0, 0, 1, 1, 1, 1, 0, 0}, {2, 11, 9, 4});
  int dw_filter = b.AddConstFloat32({1, 3, 3, 4}, std::vector<float>(w.begin(), w.begin() + 36));
  int dw_bias = b.AddConstFloat32({4}, {0.5f, -0.5f, 0.0f, 1.0f});
  int dw = b.AddTensor(tfl::TensorType::FLOAT32, {2, 9, 7, 4}, "dw");
  b.AddDepthwiseConv2D(p0, dw_filter, dw_bias, dw, testing::DepthwiseConv2DParams{});
  int p1 = pad(dw, {0, 0, 0, 1, 0, 1, 0, 0}, {2, 10, 8, 4});
  int conv_filter = b.AddConstFloat32({4, 3, 3, 4}, w);
  int conv = b.AddTensor(tfl::TensorType::FLOAT32, {2, 4, 3, 4}, "conv");
  testing::Conv2DParams conv_params;
  conv_params.stride_h = conv_params.stride_w = 2;
  b.AddConv2D(p1, conv_filter, -1, conv, conv_params);
  int p2 = pad(conv, {0, 0, 2, 0, 1, 3, 0, 0}, {2, 6, 7, 4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3, 4, 4}, "out");
  testing::DepthwiseConv2DParams same;
  same.padding = tfl::Padding::SAME;
  same.stride_h = same.stride_w = 2;
  b.AddDepthwiseConv2D(p2, dw_filter, -1, out, same);
  b.SetInputs({in});
  b.SetOutputs({out});

  std::unique_ptr<Loaded> folded, plain;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(b, &folded, &plain));
  const Interpreter& it = *folded->interpreter;
  EXPECT_EQ(plain->interpreter->invoked_nodes_size(), 6u);
  EXPECT_EQ(it.invoked_nodes_size(), 3u);
  EXPECT_EQ(it.node(0).folded_into, 1);
  EXPECT_THAT(it.node(1).folded_pad, ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(it.node(1).inputs[0]->index, in);
  EXPECT_EQ(it.node(2).folded_into, 3);
  EXPECT_THAT(it.node(3).folded_pad, ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(it.node(4).folded_into, 5);
  EXPECT_THAT(it.node(5).folded_pad, ElementsAre(2, 0, 1, 3));
  EXPECT_THAT(plain->interpreter->node(5).folded_pad, ElementsAre(0, 0, 0, 0));
  ExpectSameOutputs(*folded->interpreter, *plain->interpreter, /*zero_sign_may_differ=*/true);
}

// BlazeFace's residual blocks: x -> PAD(channels 0,3) -> ADD(conv, .) and
// ADD(., PAD(channels 2,1)): each PAD becomes zeros the ADD adds, either
// side, with its activation folded too; the same bits. The first ADD goes on
// into the conv (fold_adds), its padded input the conv's addend over
// channels [0, 2); the second cannot (the conv has an activation now).
TEST(InterpreterTest, FoldsChannelPadsIntoTheAddAfterThem) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 3, 2}, "in");
  std::vector<float> w(5 * 2);
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(k) * 0.3f - 1.4f;
  int filter = b.AddConstFloat32({5, 1, 1, 2}, w);
  int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 3, 5}, "conv");
  b.AddConv2D(in, filter, -1, conv, testing::Conv2DParams{});  // 0
  int after = b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 0, 3});
  int wide = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 3, 5}, "wide");
  b.AddPad(in, after, wide);  // 1: into ADD 2 as its rhs
  int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 3, 5}, "sum");
  b.AddAdd(conv, wide, sum);  // 2
  int relu = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 3, 5}, "relu");
  b.AddUnary(tfl::BuiltinOperator::RELU, sum, relu);  // 3: into ADD 2
  int both = b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 2, 1});
  int wide2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 3, 5}, "wide2");
  b.AddPad(in, both, wide2);  // 4: into ADD 5 as its lhs
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 5, 3, 5}, "out");
  b.AddAdd(wide2, relu, out);  // 5
  b.SetInputs({in});
  b.SetOutputs({out});

  std::unique_ptr<Loaded> folded, plain;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(b, &folded, &plain));
  const Interpreter& it = *folded->interpreter;
  EXPECT_EQ(it.invoked_nodes_size(), 2u);
  EXPECT_EQ(it.node(1).folded_into, 2);
  EXPECT_THAT(it.node(2).folded_channel_pad, ElementsAre(1, 0, 3));
  EXPECT_EQ(it.node(2).inputs[1]->index, in);
  EXPECT_EQ(it.node(2).folded_into, 0);
  ASSERT_NE(it.node(0).folded_addend, nullptr);
  EXPECT_EQ(it.node(0).folded_addend->index, in);
  EXPECT_THAT(it.node(0).folded_addend_channels, ElementsAre(0, 2));
  EXPECT_EQ(it.node(3).folded_into, 0);
  EXPECT_EQ(it.node(0).folded_activation, tfl::ActivationFunctionType::RELU);
  EXPECT_EQ(it.node(0).outputs[0]->index, relu);
  EXPECT_EQ(it.node(4).folded_into, 5);
  EXPECT_THAT(it.node(5).folded_channel_pad, ElementsAre(0, 2, 1));
  EXPECT_THAT(plain->interpreter->node(2).folded_channel_pad, ElementsAre(-1, 0, 0));
  ExpectSameOutputs(*folded->interpreter, *plain->interpreter);
}

// InterpreterOptions::fuse_rows: a 1x1 conv reading the depthwise conv
// right before it runs inside it, on the rows each task of the depthwise
// conv wrote. A large layer (64x64x24, two bands of 256 KiB even on one
// thread), a conv with a residual ADD folded into it whose addend is the
// graph input, a strided depthwise conv with a RELU6, one whose conv reads
// what a later node writes too (still fused: the conv's other inputs come
// first), and a depthwise conv read by two nodes; the same bits as with
// nothing fused, on 1 and 3 threads, twice in a row.
TEST(InterpreterTest, FusesA1x1ConvIntoTheDepthwiseConvBeforeIt) {
  ModelBuilder b;
  std::mt19937 rng(5);
  auto weights = [&](std::vector<int32_t> shape) { return RandomConst(b, rng, shape); };
  auto tensor = [&](std::vector<int32_t> shape, const char* name) {
    return b.AddTensor(tfl::TensorType::FLOAT32, shape, name);
  };
  testing::DepthwiseConv2DParams same;
  same.padding = tfl::Padding::SAME;
  testing::DepthwiseConv2DParams strided = same;
  strided.stride_h = strided.stride_w = 2;
  strided.activation = tfl::ActivationFunctionType::RELU6;
  const testing::Conv2DParams pointwise;
  int in = tensor({1, 64, 64, 24}, "in");
  int d0 = tensor({1, 64, 64, 24}, "d0");
  b.AddDepthwiseConv2D(in, weights({1, 3, 3, 24}), weights({24}), d0, same);  // 0
  int c0 = tensor({1, 64, 64, 24}, "c0");
  b.AddConv2D(d0, weights({24, 1, 1, 24}), weights({24}), c0, pointwise);  // 1: into 0
  int s0 = tensor({1, 64, 64, 24}, "s0");
  b.AddAdd(c0, in, s0);  // 2: into 1, the graph input its addend
  int d1 = tensor({1, 32, 32, 24}, "d1");
  b.AddDepthwiseConv2D(s0, weights({1, 5, 5, 24}), weights({24}), d1, strided);  // 3
  int c1 = tensor({1, 32, 32, 40}, "c1");
  b.AddConv2D(d1, weights({40, 1, 1, 24}), -1, c1, pointwise);  // 4: into 3
  int d2 = tensor({1, 32, 32, 40}, "d2");
  b.AddDepthwiseConv2D(c1, weights({1, 3, 3, 40}), -1, d2, same);  // 5
  int c2 = tensor({1, 32, 32, 16}, "c2");
  b.AddConv2D(d2, weights({16, 1, 1, 40}), weights({16}), c2, pointwise);  // 6: into 5
  int other = tensor({1, 32, 32, 40}, "other");
  b.AddUnary(tfl::BuiltinOperator::RELU, d2, other);  // 7: reads d2 too
  b.SetInputs({in});
  b.SetOutputs({c2, other});

  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    std::unique_ptr<Loaded> fused_model, plain_model;
    ASSERT_NO_FATAL_FAILURE(LoadOnAndOff(
        b, threads, [](InterpreterOptions& o) { o.fuse_rows = false; }, nullptr, &fused_model,
        &plain_model));
    Interpreter& fused = *fused_model->interpreter;
    Interpreter& plain = *plain_model->interpreter;
    EXPECT_EQ(plain.invoked_nodes_size(), 7u);  // the ADD folds into conv 1
    EXPECT_EQ(fused.invoked_nodes_size(), 4u);
    for (int dw : {0, 3, 5}) {
      ASSERT_NE(fused.node(dw).then, nullptr) << "node " << dw;
      EXPECT_EQ(fused.node(dw).then->index, dw + 1);
      EXPECT_EQ(fused.node(dw + 1).runs_in, dw);
      EXPECT_EQ(plain.node(dw).then, nullptr);
    }
    ExpectSameOutputs(fused, plain);
    ExpectSameOutputs(fused, plain);  // and again
  }
}

// Residual blocks: an ADD goes into the CONV_2D writing one of its inputs
// when the other input is ready before that conv and the conv has no
// activation of its own (it then takes the ADD's, and a RELU after it).
// 1x1 (the input itself), 3x3 grouped (im2col), the conv on either side,
// an addend read through a folded channel pad (channels [3, 15) of 20);
// the same bits as the plain plan, with the GEMM kernels (1 and 3 threads)
// and with the plain-loop reference conv.
TEST(InterpreterTest, FoldsResidualAddsIntoTheConvBeforeThem) {
  ModelBuilder b;
  std::mt19937 rng(3);
  auto weights = [&](std::vector<int32_t> shape) { return RandomConst(b, rng, shape); };
  auto act = [](tfl::ActivationFunctionType a) {
    testing::Conv2DParams p;
    p.activation = a;
    return p;
  };
  using A = tfl::ActivationFunctionType;
  const std::vector<int32_t> shape{1, 7, 5, 20};
  auto tensor = [&](const char* name) {
    return b.AddTensor(tfl::TensorType::FLOAT32, shape, name);
  };
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 7, 5, 12}, "in");
  int res = tensor("res");
  b.AddConv2D(in, weights({20, 1, 1, 12}), weights({20}), res, act(A::RELU));  // 0
  int c1 = tensor("c1");
  testing::Conv2DParams same;
  same.padding = tfl::Padding::SAME;
  b.AddConv2D(res, weights({20, 3, 3, 10}), weights({20}), c1, same);  // 1: 2 groups
  int s1 = tensor("s1");
  b.AddAdd(res, c1, s1);  // 2: into 1, res the addend
  int r1 = tensor("r1");
  b.AddUnary(tfl::BuiltinOperator::RELU, s1, r1);  // 3: into 1
  int c2 = tensor("c2");
  b.AddConv2D(r1, weights({20, 1, 1, 20}), -1, c2, act(A::NONE));  // 4
  int s2 = tensor("s2");
  b.AddAdd(c2, r1, s2, A::RELU6);  // 5: into 4, with its RELU6
  int c3 = tensor("c3");
  b.AddConv2D(s2, weights({20, 1, 1, 20}), weights({20}), c3, act(A::NONE));  // 6
  int late = tensor("late");
  b.AddConv2D(s2, weights({20, 3, 3, 20}), weights({20}), late, same);  // 7
  int s3 = tensor("s3");
  b.AddAdd(c3, late, s3);  // 8: c3 comes first, so into 7 (late), c3 its addend
  int c4 = tensor("c4");
  b.AddConv2D(s3, weights({20, 1, 1, 20}), -1, c4, act(A::RELU));  // 9
  int s4 = tensor("s4");
  b.AddAdd(c4, s3, s4);  // 10: stays (conv 9 has an activation)
  int c5 = tensor("c5");
  b.AddConv2D(s4, weights({20, 1, 1, 20}), -1, c5, act(A::NONE));  // 11
  int wide = tensor("wide");
  b.AddPad(in, b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 3, 5}), wide);  // 12: into 13
  int out = tensor("out");
  b.AddAdd(wide, c5, out);  // 13: into 11, in its addend over channels [3, 15)
  b.SetInputs({in});
  b.SetOutputs({out});

  for (int threads : {1, 3}) {
    for (bool reference : {false, true}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (reference ? " reference" : ""));
      const OpRegistration* conv = reference ? RegisterConv2DReference() : nullptr;
      std::unique_ptr<Loaded> folded_model, plain_model;
      ASSERT_NO_FATAL_FAILURE(LoadOnAndOff(
          b, threads, [](InterpreterOptions& o) { o.fold_adds = false; }, conv, &folded_model,
          &plain_model));
      Interpreter& folded = *folded_model->interpreter;
      Interpreter& plain = *plain_model->interpreter;
      EXPECT_EQ(plain.invoked_nodes_size(), 12u);  // the RELU and the PAD fold
      EXPECT_EQ(folded.invoked_nodes_size(), 8u);
      EXPECT_EQ(folded.node(2).folded_into, 1);
      ASSERT_NE(folded.node(1).folded_addend, nullptr);
      EXPECT_EQ(folded.node(1).folded_addend->index, res);
      EXPECT_THAT(folded.node(1).folded_addend_channels, ElementsAre(0, 20));
      EXPECT_EQ(folded.node(3).folded_into, 1);
      EXPECT_EQ(folded.node(1).folded_activation, A::RELU);
      EXPECT_EQ(folded.node(1).outputs[0]->index, r1);
      EXPECT_EQ(folded.node(5).folded_into, 4);
      EXPECT_EQ(folded.node(4).folded_activation, A::RELU6);
      EXPECT_EQ(folded.node(4).folded_addend->index, r1);
      EXPECT_EQ(folded.node(8).folded_into, 7);
      EXPECT_EQ(folded.node(6).folded_addend, nullptr);
      ASSERT_NE(folded.node(7).folded_addend, nullptr);
      EXPECT_EQ(folded.node(7).folded_addend->index, c3);
      EXPECT_EQ(folded.node(10).folded_into, -1);
      EXPECT_EQ(folded.node(9).folded_addend, nullptr);
      EXPECT_EQ(folded.node(13).folded_into, 11);
      ASSERT_NE(folded.node(11).folded_addend, nullptr);
      EXPECT_EQ(folded.node(11).folded_addend->index, in);
      EXPECT_THAT(folded.node(11).folded_addend_channels, ElementsAre(3, 15));
      EXPECT_EQ(folded.node(11).outputs[0]->index, out);
      for (size_t i = 0; i < plain.nodes_size(); ++i) {
        EXPECT_EQ(plain.node(i).folded_addend, nullptr);
      }
      ExpectSameOutputs(folded, plain);
      ExpectSameOutputs(folded, plain);  // and again
    }
  }
}

// BlazeFace's FPN merge, ADD(RELU(conv), RESIZE_BILINEAR(x)), folds into
// the resize, whose addend (the conv's output) is computed before it; so does
// an ADD with a fused activation (the resize clamps), one of a nearest-
// neighbour resize, one whose addend is read through a channel PAD, and a
// RELU after the resize. The bits equal the separate ops' at 1 and 3 threads.
TEST(InterpreterTest, FoldsAddsIntoTheResizeBeforeThem) {
  ModelBuilder b;
  std::mt19937 rng(5);
  auto weights = [&](std::vector<int32_t> shape) { return RandomConst(b, rng, shape); };
  using A = tfl::ActivationFunctionType;
  using Op = tfl::BuiltinOperator;
  testing::Conv2DParams relu;
  relu.activation = A::RELU;
  const std::vector<int32_t> big{1, 20, 18, 16};
  auto tensor = [&](const char* name, std::vector<int32_t> shape) {
    return b.AddTensor(tfl::TensorType::FLOAT32, shape, name);
  };
  int in = tensor("in", big);
  int small = tensor("small", {1, 10, 9, 16});
  int size = b.AddConstInt32({2}, {20, 18});
  b.AddPool2D(Op::MAX_POOL_2D, in, small, [] {
    testing::Pool2DParams p;
    p.filter_h = p.filter_w = p.stride_h = p.stride_w = 2;
    return p;
  }());  // 0
  int lateral = tensor("lateral", big);
  b.AddConv2D(in, weights({16, 1, 1, 16}), weights({16}), lateral, relu);  // 1
  int up = tensor("up", big);
  b.AddResize(Op::RESIZE_BILINEAR, small, size, up, false, true);  // 2
  int merged = tensor("merged", big);
  b.AddAdd(lateral, up, merged);  // 3: into 2, lateral the addend
  int up2 = tensor("up2", big);
  b.AddResize(Op::RESIZE_NEAREST_NEIGHBOR, small, size, up2, false, false);  // 4
  int merged2 = tensor("merged2", big);
  b.AddAdd(up2, merged, merged2, A::RELU6);  // 5: into 4, which clamps
  int narrow = tensor("narrow", {1, 20, 18, 10});
  b.AddConv2D(merged2, weights({10, 1, 1, 16}), -1, narrow, relu);  // 6
  int wide = tensor("wide", big);
  b.AddPad(narrow, b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 2, 4}), wide);  // 7: into 9
  int up3 = tensor("up3", big);
  b.AddResize(Op::RESIZE_BILINEAR, small, size, up3, true, false);  // 8
  int merged3 = tensor("merged3", big);
  b.AddAdd(wide, up3, merged3);  // 9: into 8, over channels [2, 12)
  int up4 = tensor("up4", big);
  b.AddResize(Op::RESIZE_BILINEAR, small, size, up4, false, false);  // 10
  int r4 = tensor("r4", big);
  b.AddUnary(Op::RELU, up4, r4);  // 11: into 10
  int out = tensor("out", big);
  b.AddAdd(merged3, r4, out);  // 12: stays (10 has an activation)
  b.SetInputs({in});
  b.SetOutputs({out});

  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    std::unique_ptr<Loaded> folded_model, plain_model;
    ASSERT_NO_FATAL_FAILURE(LoadOnAndOff(
        b, threads, [](InterpreterOptions& o) { o.fold_adds = false; }, nullptr, &folded_model,
        &plain_model));
    Interpreter& folded = *folded_model->interpreter;
    Interpreter& plain = *plain_model->interpreter;
    EXPECT_EQ(plain.invoked_nodes_size(), 11u);  // the PAD and the RELU fold
    EXPECT_EQ(folded.invoked_nodes_size(), 8u);
    EXPECT_EQ(folded.node(3).folded_into, 2);
    ASSERT_NE(folded.node(2).folded_addend, nullptr);
    EXPECT_EQ(folded.node(2).folded_addend->index, lateral);
    EXPECT_EQ(folded.node(5).folded_into, 4);
    EXPECT_EQ(folded.node(4).folded_activation, A::RELU6);
    ASSERT_NE(folded.node(4).folded_addend, nullptr);
    EXPECT_EQ(folded.node(4).folded_addend->index, merged);
    EXPECT_EQ(folded.node(9).folded_into, 8);
    ASSERT_NE(folded.node(8).folded_addend, nullptr);
    EXPECT_EQ(folded.node(8).folded_addend->index, narrow);
    EXPECT_THAT(folded.node(8).folded_addend_channels, ElementsAre(2, 12));
    EXPECT_EQ(folded.node(11).folded_into, 10);
    EXPECT_EQ(folded.node(10).folded_activation, A::RELU);
    EXPECT_EQ(folded.node(12).folded_into, -1);
    ExpectSameOutputs(folded, plain);
    ExpectSameOutputs(folded, plain);  // and again
  }
}

// A PAD stays a node when it pads channels before a conv, when its output
// has another reader, when the op after it does not pad (MAX_POOL_2D), or
// when it pads channels before an ADD that broadcasts its other input, or
// when no node reads it (a model output).
TEST(InterpreterTest, PadsThatCannotFoldStayNodes) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "in");
  int channel_pads = b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 0, 2});
  int wide = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "wide");
  b.AddPad(in, channel_pads, wide);  // 0: channels
  int filter = b.AddConstFloat32({1, 3, 3, 4}, std::vector<float>(36, 0.25f));
  int dw = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 4}, "dw");
  b.AddDepthwiseConv2D(wide, filter, -1, dw, testing::DepthwiseConv2DParams{});  // 1
  int spatial = b.AddConstInt32({4, 2}, {0, 0, 1, 1, 1, 1, 0, 0});
  int padded = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "padded");
  b.AddPad(dw, spatial, padded);  // 2: read twice
  int dw2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 4}, "dw2");
  b.AddDepthwiseConv2D(padded, filter, -1, dw2, testing::DepthwiseConv2DParams{});  // 3
  int pooled = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 3, 4}, "pooled");
  testing::Pool2DParams pool;
  pool.filter_h = pool.filter_w = pool.stride_h = pool.stride_w = 2;
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, padded, pooled, pool);  // 4
  int padded2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "padded2");
  b.AddPad(dw2, spatial, padded2);  // 5: before a pool
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 3, 3, 4}, "out");
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, padded2, out, pool);  // 6
  int wide2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "wide2");
  b.AddPad(in, channel_pads, wide2);  // 7: into an ADD that broadcasts
  int bias = b.AddConstFloat32({4}, {1, 2, 3, 4});
  int biased = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 4}, "biased");
  b.AddAdd(wide2, bias, biased);  // 8
  int lone = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 2}, "lone");
  b.AddPad(in, spatial, lone);  // 9: read by no node, a model output
  b.SetInputs({in});
  b.SetOutputs({pooled, out, biased, lone});

  std::unique_ptr<Loaded> folded, plain;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(b, &folded, &plain));
  const Interpreter& it = *folded->interpreter;
  EXPECT_EQ(it.invoked_nodes_size(), it.nodes_size());
  for (size_t i = 0; i < it.nodes_size(); ++i) {
    EXPECT_EQ(it.node(i).folded_into, -1) << "node " << i;
    EXPECT_THAT(it.node(i).folded_pad, ElementsAre(0, 0, 0, 0)) << "node " << i;
  }
  ExpectSameOutputs(*folded->interpreter, *plain->interpreter);
}

TEST(InterpreterTest, OutputsDeclaredEmptyAreSizedAtPrepareBeforeTheArena) {
  // in [1,2,3] -> RESHAPE(shape [3,-1]) -> r [] -> ADD(r, r) -> sum []: ADD
  // sizes sum from r's computed shape, and the arena holds both sizes.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 3}, "in");
  int target = b.AddConstInt32({2}, {3, -1}, "target");
  int r = b.AddTensor(tfl::TensorType::FLOAT32, {}, "r");
  int sum = b.AddTensor(tfl::TensorType::FLOAT32, {}, "sum");
  b.AddOperator(tfl::BuiltinOperator::RESHAPE, {in, target}, {r});
  b.AddAdd(r, r, sum);
  b.SetInputs({in});
  b.SetOutputs({sum});
  GraphRunner runner;
  Status s = runner.Init(b);
  ASSERT_TRUE(s.ok()) << s.message();
  const Interpreter& interpreter = runner.interpreter();
  for (int t : {r, sum}) {
    EXPECT_THAT(interpreter.tensor(t).shape, ElementsAre(3, 2));
    EXPECT_EQ(interpreter.tensor(t).bytes, 24u);
    EXPECT_TRUE(interpreter.tensor(t).shape_set_by_op);
  }
  EXPECT_FALSE(interpreter.tensor(in).shape_set_by_op);
  // in, r and sum are all live during ADD: three 64-byte slots at least.
  EXPECT_GE(interpreter.arena_bytes(), 3u * 64u);
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output(0), ElementsAre(2, 4, 6, 8, 10, 12));
}

TEST(InterpreterTest, ActivationPadAndQuantizeSizeOutputsDeclaredEmpty) {
  // in [1,2,2] -> RELU -> a [] -> PAD(last dim 1,0) -> p [] -> RELU6 -> q []
  // -> QUANTIZE (int8, scale 0.5) -> out []: each op sizes its output.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2}, "in");
  int a = b.AddTensor(tfl::TensorType::FLOAT32, {}, "a");
  int paddings = b.AddConstInt32({3, 2}, {0, 0, 0, 0, 1, 0}, "paddings");
  int p = b.AddTensor(tfl::TensorType::FLOAT32, {}, "p");
  int q = b.AddTensor(tfl::TensorType::FLOAT32, {}, "q");
  int out = b.AddTensor(tfl::TensorType::INT8, {}, "out");
  b.SetQuantization(out, 0.5f, 0);
  b.AddUnary(tfl::BuiltinOperator::RELU, in, a);
  b.AddPad(a, paddings, p);
  b.AddUnary(tfl::BuiltinOperator::RELU6, p, q);
  b.AddOperator(tfl::BuiltinOperator::QUANTIZE, {q}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  Status s = runner.Init(b);
  ASSERT_TRUE(s.ok()) << s.message();
  const Interpreter& interpreter = runner.interpreter();
  EXPECT_THAT(interpreter.tensor(a).shape, ElementsAre(1, 2, 2));
  for (int t : {p, q, out}) {
    EXPECT_THAT(interpreter.tensor(t).shape, ElementsAre(1, 2, 3)) << "tensor " << t;
    EXPECT_TRUE(interpreter.tensor(t).shape_set_by_op) << "tensor " << t;
  }
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>{-1, 2.5f, 9, 0.75f}));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_THAT(runner.Output<int8_t>(0), ElementsAre(0, 0, 5, 0, 12, 2));
}

TEST(InterpreterTest, FoldedOutputDeclaredEmptyGetsItsComputedSize) {
  // fp16 [2,16] -> DEQUANTIZE -> w [] (folded: 128 bytes once sized) -> ADD.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 16}, "in");
  int w16 = b.AddConstFloat16({2, 16}, std::vector<float>(32, 0.5f), "w");
  int w = b.AddTensor(tfl::TensorType::FLOAT32, {}, "w_dequantize");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2, 16}, "out");
  b.AddDequantize(w16, w);
  b.AddAdd(in, w, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  Status s = runner.Init(b);
  ASSERT_TRUE(s.ok()) << s.message();
  const Interpreter& interpreter = runner.interpreter();
  EXPECT_EQ(interpreter.tensor(w).allocation, Allocation::kFolded);
  EXPECT_THAT(interpreter.tensor(w).shape, ElementsAre(2, 16));
  EXPECT_EQ(interpreter.persistent_bytes(), 128u);
  ASSERT_TRUE(runner.SetInput(0, std::vector<float>(32, 1.0f)));
  ASSERT_TRUE(runner.Invoke().ok());
  EXPECT_EQ(runner.Output(0), std::vector<float>(32, 1.5f));
}

TEST(InterpreterTest, FullyKnownDeclaredShapeMustStillMatch) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3}, "in");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {3, 2}, "out");
  b.AddUnary(tfl::BuiltinOperator::RELU6, in, out);  // not a reshape: computes [2,3]
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  Status s = runner.Init(b);
  EXPECT_EQ(s.code(), StatusCode::kError);
  EXPECT_THAT(s.message(), HasSubstr("output tensor 1 'out' is declared [3,2], but the op computes "
                                     "[2,3]"));
}

TEST(InterpreterTest, OutputSizedAtPrepareOverTheArenaLimitIsRefused) {
  // TILE [2,2] by (1000, 1000) into an output declared []: 16 MB, limit 1 MiB.
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2, 2}, "in");
  int multiples = b.AddConstInt32({2}, {1000, 1000}, "multiples");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {}, "tiled");
  b.AddOperator(tfl::BuiltinOperator::TILE, {in, multiples}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  std::vector<uint8_t> bytes = b.Build();
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::FromBuffer("tile.tflite", bytes, &model).ok());
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  InterpreterOptions options;
  options.max_arena_bytes = 1 << 20;
  Interpreter interpreter(*model, resolver, options);
  Status s = interpreter.AllocateTensors();
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message(),
            "model 'tile.tflite' tensor 2 'tiled' float32 [2000,2000] needs 16000000 bytes, over "
            "the arena limit of 1048576 bytes");
}

TEST(InterpreterTest, MissingKernelIsUnsupportedNamingOpAndNode) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int mid = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  b.AddUnary(tfl::BuiltinOperator::RELU, in, mid);
  b.AddUnary(tfl::BuiltinOperator::SIN, mid, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  Status status = runner.Init(b);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message(),
            "model 'test.tflite' node 1 (SIN): op is not supported (no kernel registered)");
  // A failed allocation sticks; Invoke() refuses to run.
  EXPECT_EQ(runner.interpreter().AllocateTensors().message(), status.message());
  EXPECT_EQ(runner.Invoke().code(), StatusCode::kInvalidArgument);
}

TEST(InterpreterTest, CustomOpIsUnsupported) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  b.AddCustomOperator("MyVendorOp", {in}, {out});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  Status status = runner.Init(b);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message(),
            "model 'test.tflite' node 0 (MyVendorOp): op (custom) is not "
            "supported (no kernel registered)");
}

TEST(InterpreterTest, SeveralMissingOpsAreAllNamed) {
  // Custom ops A (nodes 0 and 3) and B (node 1), a RELU our kernels run
  // (node 2) and SIN (node 4), which has no kernel either: the first node
  // is the error, followed by every op without a kernel, each once.
  ModelBuilder b;
  int x = b.AddTensor(tfl::TensorType::FLOAT32, {2}, "x");
  int t0 = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int t3 = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {2});
  b.AddCustomOperator("VendorA", {x}, {t0});
  b.AddCustomOperator("VendorB", {t0}, {t1});
  b.AddUnary(tfl::BuiltinOperator::RELU, t1, t2);
  b.AddCustomOperator("VendorA", {t2}, {t3});
  b.AddUnary(tfl::BuiltinOperator::SIN, t3, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  GraphRunner runner;
  Status status = runner.Init(b);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message(),
            "model 'test.tflite' node 0 (VendorA): op (custom) is not supported (no kernel "
            "registered); 3 ops of this model have no kernel: VendorA (custom; nodes 0, 3), "
            "VendorB (custom; node 1), SIN (node 4)");
}

TEST(InterpreterTest, OnlyRegisteredKernelsAreUsed) {
  std::vector<uint8_t> bytes = ChainModel(2).Build();
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::FromBuffer("chain.tflite", bytes, &model).ok());
  OpResolver resolver;
  resolver.AddRelu();
  Interpreter interpreter(*model, resolver);
  Status status = interpreter.AllocateTensors();
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_THAT(status.message(), HasSubstr("node 1 (RELU6)"));
}

TEST(InterpreterTest, UnsupportedDtype) {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::STRING, {2}, "s");
  int out = b.AddTensor(tfl::TensorType::STRING, {2});
  b.AddReshape(in, out, {2});
  b.SetInputs({in});
  b.SetOutputs({out});
  GraphRunner runner;
  Status status = runner.Init(b);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message(),
            "model 'test.tflite' tensor 0 's' has dtype STRING, which is not supported");
}

TEST(InterpreterTest, InvokeBeforeAllocateIsRefused) {
  std::vector<uint8_t> bytes = ChainModel(1).Build();
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::FromBuffer("chain.tflite", bytes, &model).ok());
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  Interpreter interpreter(*model, resolver);
  EXPECT_EQ(interpreter.Invoke().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(interpreter.arena_bytes(), 0u);
}

// Every op of the reference set in one graph, for the mutation test.
ModelBuilder AllOpsModel() {
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "in");
  int w16 = b.AddConstFloat16({2, 3, 3, 2}, std::vector<float>(36, 0.5f));
  int w = b.AddTensor(tfl::TensorType::FLOAT32, {2, 3, 3, 2});
  b.AddDequantize(w16, w);
  int bias = b.AddConstFloat32({2}, {0.1f, -0.1f});
  int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2});
  testing::Conv2DParams conv_params;
  conv_params.padding = tfl::Padding::SAME;
  conv_params.stride_h = conv_params.stride_w = 2;
  b.AddConv2D(in, w, bias, conv, conv_params);
  int dw_filter = b.AddConstFloat32({1, 3, 3, 2}, std::vector<float>(18, 0.25f));
  int dw = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2});
  testing::DepthwiseConv2DParams dw_params;
  dw_params.padding = tfl::Padding::SAME;
  b.AddDepthwiseConv2D(conv, dw_filter, -1, dw, dw_params);
  int relu = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2});
  b.AddUnary(tfl::BuiltinOperator::RELU, dw, relu);
  int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 2});
  b.AddAdd(relu, conv, sum);
  int paddings = b.AddConstInt32({4, 2}, {0, 0, 0, 0, 0, 0, 0, 2});
  int padded = b.AddTensor(tfl::TensorType::FLOAT32, {1, 2, 2, 4});
  b.AddPad(sum, paddings, padded);
  int pooled = b.AddTensor(tfl::TensorType::FLOAT32, {1, 1, 1, 4});
  testing::Pool2DParams pool;
  pool.filter_h = pool.filter_w = pool.stride_h = pool.stride_w = 2;
  b.AddPool2D(tfl::BuiltinOperator::MAX_POOL_2D, padded, pooled, pool);
  int flat = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4});
  b.AddReshape(pooled, flat, {1, 4});
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8});
  b.AddConcatenation({flat, flat}, out, 1);
  b.SetInputs({in});
  b.SetOutputs({out});
  return b;
}

TEST(InterpreterTest, ThreadsAndSharedScratch) {
  ModelBuilder b = AllOpsModel();
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::FromBuffer("all.tflite", b.Build(), &model).ok());
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  Interpreter one(*model, resolver);
  EXPECT_EQ(one.num_threads(), 1);
  EXPECT_EQ(one.scratch_bytes(), 0u);  // before AllocateTensors()
  ASSERT_TRUE(one.AllocateTensors().ok());
  // The im2col CONV_2D asks for scratch; one block, a multiple of 64 bytes.
  EXPECT_GT(one.scratch_bytes(), 0u);
  EXPECT_EQ(one.scratch_bytes() % 64, 0u);
  size_t largest = 0;
  for (size_t i = 0; i < one.nodes_size(); ++i) {
    largest = std::max(largest, one.node(i).scratch_bytes);
    EXPECT_NE(one.node(i).context, nullptr);
  }
  EXPECT_GE(one.scratch_bytes(), largest);
  InterpreterOptions options;
  options.num_threads = 3;
  Interpreter three(*model, resolver, options);
  ASSERT_TRUE(three.AllocateTensors().ok());
  EXPECT_EQ(three.num_threads(), 3);
  // One part per thread, each for the largest request (the conv's chunks are
  // a third of the pixels here).
  largest = 0;
  for (size_t i = 0; i < three.nodes_size(); ++i) {
    largest = std::max(largest, three.node(i).scratch_bytes);
  }
  EXPECT_GT(largest, 0u);
  EXPECT_GE(three.scratch_bytes(), static_cast<size_t>(three.num_threads()) * largest);
}

TEST(InterpreterTest, MutatedModelsNeverCrash) {
  GraphRunner runner;
  ASSERT_TRUE(runner.Init(AllOpsModel()).ok());
  const std::vector<uint8_t> valid = AllOpsModel().Build();
  std::mt19937 rng(5);
  int loaded = 0, allocated = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bytes = valid;
    for (int k = 0; k < 1 + trial % 3; ++k) {
      bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    }
    std::unique_ptr<Model> model;
    if (!Model::FromBuffer("mutated.tflite", bytes, &model).ok()) continue;
    ++loaded;
    OpResolver resolver;
    resolver.AddAllReferenceOps();
    InterpreterOptions options;
    options.max_arena_bytes = 1 << 20;  // a mutated shape may ask for gigabytes
    Interpreter interpreter(*model, resolver, options);
    Status status = interpreter.AllocateTensors();
    if (!status.ok()) {
      EXPECT_FALSE(status.message().empty());
      continue;
    }
    ++allocated;
    for (Tensor* t : interpreter.inputs()) std::memset(t->data, 0, t->bytes);
    EXPECT_TRUE(interpreter.Invoke().ok());
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(allocated, 0);
}

// face_detection_short_range (BlazeFace): no TFLite here to compare with, so
// check what must hold for any correct run; the per-op tests are the real
// guarantee of the kernels' arithmetic.
class FaceDetectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string path = std::string(DFARM_MODELS_DIR) + "/face_detection_short_range.tflite";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
    Status status = Model::Load(path, &model_);
    ASSERT_TRUE(status.ok()) << status.message();
    resolver_.AddAllReferenceOps();
    interpreter_ = std::make_unique<Interpreter>(*model_, resolver_);
    status = interpreter_->AllocateTensors();
    ASSERT_TRUE(status.ok()) << status.message();
  }

  // Fills the image with f(y, x, c) and runs the model.
  template <typename F>
  void Run(F f) {
    float* in = interpreter_->inputs()[0]->data_as<float>();
    for (int y = 0; y < 128; ++y) {
      for (int x = 0; x < 128; ++x) {
        for (int c = 0; c < 3; ++c) in[(y * 128 + x) * 3 + c] = f(y, x, c);
      }
    }
    Status status = interpreter_->Invoke();
    ASSERT_TRUE(status.ok()) << status.message();
  }

  std::vector<float> Output(int i) const {
    const Tensor* t = interpreter_->outputs()[i];
    return std::vector<float>(t->data_as<float>(), t->data_as<float>() + t->num_elements());
  }

  std::unique_ptr<Model> model_;
  OpResolver resolver_;
  std::unique_ptr<Interpreter> interpreter_;
};

// Of the weights dequantized once, the interpreter holds only those a node
// reads as they are (DEPTHWISE_CONV_2D filters, biases): under 48 of their
// 396 KiB; the packed CONV_2D filters replace their float32 copies.
// The same outputs as holding them all.
TEST_F(FaceDetectionTest, HoldsOnlyTheFoldedWeightsReadAsTheyAre) {
  if (!GemmPacksConstantB()) GTEST_SKIP() << "this CPU's GEMM packs no filter";
  InterpreterOptions keeping;
  keeping.free_kept_folded = false;
  Interpreter kept(*model_, resolver_, keeping);
  ASSERT_TRUE(kept.AllocateTensors().ok());
  EXPECT_GT(kept.persistent_bytes(), 390u * 1024);
  EXPECT_LT(interpreter_->persistent_bytes(), 48u * 1024);
  size_t held = 0;
  for (size_t i = 0; i < interpreter_->tensors_size(); ++i) {
    const Tensor& t = interpreter_->tensor(i);
    if (t.allocation == Allocation::kFolded && t.data != nullptr) held += (t.bytes + 63) / 64 * 64;
  }
  EXPECT_EQ(held, interpreter_->persistent_bytes());
  Run([](int y, int x, int c) { return static_cast<float>((y * 7 + x * 3 + c) % 17) / 8 - 1; });
  for (Tensor* t : kept.inputs()) {
    std::memcpy(t->data, interpreter_->inputs()[0]->data, t->bytes);
  }
  ASSERT_TRUE(kept.Invoke().ok());
  for (size_t i = 0; i < kept.outputs().size(); ++i) {
    EXPECT_EQ(std::memcmp(kept.outputs()[i]->data, interpreter_->outputs()[i]->data,
                          kept.outputs()[i]->bytes),
              0)
        << "output " << i;
  }
}

TEST_F(FaceDetectionTest, ShapesAndSanity) {
  ASSERT_EQ(interpreter_->inputs().size(), 1u);
  ASSERT_EQ(interpreter_->outputs().size(), 2u);
  EXPECT_THAT(interpreter_->inputs()[0]->shape, ElementsAre(1, 128, 128, 3));
  EXPECT_THAT(interpreter_->outputs()[0]->shape, ElementsAre(1, 896, 16));
  EXPECT_THAT(interpreter_->outputs()[1]->shape, ElementsAre(1, 896, 1));
  // Every DEQUANTIZE is of constant fp16 weights, so all of them fold.
  // Every RELU follows a CONV_2D or ADD that is its only reader, so each
  // is folded into that node's epilogue; every PAD widens the channels of
  // one input of an ADD, so each is folded into that ADD.
  size_t dequantize = 0;
  size_t relu = 0;
  size_t pad = 0;
  size_t add = 0;
  size_t fused = 0;
  for (size_t i = 0; i < interpreter_->nodes_size(); ++i) {
    const Node& node = interpreter_->node(i);
    if (node.op_name == "DEQUANTIZE") {
      ++dequantize;
      EXPECT_TRUE(node.folded);
    }
    if (node.op_name == "PAD") {
      ++pad;
      ASSERT_GE(node.folded_into, 0) << "node " << i;
      const Node& into = interpreter_->node(node.folded_into);
      EXPECT_EQ(into.op_name, "ADD");
      EXPECT_GE(into.folded_channel_pad[0], 0);
    }
    if (node.op_name == "ADD" && node.folded_into >= 0) {
      ++add;
      const Node& conv = interpreter_->node(node.folded_into);
      EXPECT_EQ(conv.op_name, "CONV_2D");
      EXPECT_NE(conv.folded_addend, nullptr);
    }
    if (node.op_name == "RELU") {
      ++relu;
      ASSERT_GE(node.folded_into, 0) << "node " << i;
      EXPECT_EQ(interpreter_->node(node.folded_into).folded_activation,
                tflite::ActivationFunctionType::RELU);
    }
    // A 1x1 conv reading the depthwise conv before it runs inside it
    // (fuse_rows).
    if (node.then != nullptr) {
      ++fused;
      EXPECT_EQ(node.op_name, "DEPTHWISE_CONV_2D");
      EXPECT_EQ(node.then->op_name, "CONV_2D");
      EXPECT_EQ(node.then->runs_in, node.index);
      EXPECT_EQ(node.then->inputs[0], node.outputs[0]);
    }
  }
  EXPECT_GT(relu, 0u);
  EXPECT_GT(pad, 0u);
  EXPECT_GT(add, 0u);
  EXPECT_GT(fused, 0u);
  EXPECT_EQ(interpreter_->invoked_nodes_size(),
            interpreter_->nodes_size() - dequantize - relu - pad - add - fused);

  // A flat grey image holds no face: finite outputs, boxes of image scale
  // (the model's regressors are in input pixels), and low face scores.
  Run([](int, int, int) { return 0.0f; });
  std::vector<float> boxes = Output(0), scores = Output(1);
  for (float v : boxes) {
    ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(std::fabs(v), 256.0f);
  }
  float max_score = -1e30f;
  for (float v : scores) {
    ASSERT_TRUE(std::isfinite(v));
    max_score = std::max(max_score, v);
  }
  EXPECT_LT(1.0f / (1.0f + std::exp(-max_score)), 0.5f) << "a face in a flat image";

  // The output depends on the input, and equal inputs give equal outputs.
  Run([](int y, int x, int c) { return std::sin(0.1f * y + 0.07f * x + c); });
  std::vector<float> pattern = Output(0);
  EXPECT_NE(pattern, boxes);
  Run([](int, int, int) { return 0.0f; });
  EXPECT_EQ(Output(0), boxes);
  EXPECT_EQ(Output(1), scores);
}

}  // namespace
}  // namespace dfarm::runtime
