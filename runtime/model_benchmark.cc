// One Google Benchmark per .tflite model in DFARM_MODELS_DIR (the real-model
// corpus): the time of one Interpreter::Invoke() with the runtime's own CPU
// kernels (convolutions and matrix products through kernels/gemm.h), on 1
// and 2 threads (BM_Invoke/MODEL/threads:N, InterpreterOptions::num_threads),
// after AllocateTensors() outside the timed loop. Counters: arena_bytes
// (folded part included), persistent_bytes, scratch_bytes, invoked_nodes,
// model_bytes.
// BM_Gemm/MxNxK/{simd,simd_packed,generic,simd_packed_cold}/threads:T: one
// Gemm::RunParallel() of the im2col and 1x1 shapes the corpus uses on T
// threads, with the AVX2/FMA kernel where the CPU has it (packing B per
// call, or B packed once with a bias + clamp epilogue, as CONV_2D runs) and
// with Eigen's portable one; counter GFLOPS. simd_packed_cold (the few-row
// shapes): as simd_packed, each iteration on the next of as many packed
// copies of B as fill 64 MiB (more than the caches), so B comes from
// memory, as a filter does in a model's Invoke() (A and C stay cached).
// BM_Depthwise/HxWxC/strideS/threads:T: one 3x3 RunDepthwiseFloat().
// BM_PoolRun/gap_us:G: one ThreadPool::Run() (2 threads, tiny tasks), right
// after the last (G 0) or after G µs on the calling thread alone.
// BM_PlanGreedy/ops:N: the arena plan (PlanGreedy) of a graph of N ops as
// AllocateTensors() plans it: one output per op, most read by the next op,
// every 16th by an op 8 steps on, the graph input live throughout.
// BM_FirstConv/HxWx3/Cout/strideS/threads:T (built with the tests' model
// builder): Invoke() of one float CONV_2D, 3x3 SAME with RELU6, of an HxWx3
// image to Cout channels (a model's first layer).
// BM_InitChain/ops:N (built with the tests' model builder): model load,
// Interpreter and AllocateTensors() of a chain of N float ops (RELU, and ADD
// of the output 8 ops back every 16th op); counter arena_bytes.
// BM_FmaPeak/{zmm,ymm,neon}: one core's multiply-add throughput, 12
// independent chains of fused multiply-adds on registers (no memory), with
// 512-bit (AVX-512F), 256-bit (AVX2+FMA) or 128-bit (arm64) vectors where
// the CPU has them; counter GMACS (float multiply-adds per ns): the ceiling
// that BM_Gemm's and BM_Invoke's figures are fractions of.
// Usage: dfarm_model_benchmark [--models_dir=DIR] [benchmark flags]
// A model that fails to load or allocate is reported as a skipped benchmark
// with its error message.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/interpreter.h"
#include "runtime/kernels/aligned_vector.h"
#include "runtime/kernels/depthwise_conv_float.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/parallel.h"
#include "runtime/memory_planner.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#ifdef DFARM_HAVE_MODEL_BUILDER
#include "tests/model_builder/model_builder.h"
#endif

namespace dfarm::runtime {
namespace {

// Deterministic inputs in [-1, 1) for float tensors, small values otherwise.
void FillInputs(Interpreter& interpreter) {
  uint32_t state = 12345;
  for (Tensor* input : interpreter.inputs()) {
    if (input->dtype == DType::kFloat32) {
      float* data = input->data_as<float>();
      for (size_t i = 0; i < input->bytes / sizeof(float); ++i) {
        state = state * 1664525u + 1013904223u;
        data[i] = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
      }
    } else {
      std::memset(input->data, 0, input->bytes);
    }
  }
}

void BM_Invoke(benchmark::State& state, const std::string& path) {
  std::unique_ptr<Model> model;
  Status status = Model::Load(path, &model);
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  InterpreterOptions options;
  options.num_threads = static_cast<int>(state.range(0));
  Interpreter interpreter(*model, resolver, options);
  status = interpreter.AllocateTensors();
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  FillInputs(interpreter);
  for (auto _ : state) {
    status = interpreter.Invoke();
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  state.counters["arena_bytes"] = static_cast<double>(interpreter.arena_bytes());
  state.counters["persistent_bytes"] = static_cast<double>(interpreter.persistent_bytes());
  state.counters["scratch_bytes"] = static_cast<double>(interpreter.scratch_bytes());
  state.counters["invoked_nodes"] = static_cast<double>(interpreter.invoked_nodes_size());
  state.counters["model_bytes"] = static_cast<double>(model->size_bytes());
}

// Registers one benchmark per *.tflite in `dir`, in name order; returns how many.
int RegisterModels(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> models;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".tflite") models.push_back(entry.path());
  }
  std::sort(models.begin(), models.end());
  for (const auto& path : models) {
    benchmark::RegisterBenchmark(("BM_Invoke/" + path.stem().string()).c_str(), BM_Invoke,
                                 path.string())
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return static_cast<int>(models.size());
}

}  // namespace
}  // namespace dfarm::runtime

namespace dfarm::runtime {
namespace {

// How BM_Gemm runs a product: Eigen's kernel, ours packing B on every call,
// or ours with B packed once and a bias + clamp epilogue (as CONV_2D runs).
enum class GemmMode { kGeneric, kSimd, kSimdPacked, kSimdPackedCold };

// Bytes the packed copies of BM_Gemm's simd_packed_cold rotate through.
constexpr size_t kColdBytes = size_t{64} << 20;

void BM_Gemm(benchmark::State& state, int64_t m, int64_t n, int64_t k, GemmMode mode) {
  // A [m, k] row-major times the filter layout [n, k] (read transposed); A
  // and C start on a cache line, as the arena's tensors do.
  AlignedFloats a(m * k, 0.5f), c(m * n, 0.0f);
  std::vector<float> b(n * k, 0.25f), bias(n, 0.125f);
  const bool packed = mode == GemmMode::kSimdPacked || mode == GemmMode::kSimdPackedCold;
  const size_t copies = mode == GemmMode::kSimdPackedCold
                            ? std::max<size_t>(2, kColdBytes / (b.size() * sizeof(float)))
                            : 1;
  std::vector<Gemm> gemms(copies);
  for (Gemm& gemm : gemms) {
    gemm.set_generic_only(mode == GemmMode::kGeneric);
    gemm.Plan(m, n, k);
    if (packed) gemm.SetConstantB({b.data(), k, true});
  }
  GemmEpilogue epilogue;
  if (packed) epilogue = {bias.data(), 0.0f, 6.0f};
  const Gemm& gemm = gemms[0];
  // One 64-byte aligned workspace part per thread.
  const int threads = static_cast<int>(state.range(0));
  const size_t stride = (gemm.workspace_bytes() + 63) / 64 * 64;
  std::vector<std::byte> workspace(stride * threads + 64);
  auto* ws = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(workspace.data()) + 63) &
                                          ~uintptr_t{63});
  ThreadPool pool(threads);
  ExecutionContext context;
  context.threadpool = threads > 1 ? &pool : nullptr;
  context.num_threads = threads;
  context.scratch = ws;
  context.scratch_stride = stride;
  size_t next = 0;
  for (auto _ : state) {
    gemms[next].RunParallel(m, n, k, {a.data(), k, false}, {b.data(), k, true}, c.data(), n,
                            epilogue, &context, 0);
    next = next + 1 < copies ? next + 1 : 0;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void RegisterGemms() {
  // im2col and 1x1 shapes of the corpus (face_detection: 96x96 3x3x3 -> 32,
  // 96x96 8 -> 32, 48x48 64 -> 48, 6x6 96 -> 384; hand_landmark_full's 1x1:
  // 56x56 24 -> 144 and back, 28x28 40 -> 240, 7x7 192 <-> 1152, 14x14
  // 112 <-> 672), and a classifier's GEMV.
  const int64_t shapes[][3] = {{910, 32, 288},  {4096, 64, 64}, {1024, 128, 1152}, {1, 1000, 1280},
                               {9216, 32, 27},  {9216, 32, 8},  {2304, 48, 64},    {36, 384, 96},
                               {2304, 16, 48},  {144, 128, 96}, {36, 96, 384},     {3136, 144, 24},
                               {3136, 24, 144}, {784, 240, 40}, {49, 1152, 192},   {49, 192, 1152},
                               {196, 672, 112}, {196, 112, 672}};
  const std::pair<GemmMode, const char*> modes[] = {{GemmMode::kSimd, "simd"},
                                                    {GemmMode::kSimdPacked, "simd_packed"},
                                                    {GemmMode::kGeneric, "generic"}};
  auto add = [](const int64_t* s, GemmMode mode, const char* label) {
    const std::string name = "BM_Gemm/" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" +
                             std::to_string(s[2]) + "/" + label;
    benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, s[0], s[1], s[2], mode)
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
  };
  for (const auto& s : shapes) {
    for (const auto& [mode, label] : modes) add(s, mode, label);
    // The filter from memory where few rows share it (7x7 and 14x14 pixels),
    // and, for contrast, where many do (56x56).
    if ((s[0] > 1 && s[0] <= 196) || (s[0] == 3136 && s[2] == 24)) {
      add(s, GemmMode::kSimdPackedCold, "simd_packed_cold");
    }
  }
}

// One KxK (3 or 5) SAME depthwise conv (RunDepthwiseFloat) of an HxWxC input
// at `stride`, on 1 or 2 threads.
void BM_Depthwise(benchmark::State& state, int h, int w, int c, int stride, int k) {
  DepthwiseFloatParams p;
  p.batches = 1, p.in_h = h, p.in_w = w, p.in_c = c, p.out_c = c;
  p.out_h = (h + stride - 1) / stride, p.out_w = (w + stride - 1) / stride;
  p.kernel_h = p.kernel_w = k, p.stride_h = p.stride_w = stride;
  // SAME: the padding before is half the total, rounded down.
  const int pad_h = std::max(0, (p.out_h - 1) * stride + k - h);
  const int pad_w = std::max(0, (p.out_w - 1) * stride + k - w);
  p.pad_top = pad_h / 2, p.pad_left = pad_w / 2;
  p.act_min = 0.0f, p.act_max = 6.0f;
  const DepthwiseFloatPlan plan = PlanDepthwiseFloat(p);
  if (!plan.covered()) {
    state.SkipWithError("not covered by the fast kernel");
    return;
  }
  // On cache lines, as the arena's tensors and the dequantized weights are.
  AlignedFloats in(static_cast<size_t>(h) * w * c, 0.5f), filter(k * k * c, 0.25f), bias(c, 0.125f),
      out(static_cast<size_t>(p.out_h) * p.out_w * c);
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  ExecutionContext context;
  context.threadpool = threads > 1 ? &pool : nullptr;
  context.num_threads = threads;
  for (auto _ : state) {
    RunDepthwiseFloat(plan, in.data(), filter.data(), bias.data(), out.data(), &context);
    benchmark::DoNotOptimize(out.data());
  }
}

void RegisterDepthwise() {
  // face_detection_full_range's: 96x96 at 32 and 8 channels, 48x48x48, and
  // the late 12x12 and 6x6 layers.
  // hand_landmark_full's: 5x5 at 7x7x1152 and 14x14x672 stride 2, 3x3 at
  // 14x14x480 and 28x28x240 stride 2; hand_landmark_lite's 5x5 at 56x56x96
  // stride 2 and 28x28x144.
  const int shapes[][5] = {{96, 96, 32, 1, 3},  {96, 96, 32, 2, 3},  {96, 96, 8, 1, 3},
                           {48, 48, 48, 1, 3},  {12, 12, 128, 1, 3}, {6, 6, 128, 1, 3},
                           {6, 6, 384, 1, 3},   {12, 12, 48, 1, 3},  {7, 7, 1152, 1, 5},
                           {14, 14, 672, 2, 5}, {14, 14, 480, 1, 3}, {28, 28, 240, 2, 3},
                           {56, 56, 96, 2, 5},  {28, 28, 144, 1, 5}};
  for (const auto& s : shapes) {
    const std::string name =
        "BM_Depthwise/" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" +
        std::to_string(s[2]) + "/stride" + std::to_string(s[3]) +
        (s[4] == 3 ? "" : "/" + std::to_string(s[4]) + "x" + std::to_string(s[4]));
    benchmark::RegisterBenchmark(name.c_str(), BM_Depthwise, s[0], s[1], s[2], s[3], s[4])
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
  }
}

// The cost of one parallel region: ThreadPool::Run over 2 threads x
// kTasksPerThread tiny tasks, back to back (`gap_us` 0: the worker is
// spinning) or after `gap_us` of work on the calling thread alone (as
// between two parallel ops; past the worker's spin it sleeps).
void BM_PoolRun(benchmark::State& state) {
  const auto gap = std::chrono::microseconds(state.range(0));
  ThreadPool pool(2);
  std::atomic<int64_t> sink{0};
  auto task = [](void* arg, size_t t, int) {
    static_cast<std::atomic<int64_t>*>(arg)->fetch_add(static_cast<int64_t>(t) + 1,
                                                       std::memory_order_relaxed);
  };
  for (auto _ : state) {
    if (gap.count() > 0) {
      const auto until = std::chrono::steady_clock::now() + gap;
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    const auto start = std::chrono::steady_clock::now();
    pool.Run(2 * kTasksPerThread, task, &sink);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_PoolRun)->ArgName("gap_us")->Arg(0)->Arg(50)->Arg(500)->UseManualTime();

void BM_PlanGreedy(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  std::vector<BufferRequest> requests;
  requests.push_back({150528, 0, ops});  // the input
  uint32_t seed = 1;
  for (int i = 0; i < ops; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const size_t size = size_t{4096} << (seed >> 29);  // 4 KiB .. 512 KiB
    requests.push_back({size, i, i % 16 == 0 ? std::min(ops, i + 8) : i + 1});
  }
  std::vector<size_t> offsets;
  size_t arena = 0;
  for (auto _ : state) {
    arena = PlanGreedy(requests, 64, &offsets);
    benchmark::DoNotOptimize(offsets.data());
  }
  state.counters["arena_bytes"] = static_cast<double>(arena);
}
#ifdef DFARM_HAVE_MODEL_BUILDER
std::vector<uint8_t> ChainModel(int ops) {
  namespace tfl = ::dfarm::tflite;
  testing::ModelBuilder b;
  std::vector<int> outs = {b.AddTensor(tfl::TensorType::FLOAT32, {1, 64})};
  for (int i = 0; i < ops; ++i) {
    const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 64});
    if (i % 16 == 15) {
      b.AddAdd(outs.back(), outs[outs.size() - 8], out);
    } else {
      b.AddUnary(tfl::BuiltinOperator::RELU, outs.back(), out);
    }
    outs.push_back(out);
  }
  b.SetInputs({outs.front()});
  b.SetOutputs({outs.back()});
  return b.Build();
}

// One 3x3 SAME CONV_2D (RELU6, constant filter and bias) of an h x w x 3
// input to `out_c` channels at `stride`.
std::vector<uint8_t> FirstConvModel(int h, int w, int out_c, int stride) {
  namespace tfl = ::dfarm::tflite;
  testing::ModelBuilder b;
  const int out_h = (h + stride - 1) / stride, out_w = (w + stride - 1) / stride;
  std::vector<float> filter(static_cast<size_t>(out_c) * 27), bias(out_c);
  for (size_t i = 0; i < filter.size(); ++i) filter[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
  for (int i = 0; i < out_c; ++i) bias[i] = 0.05f * static_cast<float>(i % 7);
  const int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, h, w, 3});
  const int f = b.AddConstFloat32({out_c, 3, 3, 3}, filter);
  const int bi = b.AddConstFloat32({out_c}, bias);
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, out_h, out_w, out_c});
  testing::Conv2DParams params;
  params.padding = tfl::Padding::SAME;
  params.stride_h = params.stride_w = stride;
  params.activation = tfl::ActivationFunctionType::RELU6;
  b.AddConv2D(in, f, bi, out, params);
  b.SetInputs({in});
  b.SetOutputs({out});
  return b.Build();
}

void BM_FirstConv(benchmark::State& state, int h, int w, int out_c, int stride) {
  std::unique_ptr<Model> model;
  Status status = Model::FromBuffer("first_conv", FirstConvModel(h, w, out_c, stride), &model);
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  InterpreterOptions options;
  options.num_threads = static_cast<int>(state.range(0));
  std::unique_ptr<Interpreter> interpreter;
  if (status.ok()) {
    interpreter = std::make_unique<Interpreter>(*model, resolver, options);
    status = interpreter->AllocateTensors();
  }
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  FillInputs(*interpreter);
  for (auto _ : state) {
    status = interpreter->Invoke();
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
}

// hand_landmark's 224x224 and face detection's 128x128 and 192x192 first
// layers, selfie segmentation's 256x256 one.
void RegisterFirstConvs() {
  const int shapes[][4] = {{224, 224, 24, 2}, {224, 224, 32, 2}, {128, 128, 24, 2},
                           {192, 192, 24, 2}, {256, 256, 16, 2}, {64, 64, 24, 1}};
  for (const auto& s : shapes) {
    const std::string name = "BM_FirstConv/" + std::to_string(s[0]) + "x" + std::to_string(s[1]) +
                             "x3/" + std::to_string(s[2]) + "/stride" + std::to_string(s[3]);
    benchmark::RegisterBenchmark(name.c_str(), BM_FirstConv, s[0], s[1], s[2], s[3])
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
  }
}

void BM_InitChain(benchmark::State& state) {
  const std::vector<uint8_t> bytes = ChainModel(static_cast<int>(state.range(0)));
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  size_t arena = 0;
  for (auto _ : state) {
    std::unique_ptr<Model> model;
    Status status = Model::FromBuffer("chain", bytes, &model);
    if (status.ok()) {
      Interpreter interpreter(*model, resolver, InterpreterOptions{});
      status = interpreter.AllocateTensors();
      arena = interpreter.arena_bytes();
    }
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
  }
  state.counters["arena_bytes"] = static_cast<double>(arena);
}
BENCHMARK(BM_InitChain)
    ->ArgName("ops")
    ->Arg(1000)
    ->Arg(8000)
    ->Arg(32000)
    ->Unit(benchmark::kMillisecond);
#endif

typedef float FmaVec16 __attribute__((vector_size(64)));
typedef float FmaVec8 __attribute__((vector_size(32)));
typedef float FmaVec4 __attribute__((vector_size(16)));

// Independent chains: enough to cover 2 pipes x 4 cycles of latency, few
// enough to stay in the 16 registers of AVX2 with m and c.
constexpr int kChains = 12;

// kChains chains of acc = acc * m + c on vectors V, `iters` steps each;
// returns a sum the compiler cannot drop. Inlined into each caller, so that
// it is compiled for the caller's target.

template <typename V>
inline __attribute__((always_inline)) float FmaChains(int64_t iters) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  V acc[kChains];
  for (int i = 0; i < kChains; ++i) {
    for (int l = 0; l < kLanes; ++l) acc[i][l] = 1.0f + 1e-3f * static_cast<float>(i);
  }
  V m, c;
  for (int l = 0; l < kLanes; ++l) m[l] = 0.999999f, c[l] = 1e-7f;
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * m + c;
  }
  float sum = 0.0f;
  for (int i = 0; i < kChains; ++i) sum += acc[i][0];
  return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"), noinline)) float FmaChainsZmm(int64_t iters) {
  return FmaChains<FmaVec16>(iters);
}
__attribute__((target("avx2,fma"), noinline)) float FmaChainsYmm(int64_t iters) {
  return FmaChains<FmaVec8>(iters);
}
#elif defined(__aarch64__)
__attribute__((noinline)) float FmaChainsNeon(int64_t iters) { return FmaChains<FmaVec4>(iters); }
#endif

void BM_FmaPeak(benchmark::State& state, float (*chains)(int64_t), int lanes, bool supported) {
  if (!supported) {
    state.SkipWithError("the CPU lacks these vectors");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  float sink = 0.0f;
  for (auto _ : state) sink += chains(kIters);
  benchmark::DoNotOptimize(sink);
  state.counters["GMACS"] = benchmark::Counter(static_cast<double>(kIters) * kChains * lanes * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterFmaPeak() {
#if defined(__x86_64__) && defined(__GNUC__)
  benchmark::RegisterBenchmark("BM_FmaPeak/zmm", BM_FmaPeak, &FmaChainsZmm, 16,
                               __builtin_cpu_supports("avx512f"));
  benchmark::RegisterBenchmark("BM_FmaPeak/ymm", BM_FmaPeak, &FmaChainsYmm, 8,
                               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#elif defined(__aarch64__)
  benchmark::RegisterBenchmark("BM_FmaPeak/neon", BM_FmaPeak, &FmaChainsNeon, 4, true);
#endif
}

BENCHMARK(BM_PlanGreedy)
    ->ArgName("ops")
    ->Arg(1000)
    ->Arg(8000)
    ->Arg(32000)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dfarm::runtime

int main(int argc, char** argv) {
  std::string dir = DFARM_MODELS_DIR;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    constexpr std::string_view kFlag = "--models_dir=";
    if (std::string_view(argv[i]).starts_with(kFlag)) {
      dir = argv[i] + kFlag.size();
    } else {
      args.push_back(argv[i]);
    }
  }
  int args_size = static_cast<int>(args.size());
  benchmark::Initialize(&args_size, args.data());
  if (benchmark::ReportUnrecognizedArguments(args_size, args.data())) return 1;
  if (dfarm::runtime::RegisterModels(dir) == 0) {
    std::fprintf(stderr, "no .tflite models in '%s' (scripts/setup.sh fetches them)\n",
                 dir.c_str());
    return 1;
  }
  dfarm::runtime::RegisterGemms();
  dfarm::runtime::RegisterDepthwise();
  dfarm::runtime::RegisterFmaPeak();
#ifdef DFARM_HAVE_MODEL_BUILDER
  dfarm::runtime::RegisterFirstConvs();
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
