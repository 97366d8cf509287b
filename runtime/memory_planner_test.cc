#include "runtime/memory_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace dfarm::runtime {
namespace {

bool Overlap(const BufferRequest& a, size_t ao, const BufferRequest& b, size_t bo) {
  bool time = a.first_use <= b.last_use && b.first_use <= a.last_use;
  bool space = ao < bo + b.size && bo < ao + a.size;
  return time && space && a.size > 0 && b.size > 0;
}

TEST(MemoryPlannerTest, ChainReusesMemory) {
  // t0 -> t1 -> t2 -> t3: only neighbours live together.
  std::vector<BufferRequest> requests = {{100, 0, 1}, {100, 1, 2}, {100, 2, 3}, {100, 3, 4}};
  std::vector<size_t> offsets;
  size_t arena = PlanGreedy(requests, 64, &offsets);
  EXPECT_EQ(arena, 256u);  // two aligned slots of 128
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(offsets[i] % 64, 0u);
    for (size_t j = i + 1; j < requests.size(); ++j) {
      EXPECT_FALSE(Overlap(requests[i], offsets[i], requests[j], offsets[j])) << i << "," << j;
    }
  }
}

TEST(MemoryPlannerTest, SimultaneousBuffersDoNotShare) {
  std::vector<BufferRequest> requests = {{10, 0, 5}, {20, 0, 5}, {30, 2, 3}};
  std::vector<size_t> offsets;
  size_t arena = PlanGreedy(requests, 16, &offsets);
  EXPECT_EQ(arena, 32u + 32u + 16u);
  for (size_t i = 0; i < requests.size(); ++i) {
    for (size_t j = i + 1; j < requests.size(); ++j) {
      EXPECT_FALSE(Overlap(requests[i], offsets[i], requests[j], offsets[j]));
    }
  }
}

TEST(MemoryPlannerTest, FillsAGapBetweenBuffers) {
  // A (0..10) at 0, B (0..10) above it; C dies before D is born, so D can
  // take C's place.
  std::vector<BufferRequest> requests = {{256, 0, 10}, {128, 0, 2}, {64, 0, 10}, {128, 3, 10}};
  std::vector<size_t> offsets;
  size_t arena = PlanGreedy(requests, 64, &offsets);
  EXPECT_EQ(offsets[1], offsets[3]);
  EXPECT_EQ(arena, 256u + 128u + 64u);
}

// The planner's rule written plainly (every placed buffer checked against
// every new one): the indexed planner must give the same offsets.
size_t PlainGreedy(const std::vector<BufferRequest>& requests, size_t alignment,
                   std::vector<size_t>* offsets) {
  const size_t n = requests.size();
  offsets->assign(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].size != requests[b].size) return requests[a].size > requests[b].size;
    return requests[a].first_use < requests[b].first_use;
  });
  std::vector<size_t> placed;
  size_t arena = 0;
  for (size_t r : order) {
    std::vector<size_t> conflicting;
    for (size_t p : placed) {
      if (requests[p].first_use <= requests[r].last_use &&
          requests[r].first_use <= requests[p].last_use) {
        conflicting.push_back(p);
      }
    }
    std::stable_sort(conflicting.begin(), conflicting.end(),
                     [&](size_t a, size_t b) { return (*offsets)[a] < (*offsets)[b]; });
    size_t offset = 0;
    for (size_t p : conflicting) {
      if (offset + requests[r].size <= (*offsets)[p]) break;
      const size_t end = (*offsets)[p] + requests[p].size;
      offset = std::max(offset, (end + alignment - 1) & ~(alignment - 1));
    }
    (*offsets)[r] = offset;
    arena = std::max(arena, (offset + requests[r].size + alignment - 1) & ~(alignment - 1));
    placed.push_back(r);
  }
  return arena;
}

TEST(MemoryPlannerTest, SameOffsetsAsThePlainRuleOnRandomGraphs) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 400);
    const int steps = 1 + static_cast<int>(rng() % 300);
    std::vector<BufferRequest> requests(n);
    for (BufferRequest& r : requests) {
      // Mostly short lifetimes, some spanning the graph, sizes with ties.
      r.first_use = static_cast<int>(rng() % steps);
      const int span = rng() % 10 == 0 ? steps : static_cast<int>(rng() % 4);
      r.last_use = std::min(steps, r.first_use + span);
      r.size = (rng() % 3 == 0) ? 64 * (1 + rng() % 4) : 1 + rng() % 5000;
    }
    std::vector<size_t> want, got;
    const size_t want_arena = PlainGreedy(requests, 64, &want);
    ASSERT_EQ(PlanGreedy(requests, 64, &got), want_arena) << "trial " << trial;
    ASSERT_EQ(got, want) << "trial " << trial;
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) {
        ASSERT_FALSE(Overlap(requests[i], got[i], requests[j], got[j])) << i << "," << j;
      }
    }
  }
}

TEST(MemoryPlannerTest, Empty) {
  std::vector<size_t> offsets;
  EXPECT_EQ(PlanGreedy({}, 64, &offsets), 0u);
  EXPECT_TRUE(offsets.empty());
}

}  // namespace
}  // namespace dfarm::runtime
