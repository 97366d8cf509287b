#include "runtime/memory_planner.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

namespace dfarm::runtime {
namespace {

size_t AlignUp(size_t n, size_t alignment) { return (n + alignment - 1) & ~(alignment - 1); }

// The placed buffers by the steps they are live at, in blocks of kSteps
// steps: a buffer is listed in every block its lifetime touches, so the
// buffers live at the same time as a new one are found among the few listed
// in its own blocks instead of among every placed buffer.
class LiveIndex {
 public:
  static constexpr int kSteps = 64;

  explicit LiveIndex(std::span<const BufferRequest> requests) : requests_(requests) {
    if (requests.empty()) return;
    int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
    for (const BufferRequest& r : requests) {
      lo = std::min(lo, std::min(r.first_use, r.last_use));
      hi = std::max(hi, std::max(r.first_use, r.last_use));
    }
    first_step_ = lo;
    blocks_.resize(static_cast<size_t>(Block(hi)) + 1);
    seen_.assign(requests.size(), kNever);
  }

  void Add(size_t r) {
    const BufferRequest& req = requests_[r];
    if (req.first_use > req.last_use) return;  // live at no step
    for (int b = Block(req.first_use); b <= Block(req.last_use); ++b) {
      blocks_[b].push_back(static_cast<uint32_t>(r));
    }
  }

  // The added buffers live at some step of request r's lifetime, in `out`,
  // sorted by their offsets.
  void Conflicts(size_t r, const std::vector<size_t>& offsets, std::vector<size_t>* out) {
    out->clear();
    const BufferRequest& req = requests_[r];
    if (req.first_use > req.last_use) return;
    const auto stamp = static_cast<uint32_t>(r);
    for (int b = Block(req.first_use); b <= Block(req.last_use); ++b) {
      for (uint32_t p : blocks_[b]) {
        if (seen_[p] == stamp) continue;
        seen_[p] = stamp;
        const BufferRequest& other = requests_[p];
        if (other.first_use <= req.last_use && req.first_use <= other.last_use) out->push_back(p);
      }
    }
    std::sort(out->begin(), out->end(), [&](size_t a, size_t b) {
      return offsets[a] != offsets[b] ? offsets[a] < offsets[b] : a < b;
    });
  }

 private:
  static constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();

  int Block(int step) const { return static_cast<int>((int64_t{step} - first_step_) / kSteps); }

  std::span<const BufferRequest> requests_;
  int first_step_ = 0;
  std::vector<std::vector<uint32_t>> blocks_;
  std::vector<uint32_t> seen_;  // the request whose Conflicts() last saw each buffer
};

}  // namespace

size_t PlanGreedy(std::span<const BufferRequest> requests, size_t alignment,
                  std::vector<size_t>* offsets_out) {
  const size_t n = requests.size();
  offsets_out->assign(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].size != requests[b].size) return requests[a].size > requests[b].size;
    return requests[a].first_use < requests[b].first_use;
  });

  LiveIndex live(requests);
  std::vector<size_t> conflicting;  // reused scratch
  size_t arena = 0;
  for (size_t r : order) {
    const BufferRequest& req = requests[r];
    live.Conflicts(r, *offsets_out, &conflicting);
    // The lowest offset below, between or above them where req fits.
    size_t offset = 0;
    for (size_t p : conflicting) {
      if (offset + req.size <= (*offsets_out)[p]) break;
      offset = std::max(offset, AlignUp((*offsets_out)[p] + requests[p].size, alignment));
    }
    (*offsets_out)[r] = offset;
    arena = std::max(arena, AlignUp(offset + req.size, alignment));
    live.Add(r);
  }
  return arena;
}

}  // namespace dfarm::runtime
