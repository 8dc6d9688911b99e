// `fay record`: runs or attaches to a program and writes everything it does at the system-call
// level into a .fay trace. The backend (ptrace now, eBPF next) only decides how events are
// captured; the trace they produce is the same.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/syscall_event.h"

namespace fay::trace {
class FlightControl;
}

namespace fay::record {

// Sees the recorded calls as they are handed to the trace, on the recorder's threads (one at a
// time per observer: an observer on several consumers locks itself). Wants() is asked first, per
// call, so that an observer of a few calls costs the others a table lookup. `fay record` uses
// one to follow the paths the program changes, for the trace's end state.
class SyscallObserver {
 public:
  virtual ~SyscallObserver() = default;
  virtual bool Wants(int nr) const = 0;
  virtual void Observe(const SyscallEvent& ev) = 0;
  // The file behind fd `fd` of process `pid` as the calls observed so far leave it: its path
  // and offset. Lets a recorder that sees a call after it returned (eBPF) find where an
  // in-kernel copy read from. False when the observer does not follow it.
  virtual bool FileOf(int32_t pid, int fd, std::string* path, uint64_t* offset) const {
    (void)pid, (void)fd, (void)path, (void)offset;
    return false;
  }
};

struct RecordOptions {
  std::string output;             // empty: DefaultOutputName
  std::string backend = "auto";   // auto: ebpf where permitted, else ptrace
  std::string syscall_filter;     // -e, strace trace= syntax; empty = every syscall
  uint64_t max_buffer = 0;        // 0 = whole buffers
  pid_t pid = 0;                  // -p: attach to this process and its threads
  std::vector<std::string> argv;  // or run this command
  bool quiet = false;             // no summary on stderr
  // eBPF backend: the ring buffer's size in bytes (0: the default), and what to do when it
  // fills: "block" throttles the program, "drop" counts the lost events (empty: the default,
  // block for a command, drop for -p).
  uint64_t ring_size = 0;
  std::string loss;
  // eBPF backend: consumer threads, each reading a ring of its own, with ring_size bytes each
  // when given (0: one per 4 CPUs fay may use, at most 8; one ring has 16 MiB, several share
  // 32 MiB).
  uint32_t consumers = 0;
  SyscallObserver* observer = nullptr;  // not owned; outlives the recording
  // --flight: the trace is a ring in memory, written out as dumps (trace/flight.h). Not owned.
  trace::FlightControl* flight = nullptr;
};

struct RecordResult {
  std::string path;
  int exit_code = 0;      // what fay should exit with: the command's status, 128+signal
  bool detached = false;  // recording stopped early (signal, -p detach or a write error)
  uint64_t syscalls = 0;
  uint64_t processes = 0;
  uint64_t threads = 0;
  uint64_t bytes_captured = 0;
  uint64_t file_bytes = 0;
  uint64_t lost_events = 0;      // eBPF backend with --loss=drop: events the ring had no room for
  uint64_t pauses = 0;           // eBPF backend with --loss=block: times the command was frozen
  uint64_t restarts_folded = 0;  // eBPF backend: calls a freeze interrupted, recorded once
  double seconds = 0;
  std::string error;  // non-empty: the trace stopped early because of this
};

// The header facts every backend records the same way: host, kernel, arch, table version, the
// options, and the starting point (argv, environment, cwd of fay for a command; of the process
// for -p). Clock anchors and the root pid are the backend's to fill.
RecordingInfo BaseRecordingInfo(const RecordOptions& options, const std::string& backend);

// execvp's PATH search, done before forking so a missing command is a clear error, not a child
// that exits 127. Returns the program to exec.
Expected<std::string> ResolveCommand(const std::string& name);

// fay-<command>-<YYYYmmdd-HHMMSS>.fay in the current directory.
std::string DefaultOutputName(const RecordOptions& options);

// The trace file a recording made, so that a recording that fails before the program runs
// removes that file and nothing else. `-o` may name /dev/null, a FIFO or a symlink, and another
// process may have put something else at the path since; only the regular file fay opened (the
// same device and inode, not through a symlink) is removed.
struct OutputFile {
  dev_t dev = 0;
  ino_t ino = 0;
  bool removable = false;  // a regular file, reached without a symlink
};
OutputFile IdentifyOutput(const std::string& path);
// Unlinks path if it is still the file `made` identifies; anything else is left as it is.
void RemoveOutput(const std::string& path, const OutputFile& made);

// -p, once every probe is in place (or every thread seized): "fay: attached to process N ...",
// as strace says "Process N attached"; not with --quiet. A script may start the work it wants
// recorded on that line rather than after a guessed delay.
void SayAttached(const RecordOptions& options, const std::string& path, uint64_t threads);

// -p of a process that has already exited (HasExited), or whose threads all had by the attach.
Status ExitedError(pid_t pid);

// Records until the command (or, with -p, the process) ends, or until SIGINT/SIGTERM, which
// detach cleanly. Errors before the program runs (no such command or pid, unwritable output,
// bad -e) come back as a Status; a failure during recording comes back in RecordResult::error
// after the program was detached unharmed.
Expected<RecordResult> Record(const RecordOptions& options);

}  // namespace fay::record
