// syscall:NAME: one event per completed call, typed from tracefs syscalls/sys_{enter,exit}_NAME.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/provider.h"

namespace fay {

// The query type of a syscall argument spelled `c_type` in a tracefs format. The kernel stores
// every argument as an 8-byte long, so only the signedness and the string-pointer flag matter.
Type SyscallArgType(std::string_view c_type);

class SyscallProvider : public Provider {
 public:
  // tracefs_root empty: find (or mount) tracefs on first use.
  explicit SyscallProvider(std::string tracefs_root = "") : root_(std::move(tracefs_root)) {}

  std::string_view prefix() const override { return "syscall"; }
  Expected<std::vector<ProbeInfo>> Resolve(std::string_view pattern) override;
  Expected<std::vector<std::string>> List(std::string_view pattern) override;
  std::vector<std::string> Nearest(std::string_view pattern, size_t n) override;

 private:
  struct Entry {
    std::string name;   // syscall name ("stat")
    std::string event;  // tracefs stem ("newstat")
  };
  Expected<const std::vector<Entry>*> Entries();
  Expected<std::vector<const Entry*>> Match(std::string_view pattern);
  Expected<ProbeInfo> Build(const Entry& e);

  std::string root_;
  std::optional<std::vector<Entry>> entries_;
};

}  // namespace fay
