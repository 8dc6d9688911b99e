// The recorded-syscall event model: what a recorder (ptrace or eBPF backend) hands to the trace
// writer, and what the reader hands back. One model for both backends is what lets their traces
// be compared byte for byte.
//
// Decoded argument text is never stored: it is derived from the raw arguments plus the captured
// buffers by the syscall table's decoder, so a newer fay can render an older trace better.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace fay {

// Which way bytes crossed the user/kernel boundary.
enum class BufferDir : uint8_t {
  kIn = 1,   // user -> kernel, captured at syscall entry (write data, paths, struct arguments)
  kOut = 2,  // kernel -> user, captured at syscall exit (read data, stat buffers, fds of pipe2)
};

// Bytes a recorder put in the trace's blob store as they arrived (see CapturedBuffer::stored).
struct StoredBlob {
  uint64_t hash_lo = 0, hash_hi = 0;  // XXH3-128 of the bytes
  uint64_t size = 0;
};

// One captured user-memory region belonging to one syscall argument.
struct CapturedBuffer {
  uint8_t arg = 0;   // argument index 0..5
  uint16_t sub = 0;  // element index inside the argument (iovec element, msghdr part); 0 if none
  BufferDir dir = BufferDir::kIn;
  uint64_t addr = 0;          // user address it was read from
  uint64_t length = 0;        // length the syscall named (what strace would print), before any cap
  bool truncated = false;     // bytes.size() < length because of --max-buffer
  bool not_captured = false;  // the memory could not be read (unmapped / not present)
  std::vector<uint8_t> bytes;
  // Set instead of `bytes` by a reader asked to share blob storage (Reader::ShareBlobs): the
  // bytes stay where the reader decoded them (the blob chunk), which `data` keeps alive, so
  // equal buffers hold one copy between them. View() reads whichever is set.
  struct SharedBytes {
    std::shared_ptr<const uint8_t> data;
    size_t size = 0;
  };
  SharedBytes shared;
  // Set instead of `bytes` by a recorder that stored the bytes in the writer's blob store
  // straight from where it received them (the eBPF consumer: one copy of every byte less).
  // Only the writer reads it; View() is then empty.
  std::optional<StoredBlob> stored;

  std::span<const uint8_t> View() const {
    return shared.data ? std::span<const uint8_t>(shared.data.get(), shared.size)
                       : std::span<const uint8_t>(bytes);
  }
  // Bytes captured, however they are held.
  uint64_t Size() const { return stored ? stored->size : View().size(); }
};

// Event flags.
enum : uint32_t {
  kEventNoExit = 1u << 0,       // the call never returned (exit, exit_group, a successful execve
                                // in another thread, or the task was killed inside it)
  kEventInterrupted = 1u << 1,  // returned a restart code (ERESTARTSYS family) with no signal
                                // pending: the kernel makes it again unseen. The eBPF recorder
                                // folds it into that call (record/ebpf/restart_merger.h).
};

struct SyscallEvent {
  uint64_t entry_ns = 0;  // CLOCK_MONOTONIC; header holds the realtime anchor
  uint64_t exit_ns = 0;   // 0 when kEventNoExit
  int32_t pid = 0;        // thread-group id
  int32_t tid = 0;
  int32_t ppid = 0;
  uint32_t uid = 0;
  std::array<char, 16> comm{};  // NUL-padded
  int32_t nr = -1;              // x86-64 syscall number
  std::array<uint64_t, 6> args{};
  int64_t ret = 0;  // raw return value; -4095..-1 means -errno
  uint32_t flags = 0;
  int32_t cpu = -1;  // the CPU the call returned on (entered on, for an enter/return pair); -1
                     // when the backend cannot tell (ptrace)
  std::vector<CapturedBuffer> buffers;

  // The call's last moment: where it returned, or its entry when it never did. A recorder
  // writes a call when it returns, so this is also its place among the other events.
  uint64_t LastNs() const { return exit_ns > entry_ns ? exit_ns : entry_ns; }

  // Bytes captured in all the buffers, however each is held.
  uint64_t CapturedBytes() const {
    uint64_t n = 0;
    for (const CapturedBuffer& b : buffers) n += b.Size();
    return n;
  }
};

// Process events: the tree, so readers and the replayer can rebuild who-forked-whom without
// re-deriving it from clone return values, and the signals delivered to the traced threads.
// kSignal is stored as a record kind of its own (docs/FORMAT.md 6.5), so that a reader older
// than it skips it; in memory it is one more process event, seen by the same callbacks.
enum class ProcessEventKind : uint8_t { kFork = 1, kExec = 2, kExit = 3, kSignal = 4 };

// The bytes of a kernel_siginfo kept with a signal (x86-64: signo, errno, code, then the union).
inline constexpr size_t kSiginfoBytes = 48;

struct ProcessEvent {
  ProcessEventKind kind = ProcessEventKind::kFork;
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  int32_t pid = 0;       // the process (or thread, for clone of a thread) concerned
  int32_t tid = 0;
  int32_t parent_pid = 0;        // kFork: the parent; otherwise 0
  bool is_thread = false;        // kFork: CLONE_THREAD
  int32_t exit_status = 0;       // kExit: wait status (as from waitpid)
  std::string path;              // kExec: the executable
  int32_t signo = 0;             // kSignal: the signal, as the thread dequeued it
  std::vector<uint8_t> siginfo;  // kSignal: its kernel_siginfo (kSiginfoBytes; empty: unknown)
};

// What `fay record` knows about the start of the recording; stored in the file header.
struct RecordingInfo {
  std::vector<std::string> argv;  // root command (empty for -p)
  std::vector<std::string> env;   // root process environment, "K=V"
  std::string cwd;                // root process working directory
  int32_t root_pid = 0;
  std::string backend;               // "ptrace" or "ebpf"
  std::string host;                  // uname nodename
  std::string kernel;                // uname release
  std::string arch;                  // "x86_64"
  uint64_t anchor_monotonic_ns = 0;  // the same instant on both clocks
  uint64_t anchor_realtime_ns = 0;
  uint32_t syscall_table_version = 0;
  uint64_t max_buffer = 0;     // 0 = unlimited
  std::string syscall_filter;  // the -e set as given, empty = all
  // A flight recorder's dump (`fay record --flight`): why it was written, which dump it is, the
  // ring's size and the window of calls it holds. An empty reason: a whole recording.
  std::string flight_reason;
  uint32_t flight_dump = 0;
  uint64_t flight_ring_bytes = 0;
  uint64_t flight_from_ns = 0;  // CLOCK_MONOTONIC, as the events
  uint64_t flight_to_ns = 0;
  uint64_t flight_evicted_syscalls = 0;  // recorded before the window and not kept
  bool is_flight_dump() const { return !flight_reason.empty(); }
};

}  // namespace fay
