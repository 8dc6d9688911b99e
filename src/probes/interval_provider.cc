#include "probes/interval_provider.h"

#include <charconv>

namespace fay {

Expected<uint64_t> ParseProbeDuration(std::string_view text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view unit(ptr, text.data() + text.size() - ptr);
  auto bad = [&] {
    return Error(Code::kInvalidArgument,
                 "bad duration '" + std::string(text) + "': expected e.g. 1s, 500ms, 100us");
  };
  if (ec != std::errc() || ptr == text.data()) return bad();
  uint64_t scale = 0;
  if (unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1000;
  else if (unit == "ms")
    scale = 1000 * 1000;
  else if (unit == "s")
    scale = 1000ull * 1000 * 1000;
  else if (unit == "m")
    scale = 60ull * 1000 * 1000 * 1000;
  else if (unit == "h")
    scale = 3600ull * 1000 * 1000 * 1000;
  else
    return bad();
  if (value == 0) {
    return Error(Code::kInvalidArgument, "duration '" + std::string(text) + "' must be positive");
  }
  if (value > UINT64_MAX / scale) return bad();
  return value * scale;
}

Expected<std::vector<ProbeInfo>> IntervalProvider::Resolve(std::string_view pattern) {
  // bpftrace spells it interval:s:1, interval:ms:100, interval:hz:10: accepted too.
  std::string spelled(pattern);
  if (size_t colon = pattern.find(':'); colon != std::string_view::npos) {
    std::string_view unit = pattern.substr(0, colon), n = pattern.substr(colon + 1);
    if (unit == "hz") {
      uint64_t hz = 0;
      auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), hz);
      if (ec != std::errc() || ptr != n.data() + n.size() || hz == 0 || hz > 1'000'000'000)
        return Error(Code::kInvalidArgument,
                     "bad rate '" + std::string(n) + "': expected e.g. interval:hz:10");
      spelled = std::to_string(1'000'000'000 / hz) + "ns";
    } else {
      spelled = std::string(n) + std::string(unit);
    }
  }
  FAY_ASSIGN_OR_RETURN(uint64_t ns, ParseProbeDuration(spelled));
  ProbeInfo p;
  p.name = "interval:" + std::string(pattern);
  p.kind = ProbeKind::kInterval;
  p.period_ns = ns;
  p.fields = CommonFields();
  // A timer on one CPU (CPU 0), as bpftrace's: the stacks are of whatever it interrupted there.
  for (Field& f : StackFields()) p.fields.push_back(std::move(f));
  return std::vector<ProbeInfo>{std::move(p)};
}

Expected<std::vector<std::string>> IntervalProvider::List(std::string_view pattern) {
  FAY_ASSIGN_OR_RETURN(auto probes, Resolve(pattern));
  return std::vector<std::string>{probes[0].name};
}

}  // namespace fay
