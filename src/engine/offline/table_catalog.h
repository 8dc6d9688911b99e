// Syscall probes described by fay's own syscall table, for reading a trace where tracefs cannot
// be read (an unprivileged user, a container without it). Names and types follow the table, so
// an argument may be named differently than live (`args.pathname` where tracefs says
// `args.filename`); with tracefs, the live catalog is used instead.
#pragma once

#include <string>
#include <vector>

#include "schema/probe.h"

namespace fay {

class SyscallTableCatalog : public ProbeCatalog {
 public:
  Expected<std::vector<ProbeInfo>> Resolve(const std::string& spec) override;
  std::vector<std::string> Nearest(const std::string& spec, size_t n) override;
};

// `live` (the system catalog), except that syscall probes come from the table once tracefs
// cannot be read: an unprivileged fay given CAP_BPF and CAP_PERFMON runs syscall queries on raw
// tracepoints, which need no tracefs. fallback_reason() says why the table is used.
class SyscallFallbackCatalog : public ProbeCatalog {
 public:
  explicit SyscallFallbackCatalog(ProbeCatalog& live) : live_(live) {}
  Expected<std::vector<ProbeInfo>> Resolve(const std::string& spec) override;
  std::vector<std::string> Nearest(const std::string& spec, size_t n) override;
  const std::string& fallback_reason() const { return fallback_reason_; }

 private:
  ProbeCatalog& live_;
  SyscallTableCatalog table_;
  std::string fallback_reason_;
};

}  // namespace fay
