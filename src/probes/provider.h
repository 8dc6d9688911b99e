// A probe provider resolves the part of a spec after "PROVIDER:" ("read*" in "syscall:read*").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "schema/probe.h"

namespace fay {

class Provider {
 public:
  virtual ~Provider() = default;
  // "syscall", "tracepoint", ...
  virtual std::string_view prefix() const = 0;
  // Concrete probes for the pattern, fully typed. kNotFound when nothing matches.
  virtual Expected<std::vector<ProbeInfo>> Resolve(std::string_view pattern) = 0;
  // Canonical names matching the pattern, without reading formats; empty when nothing matches.
  virtual Expected<std::vector<std::string>> List(std::string_view pattern) = 0;
  // Names the pattern may have meant, for "did you mean" hints, closest first.
  virtual std::vector<std::string> Nearest(std::string_view pattern, size_t n) = 0;
};

}  // namespace fay
