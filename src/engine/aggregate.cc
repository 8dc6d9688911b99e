#include "engine/aggregate.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "query/agg_layout.h"

namespace fay {
namespace {

// Bounds an lhist so that a corrupt or hostile serialized spec cannot make us allocate gigabytes.
constexpr int64_t kMaxLhistBuckets = 1 << 20;
constexpr int kHllMaxRank = 64 - kHllBits + 1;

bool LhistValid(const AggSpec& s) {
  if (s.step <= 0 || s.hi <= s.lo) return false;
  // hi - lo can overflow for extreme bounds; compare in unsigned space.
  uint64_t span = static_cast<uint64_t>(s.hi) - static_cast<uint64_t>(s.lo);
  return span / static_cast<uint64_t>(s.step) <= kMaxLhistBuckets;
}

uint64_t LoadWord(const std::vector<uint8_t>& b, size_t i) {
  uint64_t w = 0;
  if ((i + 1) * 8 <= b.size()) std::memcpy(&w, b.data() + i * 8, 8);
  return w;
}

void StoreWord(std::vector<uint8_t>& b, size_t i, uint64_t w) {
  if ((i + 1) * 8 <= b.size()) std::memcpy(b.data() + i * 8, &w, 8);
}

void AddWord(std::vector<uint8_t>& b, size_t i, uint64_t d) {
  StoreWord(b, i, LoadWord(b, i) + d);
}

void DistinctAdd(std::vector<uint8_t>& regs, uint64_t h) {
  if (regs.size() != static_cast<size_t>(kHllRegs)) return;
  uint8_t& r = regs[HllIndex(h)];
  r = std::max<uint8_t>(r, static_cast<uint8_t>(HllRank(h)));
}

// Serialized form (the cluster's wire; version 2). Compact, because a window of a busy host
// holds hundreds of mostly empty histograms:
//   u8 version (2) | u8 func | lhist only: varint zigzag lo, hi, step | quantile only: f64 q
//   | varint len (bytes of the layout) | body
// The body of distinct is its len register bytes; every other layout is a vector of u64
// counters (agg_layout.h), each as a varint, so an empty bucket takes one byte.
constexpr uint8_t kSerialVersion = 2;

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads a varint at *pos; false past the end or past 10 bytes.
bool GetVarintSlow(std::string_view in, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < in.size(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(in[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Most counters of a window's histograms are 0 or small, one byte: that case is inlined into
// the merge loops, which a coordinator runs for every bucket of every group it hears.
inline bool GetVarint(std::string_view in, size_t* pos, uint64_t* v) {
  if (*pos < in.size() && !(static_cast<uint8_t>(in[*pos]) & 0x80)) [[likely]] {
    *v = static_cast<uint8_t>(in[(*pos)++]);
    return true;
  }
  return GetVarintSlow(in, pos, v);
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

bool IsCounterLayout(AggFunc f) {
  return f != AggFunc::kDistinct;
}

// The header of a serialized state: its spec and where its body starts, or why it is corrupt.
Expected<std::pair<AggSpec, size_t>> ParseHeader(std::string_view in) {
  auto bad = [](const std::string& why) {
    return Error(Code::kInvalidArgument, "corrupt aggregate state: " + why);
  };
  if (in.size() < 3) return bad("truncated header");
  if (static_cast<uint8_t>(in[0]) != kSerialVersion)
    return bad("unsupported version " + std::to_string(static_cast<uint8_t>(in[0])));
  uint8_t func = static_cast<uint8_t>(in[1]);
  if (func > static_cast<uint8_t>(AggFunc::kDistinct)) return bad("unknown function");
  AggSpec spec;
  spec.func = static_cast<AggFunc>(func);
  size_t pos = 2;
  if (spec.func == AggFunc::kLhist) {
    uint64_t lo, hi, step;
    if (!GetVarint(in, &pos, &lo) || !GetVarint(in, &pos, &hi) || !GetVarint(in, &pos, &step))
      return bad("truncated header");
    spec.lo = UnZigZag(lo);
    spec.hi = UnZigZag(hi);
    spec.step = UnZigZag(step);
    if (!LhistValid(spec)) return bad("invalid lhist bounds");
  }
  if (spec.func == AggFunc::kQuantile) {
    if (in.size() < pos + 8) return bad("truncated header");
    std::memcpy(&spec.q, in.data() + pos, 8);
    pos += 8;
    if (!(spec.q > 0 && spec.q <= 1)) return bad("invalid quantile");
  }
  uint64_t len;
  if (!GetVarint(in, &pos, &len)) return bad("truncated header");
  if (len != AggState::SizeOf(spec)) return bad("state size does not match its function");
  return std::make_pair(spec, pos);
}

}  // namespace

bool SameSpec(const AggSpec& a, const AggSpec& b) {
  if (a.func != b.func) return false;
  if (a.func == AggFunc::kLhist) return a.lo == b.lo && a.hi == b.hi && a.step == b.step;
  if (a.func == AggFunc::kQuantile) return a.q == b.q;
  return true;
}

AggState::AggState(const AggSpec& spec) : spec_(spec), bytes_(SizeOf(spec), 0) {}

AggState AggState::FromBytes(const AggSpec& spec, const void* data, size_t len) {
  AggState s(spec);
  std::memcpy(s.bytes_.data(), data, std::min(len, s.bytes_.size()));
  return s;
}

size_t AggState::SizeOf(const AggSpec& spec) {
  switch (spec.func) {
    case AggFunc::kCount:
    case AggFunc::kSum:
      return 8;
    case AggFunc::kMin:
    case AggFunc::kMax:
    case AggFunc::kAvg:
      return 16;
    case AggFunc::kHist:
      return kHistSlots * 8;
    case AggFunc::kLhist:
      // An invalid spec gets only the two out-of-range slots; the semantic pass rejects it first.
      return LhistValid(spec) ? LhistSlots(spec.lo, spec.hi, spec.step) * 8 : 16;
    case AggFunc::kQuantile:
      return kQuantSlots * 8;
    case AggFunc::kDistinct:
      return kHllRegs;
  }
  return 0;
}

void AggState::Update(int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  switch (spec_.func) {
    case AggFunc::kCount:
      AddWord(bytes_, 0, 1);
      break;
    case AggFunc::kSum:
      AddWord(bytes_, 0, u);  // wraps, like the probe's 64-bit add
      break;
    case AggFunc::kMin:
    case AggFunc::kMax: {
      bool seen = LoadWord(bytes_, 0) != 0;
      int64_t cur = static_cast<int64_t>(LoadWord(bytes_, 1));
      bool better = spec_.func == AggFunc::kMin ? v < cur : v > cur;
      if (!seen || better) {
        StoreWord(bytes_, 0, 1);
        StoreWord(bytes_, 1, u);
      }
      break;
    }
    case AggFunc::kAvg:
      AddWord(bytes_, 0, u);
      AddWord(bytes_, 1, 1);
      break;
    case AggFunc::kHist:
      AddWord(bytes_, HistIndex(v), 1);
      break;
    case AggFunc::kLhist:
      if (LhistValid(spec_)) AddWord(bytes_, LhistIndex(v, spec_.lo, spec_.hi, spec_.step), 1);
      break;
    case AggFunc::kQuantile:
      AddWord(bytes_, QuantIndex(v), 1);
      break;
    case AggFunc::kDistinct:
      DistinctAdd(bytes_, Mix64(u));
      break;
  }
}

void AggState::UpdateString(const std::string& s, int str_len) {
  if (spec_.func == AggFunc::kCount) {
    Update(0);
    return;
  }
  if (spec_.func != AggFunc::kDistinct || str_len <= 0) return;
  // The probe hashes its zero-initialized key buffer: at most str_len - 1 bytes, then NULs.
  std::vector<uint8_t> buf((static_cast<size_t>(str_len) + 7) / 8 * 8, 0);
  size_t n = std::min(std::min(s.size(), static_cast<size_t>(str_len - 1)), std::strlen(s.c_str()));
  std::memcpy(buf.data(), s.data(), n);
  uint64_t h = 0;
  for (size_t i = 0; i < buf.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, buf.data() + i, 8);
    h = Mix64(h ^ w);
  }
  DistinctAdd(bytes_, h);
}

void AggState::Merge(const AggState& other) {
  if (other.bytes_.empty()) return;
  if (bytes_.empty()) {  // a default-constructed accumulator adopts the first state
    *this = other;
    return;
  }
  if (!SameSpec(spec_, other.spec_) || bytes_.size() != other.bytes_.size()) return;
  switch (spec_.func) {
    case AggFunc::kMin:
    case AggFunc::kMax: {
      if (LoadWord(other.bytes_, 0) == 0) break;
      int64_t ov = static_cast<int64_t>(LoadWord(other.bytes_, 1));
      Update(ov);
      break;
    }
    case AggFunc::kDistinct:
      for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = std::max(bytes_[i], other.bytes_[i]);
      break;
    default:  // every other layout is a vector of counters (avg: sum and n)
      for (size_t i = 0; i < bytes_.size() / 8; ++i) AddWord(bytes_, i, LoadWord(other.bytes_, i));
      break;
  }
}

std::string AggState::Serialize() const {
  std::string out;
  out.reserve(16 + (IsCounterLayout(spec_.func) ? bytes_.size() / 8 : bytes_.size()));
  out.push_back(static_cast<char>(kSerialVersion));
  out.push_back(static_cast<char>(spec_.func));
  if (spec_.func == AggFunc::kLhist) {
    PutVarint(out, ZigZag(spec_.lo));
    PutVarint(out, ZigZag(spec_.hi));
    PutVarint(out, ZigZag(spec_.step));
  }
  if (spec_.func == AggFunc::kQuantile)
    out.append(reinterpret_cast<const char*>(&spec_.q), sizeof spec_.q);
  PutVarint(out, bytes_.size());
  if (IsCounterLayout(spec_.func)) {
    for (size_t i = 0; i < bytes_.size() / 8; ++i) PutVarint(out, LoadWord(bytes_, i));
  } else {
    out.append(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
  }
  return out;
}

Expected<AggSpec> AggState::Validate(std::string_view in) {
  auto bad = [](const std::string& why) {
    return Error(Code::kInvalidArgument, "corrupt aggregate state: " + why);
  };
  FAY_ASSIGN_OR_RETURN(auto header, ParseHeader(in));
  auto [spec, pos] = header;
  size_t len = SizeOf(spec);
  if (IsCounterLayout(spec.func)) {
    uint64_t w;
    if (!GetVarint(in, &pos, &w)) return bad("truncated body");
    if ((spec.func == AggFunc::kMin || spec.func == AggFunc::kMax) && w > 1)
      return bad("invalid min/max flag");
    for (size_t i = 1; i < len / 8; ++i)
      if (!GetVarint(in, &pos, &w)) return bad("truncated body");
  } else {
    if (in.size() < pos + len) return bad("truncated body");
    for (size_t i = 0; i < len; ++i)
      if (static_cast<uint8_t>(in[pos + i]) > kHllMaxRank)
        return bad("invalid HyperLogLog register");
    pos += len;
  }
  if (pos != in.size()) return bad("length mismatch");
  return spec;
}

Expected<AggState> AggState::Deserialize(const std::string& in) {
  FAY_ASSIGN_OR_RETURN(AggSpec spec, Validate(in));
  AggState s(spec);
  s.MergeSerialized(in);
  return s;
}

void AggState::MergeSerialized(std::string_view in) {
  // Validate has checked it; a state that fails here again is left alone.
  auto header = ParseHeader(in);
  if (!header.ok()) return;
  auto [spec, pos] = *header;
  size_t len = SizeOf(spec);
  if (bytes_.empty()) *this = AggState(spec);
  if (!SameSpec(spec_, spec) || bytes_.size() != len) return;
  if (!IsCounterLayout(spec.func)) {
    if (in.size() < pos + len) return;
    for (size_t i = 0; i < len; ++i)
      bytes_[i] = std::max(bytes_[i], static_cast<uint8_t>(in[pos + i]));
    return;
  }
  if (spec.func == AggFunc::kMin || spec.func == AggFunc::kMax) {
    uint64_t has, v;
    if (GetVarint(in, &pos, &has) && GetVarint(in, &pos, &v) && has) {
      if (LoadWord(bytes_, 0) == 0) {
        StoreWord(bytes_, 0, 1);
        StoreWord(bytes_, 1, v);
      } else {
        Update(static_cast<int64_t>(v));
      }
    }
    return;
  }
  // bytes_ holds len bytes (checked above): each counter is added in place.
  uint8_t* words = bytes_.data();
  for (size_t i = 0; i < len / 8; ++i) {
    uint64_t w, cur;
    if (!GetVarint(in, &pos, &w)) return;
    std::memcpy(&cur, words + i * 8, 8);
    cur += w;
    std::memcpy(words + i * 8, &cur, 8);
  }
}

uint64_t AggState::Word(int i) const {
  return i >= 0 && static_cast<size_t>(i + 1) * 8 <= bytes_.size()
             ? LoadWord(bytes_, static_cast<size_t>(i))
             : 0;
}

uint64_t AggState::Count() const {
  switch (spec_.func) {
    case AggFunc::kCount:
    case AggFunc::kMin:
    case AggFunc::kMax:
      return LoadWord(bytes_, 0);
    case AggFunc::kAvg:
      return LoadWord(bytes_, 1);
    case AggFunc::kHist:
    case AggFunc::kLhist:
    case AggFunc::kQuantile: {
      uint64_t total = 0;
      for (size_t i = 0; i < bytes_.size() / 8; ++i) total += LoadWord(bytes_, i);
      return total;
    }
    case AggFunc::kSum:
    case AggFunc::kDistinct:
      return 0;
  }
  return 0;
}

int64_t AggState::Scalar() const {
  switch (spec_.func) {
    case AggFunc::kCount:
    case AggFunc::kSum:
      return static_cast<int64_t>(LoadWord(bytes_, 0));
    case AggFunc::kMin:
    case AggFunc::kMax:
      return static_cast<int64_t>(LoadWord(bytes_, 1));
    case AggFunc::kAvg: {
      int64_t n = static_cast<int64_t>(LoadWord(bytes_, 1));
      return n == 0 ? 0 : static_cast<int64_t>(LoadWord(bytes_, 0)) / n;
    }
    case AggFunc::kQuantile:
      return QuantileValue();
    case AggFunc::kDistinct:
      return static_cast<int64_t>(DistinctEstimate());
    case AggFunc::kHist:
    case AggFunc::kLhist:
      return static_cast<int64_t>(Count());
  }
  return 0;
}

double AggState::Average() const {
  if (spec_.func != AggFunc::kAvg) return static_cast<double>(Scalar());
  uint64_t n = LoadWord(bytes_, 1);
  if (n == 0) return 0;
  return static_cast<double>(static_cast<int64_t>(LoadWord(bytes_, 0))) / static_cast<double>(n);
}

int64_t AggState::QuantileValue() const {
  if (spec_.func != AggFunc::kQuantile) return 0;
  uint64_t total = Count();
  if (total == 0) return 0;
  double want = std::ceil(spec_.q * static_cast<double>(total));
  uint64_t rank = want < 1 ? 1 : std::min<uint64_t>(total, static_cast<uint64_t>(want));
  uint64_t seen = 0;
  for (int i = 0; i < kQuantSlots; ++i) {
    seen += LoadWord(bytes_, i);
    if (seen >= rank) return QuantBucketValue(i);
  }
  return 0;
}

uint64_t AggState::DistinctEstimate() const {
  if (spec_.func != AggFunc::kDistinct || bytes_.size() != static_cast<size_t>(kHllRegs)) return 0;
  const double m = kHllRegs;
  double sum = 0;
  int zeros = 0;
  for (uint8_t r : bytes_) {
    sum += std::ldexp(1.0, -static_cast<int>(r));
    if (r == 0) ++zeros;
  }
  const double alpha = 0.7213 / (1 + 1.079 / m);
  double e = alpha * m * m / sum;
  // Linear counting is far more accurate while many registers are still empty.
  if (e <= 2.5 * m && zeros > 0) e = m * std::log(m / zeros);
  return static_cast<uint64_t>(std::llround(e));
}

bool AggState::Empty() const {
  switch (spec_.func) {
    case AggFunc::kMin:
    case AggFunc::kMax:
      return LoadWord(bytes_, 0) == 0;
    case AggFunc::kAvg:
      return LoadWord(bytes_, 1) == 0;
    default:
      return false;
  }
}

bool AggState::operator==(const AggState& o) const {
  return SameSpec(spec_, o.spec_) && bytes_ == o.bytes_;
}

AggSpec SpecOf(const AggItem& item) {
  AggSpec s;
  s.func = item.func;
  s.lo = item.lo;
  s.hi = item.hi;
  s.step = item.step;
  s.q = item.q;
  return s;
}

}  // namespace fay
