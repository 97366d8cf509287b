#include "reports/gate/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dfarm::stats {
namespace {

TEST(Median, OddEvenEmpty) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(Median({})));
}

}  // namespace
}  // namespace dfarm::stats
