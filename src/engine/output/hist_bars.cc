#include "engine/output/hist_bars.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "query/agg_layout.h"

namespace fay {
namespace {

constexpr int kBarWidth = 52;
constexpr size_t kLabelWidth = 16;

HistBucket Log2Bucket(int i) {
  HistBucket b;
  if (i == 0) {
    b.label = "(..., 0)";
    b.has_lo = false;
    b.hi = 0;
  } else if (i == 1) {
    b.label = "[0]";
    b.lo = 0;
    b.hi = 1;
  } else {
    int k = i - 2;  // [2^k, 2^(k+1))
    b.lo = int64_t{1} << k;
    b.label = k == 0 ? "[1]" : fmt::format("[{}, {})", Pow2Label(k), Pow2Label(k + 1));
    if (k < 62) {
      b.hi = int64_t{1} << (k + 1);
    } else {
      b.has_hi = false;
    }
  }
  return b;
}

HistBucket LinearBucket(const AggSpec& spec, int i, int nslots) {
  HistBucket b;
  int64_t n = nslots - 2;
  if (i == 0) {
    b.label = fmt::format("(..., {})", spec.lo);
    b.has_lo = false;
    b.hi = spec.lo;
  } else if (i == nslots - 1) {
    // LhistIndex sends every v >= lo + n * step here (that is hi when step divides the span).
    b.lo = spec.lo + n * spec.step;
    b.label = fmt::format("[{}, ...)", b.lo);
    b.has_hi = false;
  } else {
    b.lo = spec.lo + (i - 1) * spec.step;
    b.hi = b.lo + spec.step;
    b.label = fmt::format("[{}, {})", b.lo, b.hi);
  }
  return b;
}

}  // namespace

std::string Pow2Label(int power) {
  static const char kSuffix[] = {'\0', 'K', 'M', 'G', 'T', 'P', 'E'};
  int unit = std::min(power / 10, 6);
  uint64_t v = uint64_t{1} << (power - unit * 10);
  std::string s = std::to_string(v);
  if (unit > 0) s += kSuffix[unit];
  return s;
}

std::vector<HistBucket> HistBuckets(const AggState& state) {
  const AggSpec& spec = state.spec();
  int nslots = static_cast<int>(state.bytes().size() / 8);
  int first = -1, last = -1;
  for (int i = 0; i < nslots; ++i) {
    if (state.Word(i) == 0) continue;
    if (first < 0) first = i;
    last = i;
  }
  std::vector<HistBucket> out;
  if (first < 0) return out;
  for (int i = first; i <= last; ++i) {
    HistBucket b = spec.func == AggFunc::kLhist ? LinearBucket(spec, i, nslots) : Log2Bucket(i);
    b.count = state.Word(i);
    out.push_back(std::move(b));
  }
  return out;
}

std::string HistBars(const AggState& state) {
  std::vector<HistBucket> buckets = HistBuckets(state);
  uint64_t max = 0;
  size_t label_width = kLabelWidth;
  for (const auto& b : buckets) {
    max = std::max(max, b.count);
    label_width = std::max(label_width, b.label.size());
  }
  std::string out;
  for (const auto& b : buckets) {
    int len = static_cast<int>(static_cast<unsigned __int128>(b.count) * kBarWidth / max);
    out += fmt::format("{:<{}} {:>8} |{:<{}}|\n", b.label, label_width, b.count,
                       std::string(len, '@'), kBarWidth);
  }
  return out;
}

}  // namespace fay
