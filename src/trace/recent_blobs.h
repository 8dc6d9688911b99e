// The writer's memory of the blobs it stored last, so that a buffer seen again is written once:
// one look-up per captured buffer, hundreds of thousands per second when a program streams data.
//
// Bounded on purpose. A set of every hash ever stored grew without end (32 bytes a blob: gigabytes
// for a long recording) and, past the caches, cost a memory miss per buffer: 45 ms of W2's wall,
// a 1 GiB read in 4 KiB blocks. This table is 1 MiB, 64-byte buckets of four, so a look-up touches
// one cache line that stays near the CPU. It remembers the last 65,536 distinct blobs in the usual
// case; a blob that comes back after being evicted is stored a second time, which the format
// allows (readers take the first copy).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <utility>

#include "trace/format.h"

namespace fay::trace {

class RecentBlobs {
 public:
  static constexpr size_t kWays = 4;
  static constexpr size_t kBuckets = 16384;

  // Returns true when h is not remembered (and remembers it, forgetting its bucket's least
  // recently seen entry when the bucket is full).
  bool Insert(const Hash128& h) {
    // The all-zero hash marks an empty entry; the one real blob hashing to it is kept aside.
    if (h.lo == 0 && h.hi == 0) {
      if (has_zero_) return false;
      has_zero_ = true;
      return true;
    }
    auto& e = BucketOf(h).entries;
    size_t i = 0;
    while (i < kWays && e[i] != h) ++i;
    bool fresh = i == kWays;
    // Most recently seen first: h goes in front, the ones before its place (or all but the last)
    // move down one. Swapped along rather than shifted, which the compiler made a memmove call.
    Hash128 carry = h;
    for (size_t j = 0; j <= (fresh ? kWays - 1 : i); ++j) std::swap(carry, e[j]);
    return fresh;
  }

  // Forgets every blob (a flight recorder's lane starting a new group, see trace/flight.h).
  void Clear() {
    buckets_.reset();
    has_zero_ = false;
  }

  // Asks the CPU for h's bucket: captured buffers stream through the caches between two looks
  // at one, so a look-up is a miss unless asked for ahead.
  void Prefetch(const Hash128& h) { __builtin_prefetch(&BucketOf(h), 1); }

 private:
  struct alignas(64) Bucket {
    std::array<Hash128, kWays> entries{};
  };
  Bucket& BucketOf(const Hash128& h) {
    if (!buckets_) buckets_ = std::make_unique<Bucket[]>(kBuckets);
    // XXH3's bits are uniform: the low ones pick the bucket.
    return buckets_[static_cast<size_t>(h.lo) & (kBuckets - 1)];
  }
  std::unique_ptr<Bucket[]> buckets_;
  bool has_zero_ = false;
};

}  // namespace fay::trace
