// A std::vector whose storage starts on a 64-byte boundary (a cache line),
// for data a kernel reads with whole-vector loads: a filter packed at
// Prepare. operator new aligns to 16 bytes only, so every 64-byte load from
// a plain std::vector<float> can span two cache lines (a GEMM's packed B:
// 3-10% of the product's time, BM_Gemm).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace dfarm::runtime {

inline constexpr std::size_t kCacheLineBytes = 64;

template <class T>
struct CacheAlignedAllocator {
  using value_type = T;

  CacheAlignedAllocator() = default;
  template <class U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  // The unsized form: clang has no sized deallocation without
  // -fsized-deallocation.
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete (p, std::align_val_t{kCacheLineBytes});
  }
  template <class U>
  bool operator==(const CacheAlignedAllocator<U>&) const noexcept {
    return true;
  }
};

// Floats whose first element is 64-byte aligned.
using AlignedFloats = std::vector<float, CacheAlignedAllocator<float>>;

}  // namespace dfarm::runtime
