// The probe catalog of a recorded trace: the syscall probes, typed exactly as the live catalog
// types them (so one query means the same thing on both sources), plus the fields only a
// recording holds: `bytes` and `path`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/offline/table_catalog.h"
#include "schema/probe.h"

namespace fay {

class TraceCatalog : public ProbeCatalog {
 public:
  // `live` resolves the syscall probes (the system catalog); it must outlive this one. When it
  // cannot (no tracefs, no permission: reading a trace must not need root), fay's syscall table
  // describes them instead, and fallback_reason() says why.
  explicit TraceCatalog(ProbeCatalog& live) : syscalls_(live) {}

  // "syscall:..." specs, and the signals the thread took as the live tracepoint
  // kSignalDeliver (its sig, errno and code; the trace has no sigaction fields). Any other
  // provider is kInvalidArgument, which the resolve pass points at with a caret.
  Expected<std::vector<ProbeInfo>> Resolve(const std::string& spec) override;
  // `trace` and `host`, which every probe of a recording has.
  static void AddOriginFields(ProbeInfo& probe);
  std::vector<std::string> Nearest(const std::string& spec, size_t n) override;

  // Appends `bytes` and `path` to a live syscall probe's fields.
  static void AddTraceFields(ProbeInfo& probe);
  // Capacity of `path`, NUL included: paths of up to 127 bytes, and room beside it for other
  // keys within the plan's key size limit, which offline plans share with live ones.
  static constexpr int kPathLen = 128;
  // The one tracepoint a trace holds: its signal records.
  static constexpr std::string_view kSignalDeliver = "tracepoint:signal:signal_deliver";
  static ProbeInfo SignalProbe();

  const std::string& fallback_reason() const { return syscalls_.fallback_reason(); }

 private:
  SyscallFallbackCatalog syscalls_;  // live, or fay's table where tracefs cannot be read
};

}  // namespace fay
