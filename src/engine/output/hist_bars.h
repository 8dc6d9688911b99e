// bpftrace-style bar charts for hist() and lhist() states.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/aggregate.h"

namespace fay {

struct HistBucket {
  std::string label;  // "[4K, 8K)", "[0]", "(..., 0)", "[100, ...)"
  // Bounds for machine output: [lo, hi). has_lo/has_hi are false for the open-ended buckets.
  int64_t lo = 0, hi = 0;
  bool has_lo = true, has_hi = true;
  uint64_t count = 0;
};

// The buckets from the first to the last non-empty one (empty ones in between included).
std::vector<HistBucket> HistBuckets(const AggState& state);

// One line per bucket: label, count, and a bar scaled to the largest bucket, e.g.
// "[2, 4)                150 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|".
std::string HistBars(const AggState& state);

// "1", "512", "4K", "1M": powers of two with 1024-based suffixes, as bpftrace labels them.
std::string Pow2Label(int power);

}  // namespace fay
