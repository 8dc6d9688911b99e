// The real probe catalog: tracefs for syscalls and tracepoints, ELF files for uprobes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "probes/provider.h"
#include "schema/probe.h"

namespace fay {

// Providers of other tracers ("kprobe", "fentry") that fay deliberately does not offer: specs
// using them get an explanation instead of a "did you mean".
bool IsForeignProvider(std::string_view prefix);

class SystemCatalog : public ProbeCatalog {
 public:
  // tracefs_root empty: find (or, as root, mount) tracefs on first use.
  explicit SystemCatalog(std::string tracefs_root = "");
  ~SystemCatalog() override;

  // "syscall:read*", "tracepoint:sched:sched_switch", "uprobe:/bin/bash:readline",
  // "uretprobe:libc:malloc", "interval:1s", "profile:99". Leading/trailing blanks are ignored.
  Expected<std::vector<ProbeInfo>> Resolve(const std::string& spec) override;
  std::vector<std::string> Nearest(const std::string& spec, size_t n) override;

  // Canonical names matching spec without reading formats (cheap; for `fay probes`).
  Expected<std::vector<std::string>> List(const std::string& spec);

  // "syscall", "tracepoint", "uprobe", "uretprobe", "interval", "profile".
  std::vector<std::string> ProviderNames() const;

 private:
  // The provider named by spec's prefix and the rest of the spec, or kNotFound.
  Expected<std::pair<Provider*, std::string>> Route(const std::string& spec);

  std::vector<std::unique_ptr<Provider>> providers_;
};

}  // namespace fay
