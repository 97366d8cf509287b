#include "runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace dfarm::runtime {
namespace {

size_t AlignUp(size_t n, size_t alignment) { return (n + alignment - 1) & ~(alignment - 1); }

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

  std::vector<size_t> placed;       // request indices, kept sorted by offset
  std::vector<size_t> conflicting;  // reused scratch
  size_t arena = 0;
  for (size_t r : order) {
    const BufferRequest& req = requests[r];
    conflicting.clear();
    for (size_t p : placed) {
      const BufferRequest& other = requests[p];
      if (other.first_use <= req.last_use && req.first_use <= other.last_use) {
        conflicting.push_back(p);
      }
    }
    size_t offset = 0;
    for (size_t p : conflicting) {  // sorted by offset, as `placed` is
      if (offset + req.size <= (*offsets_out)[p]) break;
      offset = std::max(offset, AlignUp((*offsets_out)[p] + requests[p].size, alignment));
    }
    (*offsets_out)[r] = offset;
    arena = std::max(arena, AlignUp(offset + req.size, alignment));
    auto pos = std::upper_bound(placed.begin(), placed.end(), offset,
                                [&](size_t off, size_t p) { return off < (*offsets_out)[p]; });
    placed.insert(pos, r);
  }
  return arena;
}

}  // namespace dfarm::runtime
