// Floats whose first element starts a 64-byte cache line, for data a kernel
// reads with whole-vector loads: a filter packed at Prepare. operator new
// aligns to 16 bytes only, so every 64-byte load from a plain
// std::vector<float> can span two lines (a GEMM's packed B: 3-10% of the
// product's time, BM_Gemm).
//
// The storage is a plain std::vector<float> with up to 15 floats of slack
// before the aligned start, so the buffers come from malloc as before. An
// aligned operator new took glibc's memalign path instead, and with its
// dynamic mmap threshold that raised hand_landmark_full's peak RSS at 2
// threads from 29.3 to 34.7 MB.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dfarm::runtime {

inline constexpr std::size_t kCacheLineBytes = 64;

class AlignedFloats {
 public:
  AlignedFloats() = default;
  explicit AlignedFloats(std::size_t n, float value = 0.0f) { assign(n, value); }
  AlignedFloats(const AlignedFloats& other) { *this = other; }
  AlignedFloats& operator=(const AlignedFloats& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  // A moved std::vector keeps its buffer, so the offset still holds.
  AlignedFloats(AlignedFloats&& other) noexcept { *this = std::move(other); }
  AlignedFloats& operator=(AlignedFloats&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);
      offset_ = std::exchange(other.offset_, 0);
      size_ = std::exchange(other.size_, 0);
      other.storage_.clear();
    }
    return *this;
  }

  // n copies of value (the old contents are dropped).
  void assign(std::size_t n, float value) {
    storage_.assign(n + kSlack, value);
    Place(n);
  }
  // The floats [first, last), which must not lie in this storage.
  void assign(const float* first, const float* last) {
    const auto n = static_cast<std::size_t>(last - first);
    storage_.resize(n + kSlack);
    Place(n);
    std::copy(first, last, data());
  }
  // Empties it, keeping the storage (as std::vector::clear()).
  void clear() {
    storage_.clear();
    size_ = 0;
  }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  float* data() { return storage_.data() + offset_; }
  const float* data() const { return storage_.data() + offset_; }
  float* begin() { return data(); }
  float* end() { return data() + size_; }
  const float* begin() const { return data(); }
  const float* end() const { return data() + size_; }
  float& operator[](std::size_t i) { return data()[i]; }
  float operator[](std::size_t i) const { return data()[i]; }

  bool operator==(const AlignedFloats& other) const {
    return std::equal(begin(), end(), other.begin(), other.end());
  }

 private:
  // The offset of the first aligned float of the storage, for n floats.
  void Place(std::size_t n) {
    const auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
    offset_ = (kCacheLineBytes - address % kCacheLineBytes) % kCacheLineBytes / sizeof(float);
    size_ = n;
  }

  // Floats before the first cache line boundary, at most (malloc's blocks
  // are at least 4-byte aligned).
  static constexpr std::size_t kSlack = kCacheLineBytes / sizeof(float) - 1;
  std::vector<float> storage_;
  std::size_t offset_ = 0, size_ = 0;
};

}  // namespace dfarm::runtime
