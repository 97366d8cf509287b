// Google Benchmark: one TfLiteInterpreterInvoke() per corpus model with
// TensorFlow Lite 2.9's builtin kernels (1 thread) and its own XNNPACK
// delegate at 1 and 2 threads (agent/runner/tflite_c.h),
// to set beside dfarm_xnnpack_benchmark (ours: reference, plain loops,
// xnnpack 1 and 2 threads) on the same machine.
// Usage: dfarm_tflite_benchmark [benchmark flags]; $DFARM_TFLITE_LIB overrides the library.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "agent/runner/tflite_c.h"

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

}  // namespace
}  // namespace dfarm::runner::tflite

int main(int argc, char** argv) {
  using namespace dfarm::runner::tflite;
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
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
