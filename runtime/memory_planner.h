// Greedy offset planning of tensor buffers by lifetime, so that buffers whose
// lifetimes do not overlap share arena bytes.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace dfarm::runtime {

struct BufferRequest {
  size_t size = 0;
  // Inclusive range of execution steps during which the buffer is live
  // (first_use <= last_use; a request with first_use > last_use is live at
  // no step and shares its bytes with every other).
  int first_use = 0;
  int last_use = 0;
};

// Places the largest buffers first, each at the lowest aligned offset that
// does not overlap a placed buffer live at the same time. Writes one offset
// per request to offsets_out and returns the arena size needed (a multiple
// of `alignment`, which must be a power of two). The buffers live at the same
// time as each one are found through an index of steps, so the time grows
// with n log n plus the number of such pairs, not with n squared.
size_t PlanGreedy(std::span<const BufferRequest> requests, size_t alignment,
                  std::vector<size_t>* offsets_out);

}  // namespace dfarm::runtime
