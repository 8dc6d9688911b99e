// interval:DURATION: a timer firing on one CPU every DURATION (1s, 500ms, 100us).
#pragma once

#include <cstdint>

#include "probes/provider.h"

namespace fay {

// "500ms" -> 500000000. Units: ns, us, ms, s, m, h. kInvalidArgument when malformed or zero.
Expected<uint64_t> ParseProbeDuration(std::string_view text);

class IntervalProvider : public Provider {
 public:
  std::string_view prefix() const override { return "interval"; }
  Expected<std::vector<ProbeInfo>> Resolve(std::string_view pattern) override;
  Expected<std::vector<std::string>> List(std::string_view pattern) override;
  std::vector<std::string> Nearest(std::string_view pattern, size_t n) override { return {}; }
};

}  // namespace fay
