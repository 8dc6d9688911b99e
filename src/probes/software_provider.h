// software:EVENT[:PERIOD]: the kernel's software perf events (page faults, context switches,
// CPU migrations...) on every CPU, each event or every PERIOD-th, with the user stack and, for
// faults, the faulting address. perf's names and aliases: software:page-faults, software:cs.
#pragma once

#include "probes/provider.h"

namespace fay {

class SoftwareProvider : public Provider {
 public:
  std::string_view prefix() const override { return "software"; }
  Expected<std::vector<ProbeInfo>> Resolve(std::string_view pattern) override;
  Expected<std::vector<std::string>> List(std::string_view pattern) override;
  std::vector<std::string> Nearest(std::string_view pattern, size_t n) override;
};

}  // namespace fay
