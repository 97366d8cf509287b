// Google Benchmark: one Interpreter::Invoke() per .tflite model of
// DFARM_MODELS_DIR with the reference kernels ("cpu", GEMM-based convolutions),
// with their plain-loop variants ("plain_loops": CONV_2D, FULLY_CONNECTED,
// BATCH_MATMUL and TRANSPOSE_CONV without the GEMM, DEPTHWISE_CONV_2D without
// its vector kernel, as before them) and with the
// xnnpack delegate at 1 and 2 threads, AllocateTensors() outside the timed loop.
// Usage: dfarm_xnnpack_benchmark [benchmark flags]
#include <benchmark/benchmark.h>
#include <xnnpack.h>

#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "delegates/xnnpack/xnnpack_delegate.h"
#include "runtime/interpreter.h"
#include "runtime/kernels/depthwise_conv_float.h"
#include "runtime/kernels/gemm.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::delegates {
namespace {

// threads: 0 the reference kernels, -1 their plain loops, N xnnpack on N threads.
void BM_Invoke(benchmark::State& state, const std::string& path, int threads) {
  std::unique_ptr<runtime::Model> model;
  runtime::Status s = runtime::Model::Load(path, &model);
  std::unique_ptr<XnnpackDelegate> xnn;
  if (s.ok() && threads > 0) {
    s = XnnpackDelegate::Create(XnnpackOptions{threads, false}, {}, &xnn);
  }
  if (!s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  if (threads < 0) {
    using Op = tflite::BuiltinOperator;
    resolver.AddBuiltin(Op::CONV_2D, runtime::RegisterConv2DReference());
    resolver.AddBuiltin(Op::FULLY_CONNECTED, runtime::RegisterFullyConnectedReference());
    resolver.AddBuiltin(Op::BATCH_MATMUL, runtime::RegisterBatchMatmulReference());
    resolver.AddBuiltin(Op::TRANSPOSE_CONV, runtime::RegisterTransposeConvReference());
    resolver.AddBuiltin(Op::DEPTHWISE_CONV_2D, runtime::RegisterDepthwiseConv2DReference());
  }
  runtime::Interpreter interpreter(*model, resolver);
  if (xnn != nullptr) interpreter.AddDelegate(xnn.get());
  s = interpreter.AllocateTensors();
  if (!s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (runtime::Tensor* t : interpreter.inputs()) {
    if (t->dtype != runtime::DType::kFloat32) continue;
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data_as<float>()[i] = u(rng);
  }
  for (auto _ : state) {
    s = interpreter.Invoke();
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
  }
  state.counters["partitions"] = interpreter.placement().partitions;
}

// The delegate layer's own cost per Invoke(): a one-node model (float32 ADD
// of two [1,8] inputs) through Interpreter::Invoke() with xnnpack, against
// the same ADD as a bare XNNPACK runtime (xnn_invoke_runtime alone).
void BM_OverheadInterpreterXnnpackAdd(benchmark::State& state) {
  testing::ModelBuilder b;
  const int x = b.AddTensor(tflite::TensorType::FLOAT32, {1, 8});
  const int y = b.AddTensor(tflite::TensorType::FLOAT32, {1, 8});
  const int out = b.AddTensor(tflite::TensorType::FLOAT32, {1, 8});
  b.AddAdd(x, y, out);
  b.SetInputs({x, y});
  b.SetOutputs({out});
  const std::vector<uint8_t> bytes = b.Build();
  std::unique_ptr<runtime::Model> model;
  std::unique_ptr<XnnpackDelegate> xnn;
  runtime::Status s = runtime::Model::FromBuffer("add.tflite", bytes, &model);
  if (s.ok()) s = XnnpackDelegate::Create(XnnpackOptions{1, false}, {}, &xnn);
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  std::unique_ptr<runtime::Interpreter> interpreter;
  if (s.ok()) {
    interpreter = std::make_unique<runtime::Interpreter>(*model, resolver);
    interpreter->AddDelegate(xnn.get());
    s = interpreter->AllocateTensors();
  }
  if (!s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  for (auto _ : state) {
    if (!interpreter->Invoke().ok()) {
      state.SkipWithError("Invoke failed");
      return;
    }
  }
  state.counters["partitions"] = interpreter->placement().partitions;
}

void BM_OverheadBareXnnpackAdd(benchmark::State& state) {
  if (xnn_initialize(nullptr) != xnn_status_success) {
    state.SkipWithError("xnn_initialize failed");
    return;
  }
  xnn_subgraph_t g = nullptr;
  xnn_create_subgraph(3, 0, &g);
  const size_t dims[2] = {1, 8};
  uint32_t a = 0, c = 0, o = 0;
  xnn_define_tensor_value(g, xnn_datatype_fp32, 2, dims, nullptr, 0, XNN_VALUE_FLAG_EXTERNAL_INPUT,
                          &a);
  xnn_define_tensor_value(g, xnn_datatype_fp32, 2, dims, nullptr, 1, XNN_VALUE_FLAG_EXTERNAL_INPUT,
                          &c);
  xnn_define_tensor_value(g, xnn_datatype_fp32, 2, dims, nullptr, 2, XNN_VALUE_FLAG_EXTERNAL_OUTPUT,
                          &o);
  const float inf = std::numeric_limits<float>::infinity();
  xnn_define_add2(g, -inf, inf, a, c, o, 0);
  xnn_runtime_t rt = nullptr;
  if (xnn_create_runtime_v2(g, nullptr, 0, &rt) != xnn_status_success) {
    xnn_delete_subgraph(g);
    state.SkipWithError("xnn_create_runtime_v2 failed");
    return;
  }
  std::vector<float> va(8, 1.0f), vc(8, 2.0f), vo(8);
  const xnn_external_value ext[3] = {{a, va.data()}, {c, vc.data()}, {o, vo.data()}};
  xnn_setup_runtime(rt, 3, ext);
  for (auto _ : state) xnn_invoke_runtime(rt);
  xnn_delete_runtime(rt);
  xnn_delete_subgraph(g);
}

}  // namespace
}  // namespace dfarm::delegates

int main(int argc, char** argv) {
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".tflite") continue;
      const std::string path = entry.path().string();
      const std::string name = entry.path().stem().string();
      for (int threads : {-1, 0, 1, 2}) {
        const std::string label =
            name + (threads < 0    ? "/plain_loops"
                    : threads == 0 ? "/cpu"
                                   : "/xnnpack_threads:" + std::to_string(threads));
        benchmark::RegisterBenchmark(label.c_str(), dfarm::delegates::BM_Invoke, path, threads)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  benchmark::RegisterBenchmark("overhead/interpreter_xnnpack_add_1x8",
                               dfarm::delegates::BM_OverheadInterpreterXnnpackAdd);
  benchmark::RegisterBenchmark("overhead/bare_xnnpack_add_1x8",
                               dfarm::delegates::BM_OverheadBareXnnpackAdd);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
