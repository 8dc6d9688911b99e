// Exports of a recorded trace to the formats other tools read: CTF 1.8 (babeltrace2, Trace
// Compass), Chrome trace-event JSON (Perfetto UI, chrome://tracing), JSON Lines and CSV. Every
// exporter streams: it sees one event at a time, in file order, and keeps only small per-thread
// state, so a trace of any size converts in bounded memory.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "schema/syscall_event.h"

namespace fay::trace {

class Reader;

struct ExportOptions {
  bool buffers = false;  // csv, jsonl: the captured buffers' bytes as hex
};

class Exporter {
 public:
  virtual ~Exporter();
  virtual Status Syscall(const SyscallEvent& ev) = 0;
  virtual Status Process(const ProcessEvent& ev) { return Status::Ok(); }
  // Whether Process writes anything (CTF has no event class for them): the summary then does
  // not count them as written.
  virtual bool WritesProcesses() const { return true; }
  // Completes the output (closing brackets, CTF metadata); called even after read damage, so
  // the readable prefix is a valid file.
  virtual Status Finish() = 0;
};

// "ctf", "chrome", "jsonl", "csv".
Expected<std::unique_ptr<Exporter>> MakeExporter(const std::string& format, const std::string& out,
                                                 const RecordingInfo& info,
                                                 const ExportOptions& options);

std::unique_ptr<Exporter> MakeJsonlExporter(FILE* out, const RecordingInfo& info,
                                            const ExportOptions& options);
std::unique_ptr<Exporter> MakeCsvExporter(FILE* out, const RecordingInfo& info,
                                          const ExportOptions& options);
std::unique_ptr<Exporter> MakeChromeExporter(FILE* out, const RecordingInfo& info,
                                             const ExportOptions& options);
// CTF writes a directory: `metadata` and one stream file.
Expected<std::unique_ptr<Exporter>> MakeCtfExporter(const std::string& dir,
                                                    const RecordingInfo& info);

struct ExportStats {
  uint64_t syscalls = 0;
  uint64_t processes = 0;           // written
  uint64_t processes_left_out = 0;  // read, and not in this format
};

// Reads the whole trace into the exporter and finishes it. Damage stops the reading at the
// damaged chunk: what came before is exported and finished, and the damage is returned.
Status ExportTrace(Reader& reader, Exporter& exporter, ExportStats* stats);

}  // namespace fay::trace
