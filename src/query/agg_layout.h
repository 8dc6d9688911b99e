// The byte layout of aggregate states. This is the contract between the probe part (generated
// eBPF writes these layouts into per-CPU map values) and the machine part (src/engine reads,
// merges and serializes them). Every slot is a little-endian 64-bit word unless noted.
//
//   count     [u64 n]
//   sum       [s64 sum]
//   min, max  [u64 seen, s64 v]            seen == 0 means no value yet
//   avg       [s64 sum, u64 n]
//   hist      kHistSlots x u64             HistIndex()
//   lhist     (nbuckets + 2) x u64         [0] below lo, [1..n] buckets, [n+1] at or above hi
//   quantile  kQuantSlots x u64            QuantIndex(); relative error <= 1/32 (3.125%)
//   distinct  kHllRegs x u8                HyperLogLog, p = 10; standard error 1.04/sqrt(1024)
#pragma once

#include <cstdint>

namespace fay {

constexpr int kHistSlots = 66;  // [0] negative, [1] zero, [2 + k] for v in [2^k, 2^(k+1))
constexpr int kQuantSubBits = 4;
constexpr int kQuantSub = 1 << kQuantSubBits;                              // 16 linear sub-buckets
constexpr int kQuantSlots = kQuantSub + (64 - kQuantSubBits) * kQuantSub;  // 976
constexpr int kHllBits = 10;
constexpr int kHllRegs = 1 << kHllBits;  // 1024 one-byte registers

inline int Log2Floor(uint64_t v) {
  return 63 - __builtin_clzll(v);
}  // v > 0

inline int HistIndex(int64_t v) {
  if (v < 0) return 0;
  if (v == 0) return 1;
  return 2 + Log2Floor(static_cast<uint64_t>(v));
}

// Values below kQuantSub are exact; above, 16 linear sub-buckets per power of two.
// Negative values count as 0.
inline int QuantIndex(int64_t sv) {
  if (sv < kQuantSub) return sv < 0 ? 0 : static_cast<int>(sv);
  uint64_t v = static_cast<uint64_t>(sv);
  int k = Log2Floor(v);
  int sub = static_cast<int>((v >> (k - kQuantSubBits)) & (kQuantSub - 1));
  return kQuantSub + (k - kQuantSubBits) * kQuantSub + sub;
}

// What a quantile reports for the values in bucket i: the value itself below kQuantSub; above,
// bucket i covers [(16 + sub) << (k - 4), (17 + sub) << (k - 4)) and reports its midpoint, within
// half a bucket width (at most 1/32 of the value) of every value in it.
inline int64_t QuantBucketValue(int i) {
  if (i < kQuantSub) return i;
  const int k = (i - kQuantSub) / kQuantSub + kQuantSubBits;
  const uint64_t sub = static_cast<uint64_t>((i - kQuantSub) % kQuantSub);
  const uint64_t width = uint64_t{1} << (k - kQuantSubBits);
  const uint64_t mid = (kQuantSub + sub) * width + width / 2;
  return mid > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(mid);
}

// lhist bucket for v: 0 below lo, 1 + (v - lo) / step inside, nbuckets + 1 at or above hi.
inline int LhistIndex(int64_t v, int64_t lo, int64_t hi, int64_t step) {
  if (v < lo) return 0;
  if (v >= hi) return static_cast<int>((hi - lo) / step) + 1;
  return static_cast<int>((v - lo) / step) + 1;
}
inline int LhistSlots(int64_t lo, int64_t hi, int64_t step) {
  return static_cast<int>((hi - lo) / step) + 2;
}

// The 64-bit mixer used for distinct(): splitmix64's finalizer. Strings hash as
// h = 0; for each 8-byte little-endian word w of the zero-padded buffer: h = Mix64(h ^ w).
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
// HLL register index is the top kHllBits of the hash; the rank is 1 + the number of leading
// zeros of the remaining bits (capped at 64 - kHllBits + 1).
inline int HllIndex(uint64_t h) {
  return static_cast<int>(h >> (64 - kHllBits));
}
inline int HllRank(uint64_t h) {
  uint64_t rest = h << kHllBits;
  if (rest == 0) return 64 - kHllBits + 1;
  return __builtin_clzll(rest) + 1;
}

}  // namespace fay
