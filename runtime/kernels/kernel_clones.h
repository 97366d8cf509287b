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
#pragma once

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
