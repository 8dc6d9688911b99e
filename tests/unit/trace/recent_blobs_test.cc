#include "trace/recent_blobs.h"

#include <gtest/gtest.h>

namespace fay::trace {
namespace {

// Hashes whose low bits all pick bucket b (the `n`th of them).
Hash128 InBucket(uint64_t b, uint64_t n) {
  return {b + n * RecentBlobs::kBuckets, n + 1};
}

TEST(RecentBlobsTest, RemembersEveryBlobWhileTheyFit) {
  RecentBlobs blobs;
  const uint64_t n = RecentBlobs::kBuckets * RecentBlobs::kWays;
  // Spread as XXH3's are: consecutive ones in consecutive buckets, four to a bucket.
  for (uint64_t i = 0; i < n; ++i) EXPECT_TRUE(blobs.Insert({i + 1, i})) << i;
  for (uint64_t i = 0; i < n; ++i) EXPECT_FALSE(blobs.Insert({i + 1, i})) << i;
}

TEST(RecentBlobsTest, AFullBucketForgetsTheLeastRecentlySeen) {
  RecentBlobs blobs;
  for (uint64_t n = 0; n < 4; ++n) EXPECT_TRUE(blobs.Insert(InBucket(7, n)));
  EXPECT_FALSE(blobs.Insert(InBucket(7, 0)));  // seen again: now the most recent
  EXPECT_TRUE(blobs.Insert(InBucket(7, 4)));   // evicts 1, the least recently seen
  EXPECT_TRUE(blobs.Insert(InBucket(7, 1)));   // stored again; evicts 2
  EXPECT_FALSE(blobs.Insert(InBucket(7, 0)));
  EXPECT_FALSE(blobs.Insert(InBucket(7, 3)));
  EXPECT_FALSE(blobs.Insert(InBucket(7, 4)));
  EXPECT_TRUE(blobs.Insert(InBucket(7, 2)));
  // Other buckets are untouched.
  EXPECT_TRUE(blobs.Insert(InBucket(8, 0)));
}

TEST(RecentBlobsTest, SameLowBitsAndTheZeroHashAreDistinct) {
  RecentBlobs blobs;
  EXPECT_TRUE(blobs.Insert({0, 0}));
  EXPECT_FALSE(blobs.Insert({0, 0}));
  EXPECT_TRUE(blobs.Insert({5, 1}));
  EXPECT_TRUE(blobs.Insert({5, 2}));  // same lo, other hi: another blob
  EXPECT_TRUE(blobs.Insert({0, 2}));  // lo 0 but not the zero hash
  EXPECT_FALSE(blobs.Insert({5, 1}));
  EXPECT_FALSE(blobs.Insert({0, 2}));
}

}  // namespace
}  // namespace fay::trace
