// uprobe:PATH:SYMBOL and uretprobe:PATH:SYMBOL: functions in executables and shared libraries.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "probes/elf_symbols.h"
#include "probes/provider.h"

namespace fay {

class UprobeProvider : public Provider {
 public:
  // kind is kUprobe or kUretprobe.
  explicit UprobeProvider(ProbeKind kind) : kind_(kind) {}

  std::string_view prefix() const override {
    return kind_ == ProbeKind::kUretprobe ? "uretprobe" : "uprobe";
  }
  Expected<std::vector<ProbeInfo>> Resolve(std::string_view pattern) override;
  Expected<std::vector<std::string>> List(std::string_view pattern) override;
  std::vector<std::string> Nearest(std::string_view pattern, size_t n) override;

 private:
  struct Target {
    std::string path;  // resolved, absolute
    std::vector<const ElfSymbol*> symbols;
  };
  // Symbols of PATH matching the SYMBOL glob, one per address (the first name wins).
  Expected<Target> Match(std::string_view pattern);
  Expected<const std::vector<ElfSymbol>*> Symbols(const std::string& path);

  ProbeKind kind_;
  std::map<std::string, std::vector<ElfSymbol>> cache_;  // by resolved path
};

}  // namespace fay
