// Mergeable partial aggregate states. A state is the byte layout of query/agg_layout.h, so the
// per-CPU values read from a map, the interpreter's states and serialized states from another
// machine are all the same thing, and merging is one function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "query/ast.h"

namespace fay {

struct AggSpec {
  AggFunc func = AggFunc::kCount;
  int64_t lo = 0, hi = 0, step = 0;  // lhist
  double q = 0;                      // quantile
};

class AggState {
 public:
  AggState() = default;
  explicit AggState(const AggSpec& spec);
  // Wraps raw bytes in the agg_layout.h format (e.g. one CPU's slice of a map value).
  static AggState FromBytes(const AggSpec& spec, const void* data, size_t len);

  static size_t SizeOf(const AggSpec& spec);  // bytes in the agg_layout.h format

  void Update(int64_t v);  // count ignores v; distinct hashes v with Mix64
  void UpdateString(const std::string& s, int str_len);  // distinct over strings
  void Merge(const AggState& other);

  // Serialization for the wire and files: spec + bytes; Deserialize validates sizes.
  std::string Serialize() const;
  static Expected<AggState> Deserialize(const std::string& bytes);
  // Checks a serialized state in place, without copying it: its spec, or why it is corrupt.
  static Expected<AggSpec> Validate(std::string_view bytes);
  // Merges a serialized state that Validate accepted, without decoding it into a new state.
  void MergeSerialized(std::string_view bytes);

  const AggSpec& spec() const { return spec_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

  // Scalar views, for sorting and printing.
  // The state's i-th 64-bit word in the agg_layout.h format (0 past its end): a histogram's
  // bucket, avg's sum (0) and count (1), a quantile sketch's bucket.
  uint64_t Word(int i) const;
  uint64_t Count() const;  // count / avg's n / total of a histogram
  int64_t Scalar() const;  // count, sum, min, max, avg (truncated), quantile, distinct
  double Average() const;
  int64_t QuantileValue() const;
  uint64_t DistinctEstimate() const;
  bool Empty() const;  // min/max/avg with no value

  bool operator==(const AggState& o) const;

 private:
  AggSpec spec_;
  std::vector<uint8_t> bytes_;
};

AggSpec SpecOf(const AggItem& item);
// Whether states of the two specs have one layout and may be merged.
bool SameSpec(const AggSpec& a, const AggSpec& b);

}  // namespace fay
