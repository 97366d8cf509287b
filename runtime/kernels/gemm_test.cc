// The GEMM and the kernels built on it (CONV_2D, FULLY_CONNECTED,
// BATCH_MATMUL, TRANSPOSE_CONV) against plain loops: Gemm against a double
// accumulation written here, each op against its reference kernel on random
// shapes, and Invoke() without heap allocation.
#include "runtime/kernels/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/interpreter.h"
#include "runtime/kernels/aligned_vector.h"
#include "runtime/kernels/parallel.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

// Counts malloc() calls while g_count_mallocs is set (glibc; not under a
// sanitizer, which owns malloc itself). Eigen allocates through malloc and
// operator new ends in it, so this sees every heap allocation.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define DFARM_SANITIZED 1
#endif
#endif
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && \
    !defined(DFARM_SANITIZED)
#define DFARM_COUNT_MALLOCS 1
namespace {
bool g_count_mallocs = false;
long g_mallocs = 0;
void* volatile g_sink = nullptr;
}  // namespace
extern "C" void* __libc_malloc(size_t size);
extern "C" void* malloc(size_t size) {
  if (g_count_mallocs) ++g_mallocs;
  return __libc_malloc(size);
}
#endif

namespace dfarm::testing {
namespace {

using runtime::AlignedFloats;
using runtime::GemmOperand;
using runtime::kCacheLineBytes;
using Act = tfl::ActivationFunctionType;

// A 64-byte aligned workspace for `gemm` as planned.
struct Workspace {
  explicit Workspace(const runtime::Gemm& gemm)
      : block(static_cast<std::byte*>(std::aligned_alloc(64, gemm.workspace_bytes() + 64))) {}
  ~Workspace() { std::free(block); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  std::byte* block;
};

// `gemm`'s workspace as planned for each of `pool`'s threads, and the
// context that lends it to RunParallel(); thread 0's part serves Run().
class PoolScratch {
 public:
  PoolScratch(const runtime::ThreadPool& pool, const runtime::Gemm& gemm)
      : block_(static_cast<std::byte*>(
                   std::aligned_alloc(64, static_cast<size_t>(pool.threads()) * Stride(gemm) + 64)),
               &std::free) {
    context_.threadpool = &pool;
    context_.num_threads = pool.threads();
    context_.scratch = block_.get();
    context_.scratch_stride = Stride(gemm);
  }
  std::byte* get() const { return block_.get(); }
  const runtime::ExecutionContext* context() const { return &context_; }

 private:
  static size_t Stride(const runtime::Gemm& gemm) {
    return (gemm.workspace_bytes() + 63) & ~size_t{63};
  }
  std::unique_ptr<std::byte, decltype(&std::free)> block_;
  runtime::ExecutionContext context_;
};

std::vector<float> RandomValues(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// |a - b| within 1e-5 of `scale` (the sum of |products| behind the value).
void ExpectClose(const std::vector<float>& actual, const std::vector<float>& expected,
                 const std::vector<float>& scale, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 1e-5 * std::max(1.0f, scale[i])) << what << " at " << i;
  }
}

// The packed filters (Gemm's constant B, the 3-channel conv's) are
// AlignedFloats: every size, assigned again, copied and moved, starts on a
// cache line and keeps its values.
TEST(GemmTest, AlignedFloatsStartOnACacheLine) {
  auto aligned = [](const AlignedFloats& v) {
    return reinterpret_cast<uintptr_t>(v.data()) % kCacheLineBytes == 0;
  };
  std::vector<AlignedFloats> kept;  // so that each allocation is a new one
  for (size_t n : {1, 3, 4, 15, 16, 17, 100, 1000, 4097, 100000}) {
    AlignedFloats v(n, 1.0f);
    EXPECT_TRUE(aligned(v)) << n;
    EXPECT_EQ(v.size(), n);
    v.assign(n * 3 + 1, 2.0f);
    EXPECT_TRUE(aligned(v)) << n;
    v[n] = 3.0f;
    AlignedFloats copy = v;
    EXPECT_TRUE(aligned(copy)) << n;
    EXPECT_EQ(copy, v);
    EXPECT_EQ(copy[n], 3.0f);
    kept.push_back(std::move(copy));
    EXPECT_TRUE(aligned(kept.back())) << n;
    EXPECT_EQ(kept.back(), v);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved from
  }
}

TEST(GemmTest, MatchesDoubleSumsForEveryLayout) {
  std::mt19937 rng(7);
  struct Dims {
    int64_t m, n, k;
  };
  const Dims dims[] = {{1, 1, 1},    {1, 37, 19},   {5, 1, 8},    {3, 4, 5},
                       {17, 23, 31}, {64, 48, 300}, {300, 65, 9}, {2, 700, 70}};
  for (const Dims& d : dims) {
    for (int variant = 0; variant < 8; ++variant) {
      const int layout = variant & 3;
      const bool generic = variant & 4;
      const bool ta = layout & 1, tb = layout & 2;
      const int64_t lda = (ta ? d.m : d.k) + 3, ldb = (tb ? d.k : d.n) + 2, ldc = d.n + 1;
      std::vector<float> a = RandomValues(rng, (ta ? d.k : d.m) * lda);
      std::vector<float> b = RandomValues(rng, (tb ? d.n : d.k) * ldb);
      std::vector<float> c = RandomValues(rng, d.m * ldc);
      std::vector<float> expected = c, scale(c.size(), 0.0f);
      for (int64_t i = 0; i < d.m; ++i) {
        for (int64_t j = 0; j < d.n; ++j) {
          double sum = c[i * ldc + j], abs_sum = std::fabs(c[i * ldc + j]);
          for (int64_t p = 0; p < d.k; ++p) {
            const double x = ta ? a[p * lda + i] : a[i * lda + p];
            const double y = tb ? b[j * ldb + p] : b[p * ldb + j];
            sum += x * y;
            abs_sum += std::fabs(x * y);
          }
          expected[i * ldc + j] = static_cast<float>(sum);
          scale[i * ldc + j] = static_cast<float>(abs_sum);
        }
      }
      runtime::Gemm gemm;
      gemm.set_generic_only(generic);
      gemm.Plan(d.m, d.n, d.k);
      Workspace ws(gemm);
      gemm.Run(d.m, d.n, d.k, {a.data(), lda, ta}, {b.data(), ldb, tb}, c.data(), ldc, ws.block);
      const std::string what = std::to_string(d.m) + "x" + std::to_string(d.n) + "x" +
                               std::to_string(d.k) + " layout " + std::to_string(layout) +
                               (generic ? " (generic kernel)" : "");
      // Padding columns of C stay untouched: they equal `expected` there too.
      ExpectClose(c, expected, scale, what);
    }
  }
}

TEST(GemmTest, SmallerProductThanPlanned) {
  // Plan() for the largest product, Run() on a smaller one (the last chunk).
  std::mt19937 rng(3);
  for (bool generic : {false, true}) {
    runtime::Gemm gemm;
    gemm.set_generic_only(generic);
    gemm.Plan(100, 40, 50);
    std::vector<float> a = RandomValues(rng, 7 * 50), b = RandomValues(rng, 50 * 40);
    std::vector<float> c(7 * 40, 0.0f), expected(7 * 40, 0.0f);
    Workspace ws(gemm);
    gemm.Run(7, 40, 50, {a.data(), 50, false}, {b.data(), 40, false}, c.data(), 40, ws.block);
    runtime::ReferenceGemm(7, 40, 50, {a.data(), 50, false}, {b.data(), 40, false}, expected.data(),
                           40);
    for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], expected[i], 1e-4) << i;
  }
}

TEST(GemmTest, HandComputed) {
  // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50], added to C = 1.
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[] = {1, 1, 1, 1};
  runtime::Gemm gemm;
  gemm.Plan(2, 2, 2);
  Workspace ws(gemm);
  gemm.Run(2, 2, 2, {a, 2, false}, {b, 2, false}, c, 2, ws.block);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{20, 23, 44, 51}));
  // A^T x B^T with the same buffers: [1 3; 2 4] x [5 7; 6 8] = [23 31; 34 46].
  float d[] = {0, 0, 0, 0};
  gemm.Run(2, 2, 2, {a, 2, true}, {b, 2, true}, d, 2, ws.block);
  EXPECT_EQ(std::vector<float>(d, d + 4), (std::vector<float>{23, 31, 34, 46}));
}

TEST(GemmTest, RunParallelMatchesRunBitForBit) {
  // Rows split (m large), columns split (m small), GEMV columns split (m 1);
  // both kernels, on 3 threads (or 1 where the build has no thread pool).
  runtime::ThreadPool pool(3);
  std::mt19937 rng(5);
  struct Dims {
    int64_t m, n, k;
  };
  for (const Dims& d :
       std::vector<Dims>{{300, 40, 50}, {7, 200, 64}, {1, 500, 300}, {150, 33, 700}}) {
    for (bool generic : {false, true}) {
      runtime::Gemm gemm;
      gemm.set_generic_only(generic);
      gemm.Plan(d.m, d.n, d.k);
      const PoolScratch scratch(pool, gemm);
      std::vector<float> a = RandomValues(rng, d.m * d.k), b = RandomValues(rng, d.n * d.k);
      std::vector<float> c1 = RandomValues(rng, d.m * d.n), c3 = c1;
      gemm.Run(d.m, d.n, d.k, {a.data(), d.k, false}, {b.data(), d.k, true}, c1.data(), d.n,
               scratch.get());
      gemm.RunParallel(d.m, d.n, d.k, {a.data(), d.k, false}, {b.data(), d.k, true}, c3.data(), d.n,
                       scratch.context(), 0);
      EXPECT_EQ(std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float)), 0)
          << d.m << "x" << d.n << "x" << d.k << (generic ? " generic" : " simd");
    }
  }
}

TEST(GemmTest, EpilogueAndConstantBMatchPlainSums) {
  // C = clamp(bias + A·B) with B packed once (SetConstantB), against the
  // plain sums; narrow and masked column tails, several depth blocks; last
  // row tiles of 1 to 6 rows and of 8 (AVX-512's two partial-tile kernels);
  // the 3-thread product (rows or columns split) gives Run()'s bits.
  runtime::ThreadPool pool(3);
  std::mt19937 rng(9);
  struct Dims {
    int64_t m, n, k;
  };
  for (const Dims& d : std::vector<Dims>{{97, 24, 75},
                                         {20, 40, 30},
                                         {64, 5, 9},
                                         {13, 40, 600},
                                         {4, 96, 96},
                                         {300, 28, 24},
                                         {1, 20, 30},
                                         {150, 33, 700}}) {
    for (bool generic : {false, true}) {
      const std::string what = std::to_string(d.m) + "x" + std::to_string(d.n) + "x" +
                               std::to_string(d.k) + (generic ? " generic" : " simd");
      runtime::Gemm gemm;
      gemm.set_generic_only(generic);
      gemm.Plan(d.m, d.n, d.k);
      std::vector<float> a = RandomValues(rng, d.m * d.k), b = RandomValues(rng, d.n * d.k);
      std::vector<float> bias = RandomValues(rng, d.n);
      const GemmOperand b_op{b.data(), d.k, true};
      gemm.SetConstantB(b_op);
      const runtime::GemmEpilogue epilogue{bias.data(), -0.5f, 2.0f};
      const PoolScratch scratch(pool, gemm);
      // C's old values must not be read when there is a bias.
      std::vector<float> c1(d.m * d.n, std::numeric_limits<float>::quiet_NaN()), c3 = c1;
      gemm.Run(d.m, d.n, d.k, {a.data(), d.k, false}, b_op, c1.data(), d.n, epilogue,
               scratch.get());
      std::vector<float> expected(d.m * d.n, 0.0f), scale(d.m * d.n, 0.0f);
      for (int64_t i = 0; i < d.m; ++i) {
        for (int64_t j = 0; j < d.n; ++j) {
          double sum = bias[j], abs_sum = std::fabs(bias[j]);
          for (int64_t p = 0; p < d.k; ++p) {
            sum += static_cast<double>(a[i * d.k + p]) * b[j * d.k + p];
            abs_sum += std::fabs(static_cast<double>(a[i * d.k + p]) * b[j * d.k + p]);
          }
          expected[i * d.n + j] = std::clamp(static_cast<float>(sum), -0.5f, 2.0f);
          scale[i * d.n + j] = static_cast<float>(abs_sum);
        }
      }
      ExpectClose(c1, expected, scale, what);
      // The AVX2 kernel where AVX-512 would run: the same bits.
      runtime::Gemm avx2;
      avx2.set_generic_only(generic);
      avx2.set_avx512(false);
      avx2.Plan(d.m, d.n, d.k);
      avx2.SetConstantB(b_op);
      std::vector<float> c2(d.m * d.n, std::numeric_limits<float>::quiet_NaN());
      avx2.Run(d.m, d.n, d.k, {a.data(), d.k, false}, b_op, c2.data(), d.n, epilogue,
               scratch.get());
      EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0)
          << what << ": AVX2 and AVX-512 kernels differ";
      gemm.RunParallel(d.m, d.n, d.k, {a.data(), d.k, false}, b_op, c3.data(), d.n, epilogue,
                       scratch.context(), 0);
      EXPECT_EQ(std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float)), 0) << what;
    }
  }
}

// One single-op model run by the default kernel and by the reference one.
struct OpRun {
  std::unique_ptr<runtime::Model> model;
  runtime::OpResolver resolver;
  std::unique_ptr<runtime::Interpreter> interpreter;
};

std::unique_ptr<OpRun> Load(const ModelBuilder& b, tfl::BuiltinOperator code,
                            const runtime::OpRegistration* reference, int threads = 1) {
  auto run = std::make_unique<OpRun>();
  runtime::Status status = runtime::Model::FromBuffer("test.tflite", b.Build(), &run->model);
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return nullptr;
  run->resolver.AddAllReferenceOps();
  if (reference != nullptr) run->resolver.AddBuiltin(code, reference);
  runtime::InterpreterOptions options;
  options.num_threads = threads;
  run->interpreter = std::make_unique<runtime::Interpreter>(*run->model, run->resolver, options);
  status = run->interpreter->AllocateTensors();
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return nullptr;
  return run;
}

std::vector<float> Invoke(OpRun& run, const std::vector<std::vector<float>>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    runtime::Tensor* t = run.interpreter->inputs()[i];
    EXPECT_EQ(t->bytes, inputs[i].size() * sizeof(float));
    std::copy(inputs[i].begin(), inputs[i].end(), t->data_as<float>());
  }
  runtime::Status status = run.interpreter->Invoke();
  EXPECT_TRUE(status.ok()) << status.message();
  const runtime::Tensor* out = run.interpreter->outputs()[0];
  return std::vector<float>(out->data_as<float>(), out->data_as<float>() + out->bytes / 4);
}

// Runs `b` (whose inputs get random values) with both kernels and compares:
// within 1e-5 relative to the largest output (sums of up to a few thousand
// products, so the summation order may differ). The default kernel on 3
// threads must give the 1-thread result bit for bit.
void ExpectSameAsReference(const ModelBuilder& b, tfl::BuiltinOperator code,
                           const runtime::OpRegistration* reference, std::mt19937& rng,
                           const std::string& what) {
  std::unique_ptr<OpRun> fast = Load(b, code, nullptr);
  std::unique_ptr<OpRun> slow = Load(b, code, reference);
  std::unique_ptr<OpRun> threaded = Load(b, code, nullptr, 3);
  ASSERT_TRUE(fast && slow && threaded) << what;
  std::vector<std::vector<float>> inputs;
  for (runtime::Tensor* t : fast->interpreter->inputs()) {
    inputs.push_back(RandomValues(rng, t->bytes / sizeof(float)));
  }
  std::vector<float> expected = Invoke(*slow, inputs);
  std::vector<float> actual = Invoke(*fast, inputs);
  std::vector<float> three_threads = Invoke(*threaded, inputs);
  ASSERT_EQ(actual.size(), expected.size()) << what;
  ASSERT_EQ(three_threads.size(), actual.size()) << what;
  EXPECT_EQ(std::memcmp(three_threads.data(), actual.data(), actual.size() * sizeof(float)), 0)
      << what << ": 3 threads differ from 1";
  ASSERT_FALSE(actual.empty()) << what;
  float largest = 0.0f;
  for (float v : expected) largest = std::max(largest, std::fabs(v));
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 1e-5f * std::max(1.0f, largest)) << what << " at " << i;
  }
}

// TakeConstantB() moves a packed B to a Gemm planned again with the same n
// and k (other rows): the product then reads no B operand data and gives the
// bits of packing it afresh; a plan of another n or k refuses it.
TEST(GemmTest, TakeConstantBMovesThePackedCopy) {
  std::mt19937 rng(4);
  const int64_t n = 40, k = 30;
  std::vector<float> a = RandomValues(rng, 50 * k), b = RandomValues(rng, n * k);
  const GemmOperand b_op{b.data(), k, true};
  runtime::Gemm first;
  first.Plan(50, n, k);
  first.SetConstantB(b_op);
  const bool packs = first.has_constant_b();
  runtime::Gemm other;
  other.Plan(20, n + 1, k);
  EXPECT_FALSE(other.TakeConstantB(first));
  EXPECT_EQ(first.has_constant_b(), packs);
  runtime::Gemm taken;
  taken.Plan(20, n, k);
  ASSERT_EQ(taken.TakeConstantB(first), packs);
  EXPECT_FALSE(first.has_constant_b());
  if (!packs) GTEST_SKIP() << "this CPU's GEMM packs no constant B";
  runtime::Gemm fresh;
  fresh.Plan(20, n, k);
  fresh.SetConstantB(b_op);
  const Workspace ws_taken(taken), ws_fresh(fresh);
  std::vector<float> c_taken(20 * n, 0.0f), c_fresh = c_taken;
  taken.Run(20, n, k, {a.data(), k, false}, {nullptr, k, true}, c_taken.data(), n, ws_taken.block);
  fresh.Run(20, n, k, {a.data(), k, false}, b_op, c_fresh.data(), n, ws_fresh.block);
  EXPECT_EQ(c_taken, c_fresh);
}

TEST(GemmTest, AddendGivesTheBitsOfASeparateAdd) {
  // clamp(bias + A·B + addend) in one product (a folded ADD) against the
  // product without clamp, then the ADD and the clamp: every kernel (AVX-512,
  // AVX2, generic), the addend over all columns or some (0.0f added to the
  // rest), with a wider row stride; 3 threads (rows or columns split) too.
  runtime::ThreadPool pool(3);
  std::mt19937 rng(21);
  struct Dims {
    int64_t m, n, k;
  };
  for (const Dims& d : std::vector<Dims>{{97, 24, 75},
                                         {36, 96, 384},
                                         {13, 40, 600},
                                         {300, 28, 24},
                                         {1, 20, 30},
                                         {150, 33, 700}}) {
    for (int kernel = 0; kernel < 3; ++kernel) {
      for (bool partial : {false, true}) {
        const std::string what = std::to_string(d.m) + "x" + std::to_string(d.n) + "x" +
                                 std::to_string(d.k) + " kernel " + std::to_string(kernel) +
                                 (partial ? " partial" : " full");
        runtime::Gemm gemm;
        gemm.set_generic_only(kernel == 2);
        gemm.set_avx512(kernel == 0);
        gemm.Plan(d.m, d.n, d.k);
        std::vector<float> a = RandomValues(rng, d.m * d.k), b = RandomValues(rng, d.n * d.k);
        std::vector<float> bias = RandomValues(rng, d.n);
        const GemmOperand b_op{b.data(), d.k, true};
        gemm.SetConstantB(b_op);
        const int64_t begin = partial ? std::min<int64_t>(3, d.n) : 0;
        const int64_t end = partial ? std::max(begin, d.n - 5) : d.n;
        const int64_t stride = end - begin + 7;
        std::vector<float> addend = RandomValues(rng, d.m * stride);
        addend[0] = -0.0f;  // -0.0f + 0.0f is +0.0f: both ways
        const PoolScratch scratch(pool, gemm);
        std::vector<float> product(d.m * d.n);
        gemm.Run(d.m, d.n, d.k, {a.data(), d.k, false}, b_op, product.data(), d.n,
                 runtime::GemmEpilogue{bias.data()}, scratch.get());
        std::vector<float> expected(d.m * d.n);
        for (int64_t i = 0; i < d.m; ++i) {
          for (int64_t j = 0; j < d.n; ++j) {
            const float add = j >= begin && j < end ? addend[i * stride + j - begin] : 0.0f;
            expected[i * d.n + j] = std::clamp(product[i * d.n + j] + add, -0.5f, 2.0f);
          }
        }
        runtime::GemmEpilogue epilogue{bias.data(), -0.5f, 2.0f};
        epilogue.addend = addend.data();
        epilogue.addend_stride = stride;
        epilogue.addend_begin = begin;
        epilogue.addend_end = end;
        std::vector<float> c1(d.m * d.n, std::numeric_limits<float>::quiet_NaN()), c3 = c1;
        gemm.Run(d.m, d.n, d.k, {a.data(), d.k, false}, b_op, c1.data(), d.n, epilogue,
                 scratch.get());
        EXPECT_EQ(std::memcmp(c1.data(), expected.data(), c1.size() * sizeof(float)), 0) << what;
        gemm.RunParallel(d.m, d.n, d.k, {a.data(), d.k, false}, b_op, c3.data(), d.n, epilogue,
                         scratch.context(), 0);
        EXPECT_EQ(std::memcmp(c3.data(), expected.data(), c3.size() * sizeof(float)), 0)
            << what << " on 3 threads";
      }
    }
  }
}

TEST(GemmKernelsTest, Conv2DMatchesReference) {
  std::mt19937 rng(11);
  struct Case {
    int n, h, w, cin, cout, kh, kw, stride, dilation;
    tfl::Padding padding;
    Act act;
    int groups = 1;
  };
  const Case cases[] = {
      {1, 5, 5, 3, 4, 3, 3, 1, 1, tfl::Padding::SAME, Act::NONE},
      {2, 7, 6, 5, 3, 3, 2, 2, 1, tfl::Padding::VALID, Act::RELU},
      {1, 9, 9, 4, 6, 3, 3, 1, 2, tfl::Padding::SAME, Act::RELU6},
      {2, 8, 8, 4, 5, 1, 1, 1, 1, tfl::Padding::VALID, Act::NONE},  // direct GEMM
      {1, 8, 8, 4, 5, 1, 1, 2, 1, tfl::Padding::SAME, Act::RELU_N1_TO_1},
      {1, 40, 40, 16, 8, 3, 3, 1, 1, tfl::Padding::SAME, Act::NONE},  // several chunks
      {3, 11, 13, 7, 9, 5, 3, 2, 2, tfl::Padding::SAME, Act::RELU},
      {1, 4, 4, 2, 3, 5, 5, 1, 1, tfl::Padding::SAME, Act::NONE},        // window > input
      {2, 9, 8, 8, 6, 3, 3, 2, 1, tfl::Padding::SAME, Act::RELU, 2},     // grouped
      {1, 40, 40, 16, 8, 3, 3, 1, 1, tfl::Padding::SAME, Act::NONE, 4},  // grouped, chunks
      {1, 6, 6, 6, 6, 1, 1, 1, 1, tfl::Padding::VALID, Act::NONE, 3},    // grouped 1x1
  };
  for (const Case& c : cases) {
    const int oh = dfarm::testing::ConvOutDim(c.padding, c.h, c.kh, c.stride, c.dilation);
    const int ow = dfarm::testing::ConvOutDim(c.padding, c.w, c.kw, c.stride, c.dilation);
    for (bool with_bias : {true, false}) {
      ModelBuilder b;
      int in = b.AddTensor(tfl::TensorType::FLOAT32, {c.n, c.h, c.w, c.cin}, "input");
      const int fc = c.cin / c.groups;
      int filter = b.AddConstFloat32({c.cout, c.kh, c.kw, fc},
                                     RandomValues(rng, c.cout * c.kh * c.kw * fc), "filter");
      int bias = with_bias ? b.AddConstFloat32({c.cout}, RandomValues(rng, c.cout), "bias") : -1;
      int out = b.AddTensor(tfl::TensorType::FLOAT32, {c.n, oh, ow, c.cout}, "output");
      Conv2DParams params;
      params.padding = c.padding;
      params.stride_h = params.stride_w = c.stride;
      params.dilation_h = params.dilation_w = c.dilation;
      params.activation = c.act;
      b.AddConv2D(in, filter, bias, out, params);
      b.SetInputs({in});
      b.SetOutputs({out});
      ExpectSameAsReference(
          b, tfl::BuiltinOperator::CONV_2D, runtime::RegisterConv2DReference(), rng,
          "conv " + std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.kh) +
              " s" + std::to_string(c.stride) + " d" + std::to_string(c.dilation));
    }
  }
}

TEST(GemmKernelsTest, FullyConnectedMatchesReference) {
  std::mt19937 rng(12);
  struct Case {
    std::vector<int32_t> input;
    int units;
    bool keep_num_dims;
    Act act;
  };
  const Case cases[] = {{{1, 64}, 10, false, Act::NONE},
                        {{5, 33}, 17, false, Act::RELU},
                        {{2, 3, 20}, 7, true, Act::RELU6},
                        {{4, 2, 6}, 5, false, Act::NONE},
                        {{1, 1000}, 300, false, Act::NONE}};
  for (const Case& c : cases) {
    const int depth = c.input.back();
    int64_t elements = 1;
    for (int32_t d : c.input) elements *= d;
    const int batches = static_cast<int>(elements / depth);
    std::vector<int32_t> out_shape = c.input;
    if (c.keep_num_dims) {
      out_shape.back() = c.units;
    } else {
      out_shape = {batches, c.units};
    }
    ModelBuilder b;
    int in = b.AddTensor(tfl::TensorType::FLOAT32, c.input, "input");
    int w = b.AddConstFloat32({c.units, depth}, RandomValues(rng, c.units * depth), "weights");
    int bias = b.AddConstFloat32({c.units}, RandomValues(rng, c.units), "bias");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, out_shape, "output");
    b.AddFullyConnected(in, w, bias, out, c.act, c.keep_num_dims);
    b.SetInputs({in});
    b.SetOutputs({out});
    ExpectSameAsReference(b, tfl::BuiltinOperator::FULLY_CONNECTED,
                          runtime::RegisterFullyConnectedReference(), rng,
                          "fc " + std::to_string(batches) + "x" + std::to_string(depth));
  }
}

TEST(GemmKernelsTest, BatchMatMulMatchesReference) {
  std::mt19937 rng(13);
  struct Case {
    std::vector<int32_t> lhs, rhs, out;
    bool adj_x, adj_y;
  };
  const Case cases[] = {{{3, 4}, {4, 5}, {3, 5}, false, false},
                        {{2, 3, 4}, {2, 5, 4}, {2, 3, 5}, false, true},
                        {{2, 1, 4, 3}, {3, 4, 6}, {2, 3, 3, 6}, true, false},
                        {{1, 6}, {2, 5, 6}, {2, 1, 5}, false, true},
                        {{2, 7, 9}, {2, 8, 7}, {2, 9, 8}, true, true}};
  for (const Case& c : cases) {
    ModelBuilder b;
    int lhs = b.AddTensor(tfl::TensorType::FLOAT32, c.lhs, "lhs");
    int rhs = b.AddTensor(tfl::TensorType::FLOAT32, c.rhs, "rhs");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, c.out, "output");
    const bool adj_x = c.adj_x, adj_y = c.adj_y;
    b.AddOperator(tfl::BuiltinOperator::BATCH_MATMUL, {lhs, rhs}, {out},
                  tfl::BuiltinOptions::BatchMatMulOptions,
                  [=](flatbuffers::FlatBufferBuilder& fbb) {
                    return tfl::CreateBatchMatMulOptions(fbb, adj_x, adj_y).Union();
                  });
    b.SetInputs({lhs, rhs});
    b.SetOutputs({out});
    ExpectSameAsReference(b, tfl::BuiltinOperator::BATCH_MATMUL,
                          runtime::RegisterBatchMatmulReference(), rng,
                          "bmm adj " + std::to_string(adj_x) + std::to_string(adj_y));
  }
}

TEST(GemmKernelsTest, TransposeConvMatchesReference) {
  std::mt19937 rng(14);
  struct Case {
    int n, h, w, cin, cout, kh, kw, stride;
    tfl::Padding padding;
    Act act;
  };
  const Case cases[] = {{1, 4, 4, 3, 2, 3, 3, 2, tfl::Padding::SAME, Act::NONE},
                        {2, 5, 3, 4, 5, 2, 2, 2, tfl::Padding::VALID, Act::RELU},
                        {1, 6, 6, 2, 3, 3, 3, 1, tfl::Padding::SAME, Act::RELU6},
                        {1, 30, 30, 8, 8, 4, 4, 2, tfl::Padding::SAME, Act::NONE},
                        // Several GEMM chunks, overlapping windows split by output rows.
                        {1, 40, 40, 4, 40, 3, 3, 2, tfl::Padding::SAME, Act::RELU},
                        // selfie_segmentation's last op: one output channel,
                        // 2x2 blocks side by side; then two batches whose
                        // SAME window crops the border, split by rows.
                        {1, 64, 64, 16, 1, 2, 2, 2, tfl::Padding::SAME, Act::NONE},
                        {2, 33, 17, 5, 3, 3, 3, 2, tfl::Padding::SAME, Act::NONE}};
  for (const Case& c : cases) {
    // The output size the padding implies (TFLite's inverse of the window).
    const int oh = c.padding == tfl::Padding::SAME ? c.h * c.stride : (c.h - 1) * c.stride + c.kh;
    const int ow = c.padding == tfl::Padding::SAME ? c.w * c.stride : (c.w - 1) * c.stride + c.kw;
    ModelBuilder b;
    int shape = b.AddConstInt32({4}, {c.n, oh, ow, c.cout}, "output_shape");
    int filter = b.AddConstFloat32({c.cout, c.kh, c.kw, c.cin},
                                   RandomValues(rng, c.cout * c.kh * c.kw * c.cin), "filter");
    int in = b.AddTensor(tfl::TensorType::FLOAT32, {c.n, c.h, c.w, c.cin}, "input");
    int bias = b.AddConstFloat32({c.cout}, RandomValues(rng, c.cout), "bias");
    int out = b.AddTensor(tfl::TensorType::FLOAT32, {c.n, oh, ow, c.cout}, "output");
    TransposeConvParams params;
    params.padding = c.padding;
    params.stride_h = params.stride_w = c.stride;
    params.activation = c.act;
    b.AddTransposeConv(shape, filter, in, bias, out, params);
    b.SetInputs({in});
    b.SetOutputs({out});
    ExpectSameAsReference(
        b, tfl::BuiltinOperator::TRANSPOSE_CONV, runtime::RegisterTransposeConvReference(), rng,
        "transpose conv " + std::to_string(c.h) + " s" + std::to_string(c.stride));
  }
}

#ifdef DFARM_COUNT_MALLOCS
TEST(GemmKernelsTest, InvokeAllocatesNothing) {
  // Conv (im2col, several chunks), 1x1 conv, FC with batch 1 (GEMV) and > 1,
  // grouped conv (4 groups, one GEMM per group).
  std::mt19937 rng(15);
  ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 40, 40, 16}, "input");
  int f1 = b.AddConstFloat32({32, 3, 3, 16}, RandomValues(rng, 32 * 9 * 16), "f1");
  int t1 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 20, 20, 32}, "t1");
  Conv2DParams strided;
  strided.padding = tfl::Padding::SAME;
  strided.stride_h = strided.stride_w = 2;
  b.AddConv2D(in, f1, -1, t1, strided);
  int f2 = b.AddConstFloat32({8, 1, 1, 32}, RandomValues(rng, 8 * 32), "f2");
  int t2 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 20, 20, 8}, "t2");
  b.AddConv2D(t1, f2, -1, t2, Conv2DParams{});
  int w1 = b.AddConstFloat32({10, 3200}, RandomValues(rng, 10 * 3200), "w1");
  int t3 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 10}, "t3");
  b.AddFullyConnected(t2, w1, -1, t3);
  int w2 = b.AddConstFloat32({6, 8}, RandomValues(rng, 6 * 8), "w2");
  int t4 = b.AddTensor(tfl::TensorType::FLOAT32, {400, 6}, "t4");
  b.AddFullyConnected(t2, w2, -1, t4);
  int f3 = b.AddConstFloat32({32, 3, 3, 4}, RandomValues(rng, 32 * 9 * 4), "f3");
  int t5 = b.AddTensor(tfl::TensorType::FLOAT32, {1, 40, 40, 32}, "t5");
  b.AddConv2D(in, f3, -1, t5, Conv2DParams{tfl::Padding::SAME});
  b.SetInputs({in});
  b.SetOutputs({t3, t4, t5});
  std::unique_ptr<OpRun> run = Load(b, tfl::BuiltinOperator::CONV_2D, nullptr);
  ASSERT_TRUE(run);
  std::vector<float> values = RandomValues(rng, 40 * 40 * 16);
  std::copy(values.begin(), values.end(), run->interpreter->inputs()[0]->data_as<float>());
  ASSERT_TRUE(run->interpreter->Invoke().ok());
  // The hook sees an allocation.
  g_mallocs = 0;
  g_count_mallocs = true;
  g_sink = std::malloc(64);
  g_count_mallocs = false;
  std::free(g_sink);
  ASSERT_EQ(g_mallocs, 1);
  g_mallocs = 0;
  g_count_mallocs = true;
  runtime::Status status = run->interpreter->Invoke();
  g_count_mallocs = false;
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(g_mallocs, 0);
}
#endif

}  // namespace
}  // namespace dfarm::testing
