#include "engine/offline/trace_catalog.h"

#include <fmt/format.h>

#include "common/strings.h"

namespace fay {

void TraceCatalog::AddTraceFields(ProbeInfo& probe) {
  // A recording keeps no stacks.
  std::erase_if(probe.fields, [](const Field& f) { return IsStackSource(f.source); });
  probe.fields.push_back(
      {"bytes", Type::Int(false), FieldSource::kBytes, 0, 8, 0, "u64 captured bytes"});
  probe.fields.push_back(
      {"path", Type::Str(kPathLen), FieldSource::kPath, 0, kPathLen, 0, "char[128] fd path"});
  AddOriginFields(probe);
}

void TraceCatalog::AddOriginFields(ProbeInfo& probe) {
  // Constant over a trace: which one, from which machine. Keys of a query over many traces.
  probe.fields.push_back(
      {"trace", Type::Str(kPathLen), FieldSource::kTrace, 0, kPathLen, 0, "char[128] trace file"});
  probe.fields.push_back(
      {"host", Type::Str(64), FieldSource::kHost, 0, 64, 0, "char[64] recording host"});
}

ProbeInfo TraceCatalog::SignalProbe() {
  ProbeInfo p;
  p.name = std::string(kSignalDeliver);
  p.kind = ProbeKind::kTracepoint;
  p.tp_category = "signal";
  p.tp_name = "signal_deliver";
  p.fields = CommonFields();
  AddOriginFields(p);
  // As the live tracepoint's format names them; index 0, 1, 2: (signo, errno, code).
  for (const char* prefix : {"", "args."}) {
    int index = 0;
    for (const char* name : {"sig", "errno", "code"}) {
      p.fields.push_back({std::string(prefix) + name, Type::Int(true), FieldSource::kCtx, 4 * index,
                          4, index, "int"});
      ++index;
    }
  }
  return p;
}

Expected<std::vector<ProbeInfo>> TraceCatalog::Resolve(const std::string& spec) {
  std::string_view s = Trim(spec);
  if (s == kSignalDeliver) return std::vector<ProbeInfo>{SignalProbe()};
  if (s.rfind("syscall:", 0) != 0) {
    std::string provider(s.substr(0, s.find(':')));
    return Error(
        Code::kInvalidArgument,
        fmt::format("'{}' is not in a recorded trace: a trace holds syscall events and "
                    "the signals delivered (use syscall:NAME, syscall:* or {})",
                    provider.empty() ? std::string(s) : provider + ":...", kSignalDeliver));
  }
  Expected<std::vector<ProbeInfo>> probes = syscalls_.Resolve(spec);
  if (!probes.ok()) return probes.status();
  for (ProbeInfo& p : *probes) AddTraceFields(p);
  return probes;
}

std::vector<std::string> TraceCatalog::Nearest(const std::string& spec, size_t n) {
  std::vector<std::string> out;
  for (std::string& name : syscalls_.Nearest(spec, n + 8)) {
    if (name.rfind("syscall:", 0) == 0 && out.size() < n) out.push_back(std::move(name));
  }
  return out;
}

}  // namespace fay
