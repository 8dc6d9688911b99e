#include "probes/kernel_symbols.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "probes/read_file.h"
#include "probes/symbolizer.h"

namespace fay {

std::vector<std::pair<uint64_t, std::string>> KernelSymbols::Parse(const std::string& text) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    // "ADDR TYPE NAME [module]"
    const size_t a = line.find(' ');
    if (a == std::string::npos || a + 3 > line.size()) continue;
    const char type = line[a + 1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    const size_t name_at = a + 3;
    const size_t name_end = line.find_first_of(" \t", name_at);
    uint64_t addr = std::strtoull(line.substr(0, a).c_str(), nullptr, 16);
    if (addr == 0) continue;  // hidden from this reader
    out.emplace_back(
        addr, line.substr(name_at,
                          name_end == std::string::npos ? std::string::npos : name_end - name_at));
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t KernelSymbols::TracingFrames(const std::vector<std::string>& names) {
  // The program itself may have no name (bpf_jit_kallsyms off): everything up to the last
  // tracing frame among the first few goes.
  auto tracing = [](const std::string& s) {
    for (const char* prefix : {"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"})
      if (s.rfind(prefix, 0) == 0) return true;
    return false;
  };
  size_t n = 0;
  for (size_t i = 0; i < names.size() && i < 6; ++i)
    if (tracing(names[i])) n = i + 1;
  return n;
}

std::string KernelSymbols::Name(uint64_t addr, bool return_address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) {
    loaded_ = true;
    if (auto text = ReadWholeFile("/proc/kallsyms"); text.ok()) symbols_ = Parse(*text);
  }
  const uint64_t at = return_address && addr > 0 ? addr - 1 : addr;
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), at,
                             [](uint64_t a, const auto& s) { return a < s.first; });
  // Past the last symbol there is no telling what the address is.
  if (it == symbols_.begin() || it == symbols_.end()) return "";
  --it;
  const uint64_t off = addr - it->first;
  return off ? fmt::format("{}+0x{:x}", it->second, off) : it->second;
}

std::vector<std::string> KernelSymbols::StackNames(const std::vector<uint64_t>& frames) {
  std::vector<std::string> out;
  out.reserve(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    std::string name = Name(frames[i], i > 0);
    out.push_back(name.empty() ? HexAddress(frames[i]) : std::move(name));
  }
  return out;
}

}  // namespace fay
