// Google Benchmark: one TfLiteInterpreterInvoke() per corpus model with
// TensorFlow Lite 2.9's builtin kernels (1 thread) and its own XNNPACK
// delegate at 1 and 2 threads (agent/runner/tflite_c.h),
// to set beside dfarm_xnnpack_benchmark (ours: reference, plain loops,
// xnnpack 1 and 2 threads) on the same machine.
// BM_QuantizedSsd/{uint8,int8}/...: the deep quantized SSD-like network of
// tests/tflite/quantized_ssd.h (96x96 input) on TFLite's builtin kernels
// (ruy) and on ours (the integer GEMM, and the plain loops for CONV_2D and
// FULLY_CONNECTED), 1 and 2 threads: quantized models are not in the corpus.
// Usage: dfarm_tflite_benchmark [benchmark flags]; $DFARM_TFLITE_LIB overrides the library.
// dfarm_tflite_benchmark --write_quantized_ssd=DIR writes the quantized SSD models and exits.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>

#include "agent/runner/tflite_c.h"
#include "runtime/interpreter.h"
#include "runtime/kernels/gemm.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/tflite/quantized_ssd.h"

namespace dfarm::runner::tflite {
namespace {

void BM_TfliteInvoke(benchmark::State& state, const Library* lib, const std::string& path,
                     int threads, int xnnpack_threads) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
  std::string error;
  std::unique_ptr<Interpreter> interpreter = lib->Create(bytes, threads, xnnpack_threads, &error);
  if (interpreter == nullptr) {
    state.SkipWithError(error.substr(0, 200).c_str());
    return;
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < interpreter->num_inputs(); ++i) {
    TensorData t = interpreter->Input(i);
    size_t n = 1;
    for (int32_t d : t.shape) n *= static_cast<size_t>(d);
    if (t.type != CType::kFloat32) continue;
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    std::vector<uint8_t> raw(n * sizeof(float));
    std::memcpy(raw.data(), v.data(), raw.size());
    interpreter->SetInput(i, raw);
  }
  for (auto _ : state) {
    if (!interpreter->Invoke()) {
      state.SkipWithError(interpreter->last_error().c_str());
      return;
    }
  }
}

// The quantized SSD on TFLite's builtin kernels.
void BM_TfliteQuantizedSsd(benchmark::State& state, const Library* lib, bool int8, int threads) {
  const tflite_test::Network net = tflite_test::BuildSsd(int8, 1);
  std::string error;
  std::unique_ptr<Interpreter> interpreter = lib->Create(net.model, threads, 0, &error);
  if (interpreter == nullptr || !interpreter->SetInput(0, net.input)) {
    state.SkipWithError(interpreter == nullptr ? error.c_str() : "cannot set the input");
    return;
  }
  for (auto _ : state) {
    if (!interpreter->Invoke()) {
      state.SkipWithError(interpreter->last_error().c_str());
      return;
    }
  }
}

// The quantized SSD on ours; `plain_loops`: CONV_2D and FULLY_CONNECTED on
// their plain-loop kernels.
void BM_OursQuantizedSsd(benchmark::State& state, bool int8, int threads, bool plain_loops) {
  const tflite_test::Network net = tflite_test::BuildSsd(int8, 1);
  std::unique_ptr<runtime::Model> model;
  runtime::Status status = runtime::Model::FromBuffer("ssd.tflite", net.model, &model);
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  if (plain_loops) {
    resolver.AddBuiltin(dfarm::tflite::BuiltinOperator::CONV_2D,
                        runtime::RegisterConv2DReference());
    resolver.AddBuiltin(dfarm::tflite::BuiltinOperator::FULLY_CONNECTED,
                        runtime::RegisterFullyConnectedReference());
  }
  runtime::InterpreterOptions options;
  options.num_threads = threads;
  std::unique_ptr<runtime::Interpreter> interpreter;
  if (status.ok()) {
    interpreter = std::make_unique<runtime::Interpreter>(*model, resolver, options);
    status = interpreter->AllocateTensors();
  }
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  std::memcpy(interpreter->inputs()[0]->data, net.input.data(), net.input.size());
  for (auto _ : state) {
    status = interpreter->Invoke();
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
  }
}

void RegisterQuantizedSsd(const Library* lib) {
  for (bool int8 : {false, true}) {
    const std::string prefix = std::string("BM_QuantizedSsd/") + (int8 ? "int8" : "uint8");
    for (int threads : {1, 2}) {
      const std::string t = "_threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark((prefix + "/tflite_builtin" + t).c_str(), BM_TfliteQuantizedSsd,
                                   lib, int8, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark((prefix + "/ours" + t).c_str(), BM_OursQuantizedSsd, int8,
                                   threads, false)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark((prefix + "/ours_plain_loops_threads:1").c_str(),
                                 BM_OursQuantizedSsd, int8, 1, true)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace dfarm::runner::tflite

int main(int argc, char** argv) {
  using namespace dfarm::runner::tflite;
  // --write_quantized_ssd=DIR: writes the two quantized SSD networks as
  // DIR/quantized_ssd_{uint8,int8}.tflite (for dfarm-runner and
  // dfarm-tflite-runner) and exits.
  constexpr std::string_view kWriteFlag = "--write_quantized_ssd=";
  if (argc == 2 && std::string_view(argv[1]).starts_with(kWriteFlag)) {
    const std::filesystem::path out_dir(argv[1] + kWriteFlag.size());
    for (bool int8 : {false, true}) {
      const std::filesystem::path path =
          out_dir / (std::string("quantized_ssd_") + (int8 ? "int8" : "uint8") + ".tflite");
      const dfarm::tflite_test::Network net = dfarm::tflite_test::BuildSsd(int8, 1);
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(net.model.data()),
                static_cast<std::streamsize>(net.model.size()));
      if (!out) {
        std::fprintf(stderr, "dfarm_tflite_benchmark: cannot write %s\n", path.c_str());
        return 1;
      }
      std::printf("%s\n", path.c_str());
    }
    return 0;
  }
  std::string error;
  std::unique_ptr<Library> lib = Library::Load(DefaultLibraryPath(DFARM_TFLITE_LIB), &error);
  if (lib == nullptr) {
    std::fprintf(stderr, "dfarm_tflite_benchmark: %s\n", error.c_str());
    return 1;
  }
  std::fprintf(stderr, "TensorFlow Lite %s\n", lib->Version().c_str());
  const std::filesystem::path dir = DFARM_MODELS_DIR;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".tflite") continue;
      // xnnpack threads 0: builtin kernels (TfLiteInterpreterCreate adds no delegate).
      for (int xnnpack_threads : {0, 1, 2}) {
        const int threads = std::max(xnnpack_threads, 1);
        const std::string label =
            entry.path().stem().string() +
            (xnnpack_threads == 0 ? "/tflite_builtin_threads:1"
                                  : "/tflite_xnnpack_threads:" + std::to_string(xnnpack_threads));
        benchmark::RegisterBenchmark(label.c_str(), BM_TfliteInvoke, lib.get(),
                                     entry.path().string(), threads, xnnpack_threads)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  RegisterQuantizedSsd(lib.get());
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
