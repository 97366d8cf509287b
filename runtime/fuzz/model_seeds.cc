// Writes a seed corpus for model_fuzzer into a folder: small models from
// tests/model_builder, one per op family, each small enough to be invoked,
// and the crafted models of tests/model_builder/crafted_models.h (shapes a
// delegate must never be offered), kept as regression seeds.
// The real corpus models are copied beside them by the fuzz-model target.
// Usage: dfarm_model_fuzzer_seeds DIR (created when missing)
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/model_builder/crafted_models.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {
namespace {

using T = tfl::TensorType;
using Op = tfl::BuiltinOperator;

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<std::pair<std::string, ModelBuilder>> Seeds() {
  std::vector<std::pair<std::string, ModelBuilder>> seeds;
  {
    ModelBuilder b;
    int in = b.AddTensor(T::FLOAT32, {1, 4, 4, 2}, "in");
    int w = b.AddConstFloat32({3, 2, 2, 2}, std::vector<float>(24, 0.5f), "w");
    int bias = b.AddConstFloat32({3}, {1, 2, 3}, "b");
    int c = b.AddTensor(T::FLOAT32, {1, 2, 2, 3});
    Conv2DParams p;
    p.stride_h = p.stride_w = 2;
    p.activation = tfl::ActivationFunctionType::RELU6;
    b.AddConv2D(in, w, bias, c, p);
    int dw = b.AddConstFloat32({1, 2, 2, 3}, std::vector<float>(12, 0.25f), "dw");
    int d = b.AddTensor(T::FLOAT32, {1, 1, 1, 3});
    b.AddDepthwiseConv2D(c, dw, bias, d, {});
    b.SetInputs({in});
    b.SetOutputs({d});
    seeds.emplace_back("conv", std::move(b));
  }
  {
    ModelBuilder b;
    int in = b.AddTensor(T::FLOAT32, {1, 4, 4, 1}, "in");
    int pooled = b.AddTensor(T::FLOAT32, {1, 2, 2, 1});
    Pool2DParams p;
    p.filter_h = p.filter_w = p.stride_h = p.stride_w = 2;
    b.AddPool2D(Op::MAX_POOL_2D, in, pooled, p);
    int size = b.AddConstInt32({2}, {4, 4}, "size");
    int resized = b.AddTensor(T::FLOAT32, {1, 4, 4, 1});
    b.AddResize(Op::RESIZE_BILINEAR, pooled, size, resized, false, true);
    int axes = b.AddConstInt32({2}, {1, 2}, "axes");
    int mean = b.AddTensor(T::FLOAT32, {1, 1});
    b.AddReducer(Op::MEAN, resized, axes, mean, false);
    b.SetInputs({in});
    b.SetOutputs({mean});
    seeds.emplace_back("pool_resize_mean", std::move(b));
  }
  {
    ModelBuilder b;
    int x = b.AddTensor(T::FLOAT32, {2, 3}, "x");
    int y = b.AddTensor(T::FLOAT32, {1, 3}, "y");
    int sum = b.AddTensor(T::FLOAT32, {2, 3});
    b.AddBinary(Op::MUL, x, y, sum, tfl::ActivationFunctionType::RELU);
    int cat = b.AddTensor(T::FLOAT32, {4, 3});
    b.AddConcatenation({sum, x}, cat, 0);
    int flat = b.AddTensor(T::FLOAT32, {12});
    b.AddReshape(cat, flat, {12});
    int paddings = b.AddConstInt32({1, 2}, {1, 2}, "paddings");
    int padded = b.AddTensor(T::FLOAT32, {15});
    b.AddPad(flat, paddings, padded);
    int act = b.AddTensor(T::FLOAT32, {15});
    b.AddUnary(Op::LOGISTIC, padded, act);
    b.SetInputs({x, y});
    b.SetOutputs({act});
    seeds.emplace_back("elementwise_movement", std::move(b));
  }
  {
    ModelBuilder b;
    int in = b.AddTensor(T::FLOAT32, {1, 4}, "in");
    int w16 = b.AddConstFloat16({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}, "w16");
    int w = b.AddTensor(T::FLOAT32, {2, 4}, "w");
    b.AddDequantize(w16, w);
    int out = b.AddTensor(T::FLOAT32, {1, 2});
    b.AddFullyConnected(in, w, -1, out);
    int soft = b.AddTensor(T::FLOAT32, {1, 2});
    b.AddOperator(Op::SOFTMAX, {out}, {soft}, tfl::BuiltinOptions::SoftmaxOptions,
                  [](flatbuffers::FlatBufferBuilder& fbb) {
                    return tfl::CreateSoftmaxOptions(fbb, 1.0f).Union();
                  });
    b.SetInputs({in});
    b.SetOutputs({soft});
    seeds.emplace_back("fp16_fully_connected", std::move(b));
  }
  {
    ModelBuilder b;
    int params = b.AddTensor(T::FLOAT32, {3, 2}, "params");
    int indices = b.AddTensor(T::INT32, {2}, "indices");
    int o = b.AddTensor(T::FLOAT32, {2, 2});
    b.AddOperator(Op::GATHER, {params, indices}, {o}, tfl::BuiltinOptions::GatherOptions,
                  [](flatbuffers::FlatBufferBuilder& fbb) {
                    return tfl::CreateGatherOptions(fbb, 0).Union();
                  });
    b.SetInputs({params, indices});
    b.SetOutputs({o});
    seeds.emplace_back("gather", std::move(b));
  }
  {
    ModelBuilder b;
    SparsitySpec spec;
    spec.traversal_order = {0, 1};
    spec.levels.push_back({.dense_size = 2});
    spec.levels.push_back({.sparse = true, .segments = {0, 1, 2}, .indices = {1, 3}});
    int sparse = b.AddSparseConst(T::FLOAT32, {2, 4}, FloatBytes({1, 2}), spec, "sparse");
    int dense = b.AddTensor(T::FLOAT32, {2, 4}, "dense");
    b.AddOperator(Op::DENSIFY, {sparse}, {dense});
    int in = b.AddTensor(T::FLOAT32, {2, 4}, "in");
    int out = b.AddTensor(T::FLOAT32, {2, 4});
    b.AddAdd(in, dense, out);
    b.SetInputs({in});
    b.SetOutputs({out});
    seeds.emplace_back("densify", std::move(b));
  }
  {
    ModelBuilder b;
    int in = b.AddTensor(T::FLOAT32, {1, 2, 2, 1}, "in");
    int shape = b.AddConstInt32({4}, {1, 4, 4, 1}, "shape");
    int filter = b.AddConstFloat32({1, 2, 2, 1}, {1, 1, 1, 1}, "filter");
    int out = b.AddTensor(T::FLOAT32, {1, 4, 4, 1});
    TransposeConvParams p;
    p.stride_h = p.stride_w = 2;
    b.AddTransposeConv(shape, filter, in, -1, out, p);
    int d2s = b.AddTensor(T::FLOAT32, {1, 2, 2, 4});
    b.AddBlockOp(Op::SPACE_TO_DEPTH, out, d2s, 2);
    b.SetInputs({in});
    b.SetOutputs({d2s});
    seeds.emplace_back("transpose_conv", std::move(b));
  }
  {
    ModelBuilder b;
    int in = b.AddTensor(T::FLOAT32, {1, 2, 2, 4}, "in");
    int x = b.AddTensor(T::FLOAT32, {1, 2, 2, 1}, "x");
    int w = b.AddConstFloat32({1, 2, 2, 1}, {1, 0, 0, 1}, "w");
    std::vector<uint8_t> opts(12, 0);
    opts[0] = 2;  // VALID, stride 1 x 1
    opts[4] = opts[8] = 1;
    int out = b.AddTensor(T::FLOAT32, {1, 3, 3, 1});
    b.AddCustomOperator("Convolution2DTransposeBias",
                        {x, w, b.AddConstFloat32({1}, {0.5f}, "bias")}, {out}, opts);
    int flat = b.AddTensor(T::FLOAT32, {1, 2, 2, 4});
    b.AddUnary(Op::RELU, in, flat);
    b.SetInputs({in, x});
    b.SetOutputs({out, flat});
    seeds.emplace_back("custom_and_unary", std::move(b));
  }
  for (CraftedModel& crafted : CraftedShapeModels()) {
    seeds.emplace_back("crafted_" + crafted.name, std::move(crafted.builder));
  }
  return seeds;
}

}  // namespace
}  // namespace dfarm::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(argv[1], ec);
  for (const auto& [name, builder] : dfarm::testing::Seeds()) {
    std::string path = std::string(argv[1]) + "/" + name + ".tflite";
    if (!builder.WriteFile(path)) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
