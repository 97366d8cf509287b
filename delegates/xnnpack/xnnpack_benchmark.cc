// Google Benchmark: one Interpreter::Invoke() per .tflite model of
// DFARM_MODELS_DIR with the reference kernels ("cpu", GEMM-based convolutions),
// with their plain-loop variants ("plain_loops": CONV_2D, FULLY_CONNECTED,
// BATCH_MATMUL and TRANSPOSE_CONV without the GEMM, as before it) and with the
// xnnpack delegate at 1 and 2 threads, AllocateTensors() outside the timed loop.
// Usage: dfarm_xnnpack_benchmark [benchmark flags]
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "delegates/xnnpack/xnnpack_delegate.h"
#include "runtime/interpreter.h"
#include "runtime/kernels/gemm.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"

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
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
