#include "engine/offline/trace_catalog.h"

#include <fmt/format.h>

#include "common/strings.h"

namespace fay {

void TraceCatalog::AddTraceFields(ProbeInfo& probe) {
  probe.fields.push_back(
      {"bytes", Type::Int(false), FieldSource::kBytes, 0, 8, 0, "u64 captured bytes"});
  probe.fields.push_back(
      {"path", Type::Str(kPathLen), FieldSource::kPath, 0, kPathLen, 0, "char[128] fd path"});
}

Expected<std::vector<ProbeInfo>> TraceCatalog::Resolve(const std::string& spec) {
  std::string_view s = Trim(spec);
  if (s.rfind("syscall:", 0) != 0) {
    std::string provider(s.substr(0, s.find(':')));
    return Error(Code::kInvalidArgument,
                 fmt::format("'{}' is not in a recorded trace: a trace holds syscall events only "
                             "(use syscall:NAME or syscall:*)",
                             provider.empty() ? std::string(s) : provider + ":..."));
  }
  FAY_ASSIGN_OR_RETURN(std::vector<ProbeInfo> probes, live_.Resolve(spec));
  for (ProbeInfo& p : probes) AddTraceFields(p);
  return probes;
}

std::vector<std::string> TraceCatalog::Nearest(const std::string& spec, size_t n) {
  std::vector<std::string> out;
  for (std::string& name : live_.Nearest(spec, n + 8)) {
    if (name.rfind("syscall:", 0) == 0 && out.size() < n) out.push_back(std::move(name));
  }
  return out;
}

}  // namespace fay
