// Eight floats as one GCC generic vector, for kernels compiled per target
// clone (kernel_clones.h): GCC lowers Vec8 to one AVX register, or two SSE2
// or two NEON registers, as the clone's target has. Internal to
// runtime/kernels; every function taking a Vec8 is inlined, so it lives in
// registers only (hence -Wpsabi, about passing it by value without AVX, is
// off in a file that includes this header).
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/kernels/kernel_clones.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace dfarm::runtime {

typedef float Vec8 __attribute__((vector_size(32)));
typedef int32_t Vec8i __attribute__((vector_size(32)));

DFARM_KERNEL_INLINE Vec8 Splat8(float v) { return Vec8{v, v, v, v, v, v, v, v}; }

DFARM_KERNEL_INLINE Vec8 Load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

DFARM_KERNEL_INLINE void Store8(float* p, Vec8 v) { std::memcpy(p, &v, sizeof(v)); }

}  // namespace dfarm::runtime
