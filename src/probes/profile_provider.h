// profile:HZ: sampling on every CPU at HZ on the software cpu-clock, with the user stack.
#pragma once

#include "probes/provider.h"

namespace fay {

class ProfileProvider : public Provider {
 public:
  // perf's default kernel.perf_event_max_sample_rate; higher rates get throttled anyway.
  static constexpr uint64_t kMaxHz = 100000;

  std::string_view prefix() const override { return "profile"; }
  Expected<std::vector<ProbeInfo>> Resolve(std::string_view pattern) override;
  Expected<std::vector<std::string>> List(std::string_view pattern) override;
  std::vector<std::string> Nearest(std::string_view pattern, size_t n) override { return {}; }
};

}  // namespace fay
