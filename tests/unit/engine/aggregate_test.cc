#include "engine/aggregate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "query/agg_layout.h"

namespace fay {
namespace {

AggSpec Spec(AggFunc f) {
  AggSpec s;
  s.func = f;
  return s;
}

AggSpec Lhist(int64_t lo, int64_t hi, int64_t step) {
  AggSpec s = Spec(AggFunc::kLhist);
  s.lo = lo;
  s.hi = hi;
  s.step = step;
  return s;
}

AggSpec Quantile(double q) {
  AggSpec s = Spec(AggFunc::kQuantile);
  s.q = q;
  return s;
}

AggState StateOf(const AggSpec& spec, const std::vector<int64_t>& values) {
  AggState s(spec);
  for (int64_t v : values) s.Update(v);
  return s;
}

uint64_t Word(const AggState& s, int i) {
  uint64_t w;
  std::memcpy(&w, s.bytes().data() + i * 8, 8);
  return w;
}

std::vector<int64_t> Concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// merge(state(A), state(B)) == state(A u B), for both merge orders.
void ExpectMergeLaw(const AggSpec& spec, const std::vector<int64_t>& a,
                    const std::vector<int64_t>& b) {
  AggState ab = StateOf(spec, a);
  ab.Merge(StateOf(spec, b));
  AggState ba = StateOf(spec, b);
  ba.Merge(StateOf(spec, a));
  AggState all = StateOf(spec, Concat(a, b));
  EXPECT_EQ(ab, all);
  EXPECT_EQ(ba, all);
}

const std::vector<int64_t> kA = {5, -3, 0, 17, 4096, 1, 1};
const std::vector<int64_t> kB = {-100, 2, 3, 3, 70000, 12};

TEST(AggState, SizesFollowTheLayout) {
  EXPECT_EQ(AggState::SizeOf(Spec(AggFunc::kCount)), 8u);
  EXPECT_EQ(AggState::SizeOf(Spec(AggFunc::kSum)), 8u);
  EXPECT_EQ(AggState::SizeOf(Spec(AggFunc::kMin)), 16u);
  EXPECT_EQ(AggState::SizeOf(Spec(AggFunc::kAvg)), 16u);
  EXPECT_EQ(AggState::SizeOf(Spec(AggFunc::kHist)), 66u * 8);
  EXPECT_EQ(AggState::SizeOf(Lhist(0, 100, 10)), 12u * 8);
  EXPECT_EQ(AggState::SizeOf(Quantile(0.5)), 976u * 8);
  EXPECT_EQ(AggState::SizeOf(Spec(AggFunc::kDistinct)), 1024u);
}

TEST(AggState, Count) {
  AggState s = StateOf(Spec(AggFunc::kCount), {9, 9, 9});
  EXPECT_EQ(Word(s, 0), 3u);
  EXPECT_EQ(s.Count(), 3u);
  EXPECT_EQ(s.Scalar(), 3);
  ExpectMergeLaw(Spec(AggFunc::kCount), kA, kB);
  AggState m = StateOf(Spec(AggFunc::kCount), kA);
  m.Merge(StateOf(Spec(AggFunc::kCount), kB));
  EXPECT_EQ(m.Scalar(), 13);
}

TEST(AggState, SumWraps) {
  AggState s = StateOf(Spec(AggFunc::kSum), kA);
  EXPECT_EQ(s.Scalar(), 5 - 3 + 17 + 4096 + 2);
  ExpectMergeLaw(Spec(AggFunc::kSum), kA, kB);
  AggState w = StateOf(Spec(AggFunc::kSum), {INT64_MAX, 2});
  EXPECT_EQ(w.Scalar(), INT64_MIN + 1);
}

TEST(AggState, MinAndMax) {
  AggState mn = StateOf(Spec(AggFunc::kMin), kA);
  EXPECT_EQ(Word(mn, 0), 1u);
  EXPECT_EQ(mn.Scalar(), -3);
  AggState mx = StateOf(Spec(AggFunc::kMax), kA);
  EXPECT_EQ(mx.Scalar(), 4096);
  ExpectMergeLaw(Spec(AggFunc::kMin), kA, kB);
  ExpectMergeLaw(Spec(AggFunc::kMax), kA, kB);
  mn.Merge(StateOf(Spec(AggFunc::kMin), kB));
  EXPECT_EQ(mn.Scalar(), -100);

  AggState empty(Spec(AggFunc::kMin));
  EXPECT_TRUE(empty.Empty());
  // An empty per-CPU slot (seen == 0, v == 0) must not pull the minimum to 0.
  AggState pos = StateOf(Spec(AggFunc::kMin), {7});
  pos.Merge(empty);
  EXPECT_EQ(pos.Scalar(), 7);
  empty.Merge(StateOf(Spec(AggFunc::kMin), {7}));
  EXPECT_EQ(empty.Scalar(), 7);
  EXPECT_FALSE(empty.Empty());
}

TEST(AggState, Avg) {
  AggState s = StateOf(Spec(AggFunc::kAvg), {1, 2});
  s.Merge(StateOf(Spec(AggFunc::kAvg), {3, 4, 10}));
  EXPECT_EQ(Word(s, 0), 20u);
  EXPECT_EQ(Word(s, 1), 5u);
  EXPECT_DOUBLE_EQ(s.Average(), 4.0);
  EXPECT_EQ(s.Scalar(), 4);
  EXPECT_EQ(s.Count(), 5u);
  ExpectMergeLaw(Spec(AggFunc::kAvg), kA, kB);
  EXPECT_TRUE(AggState(Spec(AggFunc::kAvg)).Empty());
}

TEST(AggState, HistBuckets) {
  AggState s = StateOf(Spec(AggFunc::kHist), {-5, 0, 1, 2, 3, 4, 1000, 1023, 1024});
  EXPECT_EQ(Word(s, 0), 1u);   // negative
  EXPECT_EQ(Word(s, 1), 1u);   // zero
  EXPECT_EQ(Word(s, 2), 1u);   // [1, 2)
  EXPECT_EQ(Word(s, 3), 2u);   // [2, 4)
  EXPECT_EQ(Word(s, 4), 1u);   // [4, 8)
  EXPECT_EQ(Word(s, 11), 2u);  // [512, 1024)
  EXPECT_EQ(Word(s, 12), 1u);  // [1024, 2048)
  EXPECT_EQ(s.Count(), 9u);
  ExpectMergeLaw(Spec(AggFunc::kHist), kA, kB);
}

TEST(AggState, LhistBuckets) {
  AggState s = StateOf(Lhist(0, 100, 10), {-1, 0, 9, 10, 99, 100, 1000});
  EXPECT_EQ(Word(s, 0), 1u);
  EXPECT_EQ(Word(s, 1), 2u);
  EXPECT_EQ(Word(s, 2), 1u);
  EXPECT_EQ(Word(s, 10), 1u);
  EXPECT_EQ(Word(s, 11), 2u);
  EXPECT_EQ(s.Count(), 7u);
  ExpectMergeLaw(Lhist(-10, 50, 5), kA, kB);
}

TEST(AggState, QuantileExactBelowSixteen) {
  AggState s = StateOf(Quantile(0.5), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_EQ(s.QuantileValue(), 5);
  AggState one = StateOf(Quantile(1.0), {3, 15, 0});
  EXPECT_EQ(one.QuantileValue(), 15);
  EXPECT_EQ(AggState(Quantile(0.5)).QuantileValue(), 0);
}

TEST(AggState, QuantileWithinRelativeError) {
  std::vector<int64_t> values;
  for (int64_t v = 1; v <= 1000; ++v) values.push_back(v);
  for (double q : {0.5, 0.9, 0.99, 1.0}) {
    AggState s = StateOf(Quantile(q), values);
    double want = std::ceil(q * 1000);
    EXPECT_LE(std::fabs(s.QuantileValue() - want), want / 32) << q;
    EXPECT_EQ(s.Scalar(), s.QuantileValue());
  }
  // 1000 lies in [992, 1024): the midpoint is 1008.
  EXPECT_EQ(StateOf(Quantile(1.0), values).QuantileValue(), 1008);
  std::vector<int64_t> lo(values.begin(), values.begin() + 400);
  std::vector<int64_t> hi(values.begin() + 400, values.end());
  ExpectMergeLaw(Quantile(0.99), lo, hi);
}

TEST(AggState, DistinctInts) {
  std::vector<int64_t> a, b;
  for (int64_t v = 0; v < 60000; ++v) a.push_back(v * 7919);
  for (int64_t v = 40000; v < 100000; ++v) b.push_back(v * 7919);  // overlaps a by 20000
  AggState s = StateOf(Spec(AggFunc::kDistinct), a);
  s.Merge(StateOf(Spec(AggFunc::kDistinct), b));
  double est = static_cast<double>(s.DistinctEstimate());
  EXPECT_NEAR(est, 100000, 100000 * 3 * 0.0325);
  EXPECT_EQ(s.Scalar(), static_cast<int64_t>(s.DistinctEstimate()));
  ExpectMergeLaw(Spec(AggFunc::kDistinct), a, b);
  // Small cardinalities are exact thanks to linear counting.
  EXPECT_EQ(StateOf(Spec(AggFunc::kDistinct), {1, 2, 3, 3, 2}).DistinctEstimate(), 3u);
}

TEST(AggState, DistinctRegisterFromMix64) {
  AggState s = StateOf(Spec(AggFunc::kDistinct), {42});
  uint64_t h = Mix64(42);
  EXPECT_EQ(s.bytes()[HllIndex(h)], HllRank(h));
  int nonzero = 0;
  for (uint8_t r : s.bytes()) nonzero += r != 0;
  EXPECT_EQ(nonzero, 1);
}

TEST(AggState, DistinctStringsHashTheZeroPaddedBuffer) {
  AggState s(Spec(AggFunc::kDistinct));
  s.UpdateString("ab", 16);
  uint64_t h = Mix64(Mix64(0 ^ 0x6261ULL) ^ 0);
  EXPECT_EQ(s.bytes()[HllIndex(h)], HllRank(h));

  // Longer than the buffer: only str_len - 1 bytes count.
  AggState t(Spec(AggFunc::kDistinct));
  t.UpdateString("0123456789abcdefXYZ", 16);
  AggState u(Spec(AggFunc::kDistinct));
  u.UpdateString("0123456789abcde", 16);
  EXPECT_EQ(t, u);

  AggState d(Spec(AggFunc::kDistinct));
  for (const char* w : {"bash", "dd", "bash", "cat", "dd"}) d.UpdateString(w, 16);
  EXPECT_EQ(d.DistinctEstimate(), 3u);
}

TEST(AggState, FromBytesReadsKernelLayout) {
  int64_t words[2] = {1, -3};
  AggState mn = AggState::FromBytes(Spec(AggFunc::kMin), words, sizeof words);
  EXPECT_EQ(mn.Scalar(), -3);
  EXPECT_EQ(mn, StateOf(Spec(AggFunc::kMin), {-3}));
}

TEST(AggState, SerializeRoundTrip) {
  std::vector<AggSpec> specs = {
      Spec(AggFunc::kCount), Spec(AggFunc::kSum), Spec(AggFunc::kMin),
      Spec(AggFunc::kMax),   Spec(AggFunc::kAvg), Spec(AggFunc::kHist),
      Lhist(-10, 50, 5),     Quantile(0.99),      Spec(AggFunc::kDistinct)};
  for (const AggSpec& spec : specs) {
    AggState s = StateOf(spec, Concat(kA, kB));
    auto back = AggState::Deserialize(s.Serialize());
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, s);
    EXPECT_EQ(back->spec().func, spec.func);
  }
  auto lh = AggState::Deserialize(StateOf(Lhist(-10, 50, 5), kA).Serialize());
  ASSERT_TRUE(lh.ok());
  EXPECT_EQ(lh->spec().lo, -10);
  EXPECT_EQ(lh->spec().hi, 50);
  EXPECT_EQ(lh->spec().step, 5);
  auto qs = AggState::Deserialize(StateOf(Quantile(0.99), kA).Serialize());
  ASSERT_TRUE(qs.ok());
  EXPECT_EQ(qs->spec().q, 0.99);
}

TEST(AggState, DeserializeRejectsCorruptInput) {
  std::string good = StateOf(Spec(AggFunc::kAvg), kA).Serialize();
  ASSERT_TRUE(AggState::Deserialize(good).ok());
  EXPECT_FALSE(AggState::Deserialize("").ok());
  EXPECT_FALSE(AggState::Deserialize(good.substr(0, good.size() - 1)).ok());
  EXPECT_FALSE(AggState::Deserialize(good + "x").ok());
  std::string bad_version = good;
  bad_version[0] = 9;
  EXPECT_EQ(AggState::Deserialize(bad_version).status().code(), Code::kInvalidArgument);
  std::string bad_func = good;
  bad_func[1] = 42;
  EXPECT_FALSE(AggState::Deserialize(bad_func).ok());
  std::string wrong_size = good;
  wrong_size[1] = static_cast<char>(AggFunc::kCount);  // 16 bytes of state for an 8-byte count
  EXPECT_FALSE(AggState::Deserialize(wrong_size).ok());

  std::string lh = StateOf(Lhist(0, 100, 10), kA).Serialize();
  // version, func, then zigzag varints: lo 0 (1 byte), hi 100 (2 bytes), step 10 at byte 5.
  std::string zero_step = lh;
  ASSERT_EQ(zero_step[5], 20);
  zero_step[5] = 0;
  EXPECT_FALSE(AggState::Deserialize(zero_step).ok());

  std::string hll = StateOf(Spec(AggFunc::kDistinct), kA).Serialize();
  hll.back() = static_cast<char>(200);
  EXPECT_FALSE(AggState::Deserialize(hll).ok());

  // Every truncation and every single-byte flip either parses or fails cleanly.
  std::string q = StateOf(Quantile(0.5), kA).Serialize();
  for (size_t n = 0; n < q.size(); ++n) EXPECT_FALSE(AggState::Deserialize(q.substr(0, n)).ok());
  for (size_t i = 0; i < q.size(); ++i) {
    std::string flipped = q;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    (void)AggState::Deserialize(flipped);
  }
}

// The wire form is compact (an empty histogram bucket is one byte), and merging it in place
// gives what decoding and merging gives.
TEST(AggState, SerializedStatesAreCompactAndMergeInPlace) {
  AggState h = StateOf(Spec(AggFunc::kHist), kA);
  EXPECT_LT(h.Serialize().size(), 100u);  // 66 buckets of 8 bytes in memory
  std::vector<AggSpec> specs = {
      Spec(AggFunc::kCount), Spec(AggFunc::kSum), Spec(AggFunc::kMin),
      Spec(AggFunc::kMax),   Spec(AggFunc::kAvg), Spec(AggFunc::kHist),
      Lhist(-10, 50, 5),     Quantile(0.99),      Spec(AggFunc::kDistinct)};
  for (const AggSpec& spec : specs) {
    AggState a = StateOf(spec, kA), b = StateOf(spec, kB);
    AggState merged = a;
    merged.Merge(b);
    AggState in_place = a;
    std::string wire = b.Serialize();
    ASSERT_TRUE(AggState::Validate(wire).ok());
    in_place.MergeSerialized(wire);
    EXPECT_EQ(in_place, merged) << static_cast<int>(spec.func);
    AggState fresh;
    fresh.MergeSerialized(wire);
    EXPECT_EQ(fresh, b) << static_cast<int>(spec.func);
  }
}

}  // namespace
}  // namespace fay
