#include "probes/profile_provider.h"

#include <charconv>

namespace fay {

Expected<std::vector<ProbeInfo>> ProfileProvider::Resolve(std::string_view pattern) {
  // bpftrace spells it profile:hz:99; accept that too.
  std::string_view text = pattern;
  if (text.rfind("hz:", 0) == 0) text.remove_prefix(3);
  uint64_t hz = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), hz);
  if (ec != std::errc() || ptr != text.data() + text.size() || hz == 0 || hz > kMaxHz) {
    return Error(Code::kInvalidArgument, "bad sampling rate 'profile:" + std::string(pattern) +
                                             "': expected a frequency in Hz from 1 to " +
                                             std::to_string(kMaxHz) + ", e.g. profile:99");
  }
  ProbeInfo p;
  p.name = "profile:" + std::to_string(hz);
  p.kind = ProbeKind::kProfile;
  p.hz = hz;
  p.fields = CommonFields();
  for (Field& f : StackFields()) p.fields.push_back(std::move(f));
  return std::vector<ProbeInfo>{std::move(p)};
}

Expected<std::vector<std::string>> ProfileProvider::List(std::string_view pattern) {
  FAY_ASSIGN_OR_RETURN(auto probes, Resolve(pattern));
  return std::vector<std::string>{probes[0].name};
}

}  // namespace fay
