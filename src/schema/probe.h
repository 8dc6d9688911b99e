// Probe descriptions, produced by the providers in src/probes and consumed by the query compiler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/field.h"

namespace fay {

enum class ProbeKind { kSyscall, kTracepoint, kUprobe, kUretprobe, kInterval, kProfile, kSoftware };

struct ProbeInfo {
  std::string name;  // canonical: "syscall:openat", "tracepoint:sched:sched_switch",
                     // "uprobe:/usr/bin/bash:readline", "interval:1s", "profile:99"
  ProbeKind kind = ProbeKind::kSyscall;

  // kSyscall: tp_category "syscalls", tp_name "sys_enter_X", exit_tp_name "sys_exit_X".
  // kTracepoint: tp_category/tp_name.
  std::string tp_category;
  std::string tp_name;
  std::string exit_tp_name;
  int tp_id = -1;       // tracefs event id of tp_name (-1 when unknown, e.g. in unit tests)
  int exit_tp_id = -1;  // tracefs event id of exit_tp_name
  int syscall_nr = -1;  // x86-64 number, for kSyscall

  // kUprobe/kUretprobe.
  std::string path;          // absolute path of the ELF file
  std::string symbol;        // the matched symbol name
  uint64_t file_offset = 0;  // offset of the symbol in the file, for perf_event uprobe attach
  uint64_t symbol_address = 0, symbol_size = 0;  // its st_value and st_size

  uint64_t period_ns = 0;      // kInterval
  uint64_t hz = 0;             // kProfile
  uint64_t perf_config = 0;    // kSoftware: PERF_COUNT_SW_*
  uint64_t period_events = 1;  // kSoftware: every Nth event

  // Common fields first, then the probe's own. For kSyscall: args.NAME..., ret, errno, latency.
  std::vector<Field> fields;

  const Field* FindField(const std::string& field_name) const;
};

// Resolves probe specs. The real catalog reads tracefs and ELF files (src/probes); unit tests
// use a fake.
class ProbeCatalog {
 public:
  virtual ~ProbeCatalog() = default;
  // Expands one spec, which may contain globs ("syscall:read*", "uprobe:/lib/libc.so.6:mall*"),
  // into concrete probes. An unknown probe is kNotFound; the message names the spec.
  virtual Expected<std::vector<ProbeInfo>> Resolve(const std::string& spec) = 0;
  // Up to n known probe names closest to spec (edit distance), for "did you mean" hints.
  virtual std::vector<std::string> Nearest(const std::string& spec, size_t n) = 0;
};

}  // namespace fay
