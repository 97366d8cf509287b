#include "runtime/memory_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(MemoryPlannerTest, Empty) {
  std::vector<size_t> offsets;
  EXPECT_EQ(PlanGreedy({}, 64, &offsets), 0u);
  EXPECT_TRUE(offsets.empty());
}

}  // namespace
}  // namespace dfarm::runtime
