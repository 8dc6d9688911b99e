// Names kernel addresses, "func+0x1a", from /proc/kallsyms: for kstack keys. Read once, on
// first use; the kernel shows real addresses only to a reader with CAP_SYSLOG (or with
// kptr_restrict 0), and otherwise all zeros, when frames print as addresses.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fay {

class KernelSymbols {
 public:
  // "func+0x1a" for ADDR (a return address when `return_address`: looked up at ADDR - 1), or
  // "" when no symbol covers it.
  std::string Name(uint64_t addr, bool return_address = false);
  // Name for each frame of a kernel stack, innermost first; an address where there is none.
  std::vector<std::string> StackNames(const std::vector<uint64_t>& frames);

  // How many of a stack's innermost frames are the tracing machinery itself (the BPF program,
  // bpf_trace_run, the tracepoint's iterator), which a raw tracepoint's stack starts with.
  static size_t TracingFrames(const std::vector<std::string>& names);

  // Parses kallsyms text: "ffffffff81000000 T _stext" lines; text symbols only, sorted.
  static std::vector<std::pair<uint64_t, std::string>> Parse(const std::string& text);

 private:
  std::mutex mu_;
  bool loaded_ = false;
  std::vector<std::pair<uint64_t, std::string>> symbols_;  // by address
};

}  // namespace fay
