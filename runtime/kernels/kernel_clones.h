// Macros of the float kernels that compile their whole body once per target
// clone (depthwise_conv_float.cc, conv_hwc3_float.cc); internal to
// runtime/kernels.
//
// DFARM_KERNEL_CLONES on the one function a kernel's work runs in: an
// x86-64-v3 clone (AVX2 + FMA; the build itself targets baseline x86-64)
// picked at load where the CPU has it, and the baseline. There products and
// sums contract into FMA, which the baseline clone does not do; on arm64 GCC
// contracts both into FMLA.
// DFARM_KERNEL_INLINE / DFARM_KERNEL_LAMBDA_INLINE on everything it calls,
// so that each clone compiles it for its own target; DFARM_KERNEL_UNROLL
// before loops over taps, pixels and channels of a block, unrolled
// completely so that the accumulators become registers (GCC's own limits
// stop short of 5x5).
// Under AddressSanitizer (the sanitizer and fuzz builds) nothing is forced
// inline nor unrolled: the same code and the same sums in the same order,
// compiled in seconds instead of minutes (each forced-inline variant would
// be instrumented anew).
// DFARM_KERNEL_WIDE (x86-64 GCC, not under AddressSanitizer): a kernel also
// compiles its body once more as DFARM_KERNEL_V4 (x86-64-v4: AVX-512F/VL/
// BW/DQ + FMA) with 16-float vectors where its channel blocks allow, and
// runs it where WideKernels() says so; each lane's sum is the x86-64-v3
// clone's, in the same order and FMA-contracted the same way, so the two
// give the same bits.
#pragma once

#include <atomic>

#if defined(__SANITIZE_ADDRESS__)
#define DFARM_KERNEL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DFARM_KERNEL_SANITIZED 1
#endif
#endif

#if defined(__GNUC__) && !defined(DFARM_KERNEL_SANITIZED)
#define DFARM_KERNEL_INLINE inline __attribute__((always_inline))
#define DFARM_KERNEL_LAMBDA_INLINE __attribute__((always_inline))
#else
#define DFARM_KERNEL_INLINE inline
#define DFARM_KERNEL_LAMBDA_INLINE
#endif

#if defined(DFARM_KERNEL_SANITIZED)
#define DFARM_KERNEL_UNROLL
#elif defined(__GNUC__) && !defined(__clang__)
#define DFARM_KERNEL_UNROLL _Pragma("GCC unroll 32")
#elif defined(__clang__)
#define DFARM_KERNEL_UNROLL _Pragma("unroll")
#else
#define DFARM_KERNEL_UNROLL
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define DFARM_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DFARM_KERNEL_CLONES
#endif

// DFARM_KERNEL_CLONES_NO_FMA: an AVX2 clone and the baseline, without FMA,
// so that a product and a sum are never contracted: the clone gives the
// baseline's bits (for kernels whose results must not depend on the CPU,
// such as the bilinear weights' sums that TFLite's kernels round apart).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define DFARM_KERNEL_CLONES_NO_FMA __attribute__((target_clones("avx2", "default")))
#else
#define DFARM_KERNEL_CLONES_NO_FMA
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && \
    !defined(DFARM_KERNEL_SANITIZED)
#define DFARM_KERNEL_WIDE 1
#define DFARM_KERNEL_V4 __attribute__((target("arch=x86-64-v4")))
#endif

namespace dfarm::runtime {

// The setting SetWideKernels() changes: true unless turned off.
inline std::atomic<bool>& WideKernelsSetting() {
  static std::atomic<bool> on{true};
  return on;
}

// Whether the kernels run their DFARM_KERNEL_V4 variants: built in, the CPU
// (and the OS, for the 512-bit registers) has x86-64-v4, and
// SetWideKernels(false) has not turned them off.
inline bool WideKernels() {
#if defined(DFARM_KERNEL_WIDE)
  static const bool cpu = __builtin_cpu_supports("x86-64-v4") != 0;
  return cpu && WideKernelsSetting().load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// Turns the DFARM_KERNEL_V4 variants off (false: the x86-64-v3 clones run
// instead) or back on where the CPU has them; returns the previous setting.
// For tests, which compare the two bit for bit.
inline bool SetWideKernels(bool on) { return WideKernelsSetting().exchange(on); }

}  // namespace dfarm::runtime
