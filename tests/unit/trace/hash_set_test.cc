#include "trace/hash_set.h"

#include <gtest/gtest.h>

namespace fay::trace {
namespace {

TEST(Hash128SetTest, InsertsOnceAndGrowsWithoutLosingAny) {
  Hash128Set set;
  for (uint64_t i = 1; i <= 100000; ++i) EXPECT_TRUE(set.Insert({i * 0x9e3779b97f4a7c15ull, i}));
  EXPECT_EQ(set.size(), 100000u);
  for (uint64_t i = 1; i <= 100000; ++i) EXPECT_FALSE(set.Insert({i * 0x9e3779b97f4a7c15ull, i}));
  EXPECT_EQ(set.size(), 100000u);
}

TEST(Hash128SetTest, CollidingLowBitsAndTheZeroHashAreDistinctEntries) {
  Hash128Set set;
  EXPECT_TRUE(set.Insert({0, 0}));
  EXPECT_FALSE(set.Insert({0, 0}));
  EXPECT_TRUE(set.Insert({1024, 1}));  // same slot as {0, 2} and {2048, 3} in a 1024-slot table
  EXPECT_TRUE(set.Insert({0, 2}));
  EXPECT_TRUE(set.Insert({2048, 3}));
  EXPECT_FALSE(set.Insert({0, 2}));
  EXPECT_EQ(set.size(), 4u);
}

}  // namespace
}  // namespace fay::trace
