// The eBPF recorder's probes, generated with fay's own assembler: raw sys_enter / sys_exit
// programs that save a call's arguments at entry and emit one record per completed call, with
// its buffers as fragments; and sched fork / exec / exit programs that keep the traced set of
// processes inside the kernel. Also the wire layout of what they put in the ring buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "bpf/program.h"
#include "common/status.h"

namespace fay::record::ebpf {

// Map slots the programs refer to (Emitter::LdMap index).
enum MapSlot : int {
  kMapTraced = 0,   // HASH u32 tgid -> u8 state
  kMapEntry = 1,    // HASH u32 tid -> EntryValue (64 bytes)
  kMapSpec = 2,     // ARRAY nr -> SyscallSpec (200 bytes)
  kMapScratch = 3,  // PERCPU_ARRAY, one value of kScratchSize
  kMapRing = 4,     // RINGBUF
  kMapStats = 5,    // PERCPU_ARRAY, one value: [u64 lost records][u64 lost fragments]
  kMapCount = 6,
};

enum TracedState : uint8_t { kPendingExec = 1, kActive = 2 };

enum RecType : uint32_t { kRecSyscall = 1, kRecFrag = 2, kRecFork = 3, kRecExec = 4, kRecExit = 5 };

// One completed (or never-returning) call.
struct WireSyscall {
  uint32_t type;
  uint32_t flags;  // kEventNoExit
  uint32_t tgid, tid, ppid, uid;
  uint64_t entry_ns, exit_ns;
  int64_t nr;
  uint64_t args[6];
  int64_t ret;
  char comm[16];
};
static_assert(sizeof(WireSyscall) == 120);

enum FragFlags : uint32_t { kFragExplicit = 1, kFragTruncated = 2, kFragNotCaptured = 4 };

// One piece (at most kFragBytes) of one captured buffer. The first piece of a buffer has
// offset 0; a read that fails emits an empty piece at the offset it failed at.
struct WireFragHeader {
  uint32_t type;
  uint32_t tid;
  uint64_t seq;  // entry_ns of the call it belongs to
  uint8_t arg;
  uint8_t dir;  // BufferDir
  uint16_t sub;
  uint32_t flags;  // FragFlags; without kFragExplicit the reader infers truncated/not captured
  uint64_t total;  // the length the syscall named
  uint64_t offset;
  uint64_t addr;
  uint32_t len;  // data bytes following
  uint32_t pad;
};
static_assert(sizeof(WireFragHeader) == 56);

struct WireProc {
  uint32_t type;
  uint32_t pid, tid, parent;
  uint64_t time_ns;
  int32_t exit_code;  // kRecExit: wait status
  uint32_t is_thread;
  char filename[256];  // kRecExec
};
static_assert(sizeof(WireProc) == 288);

inline constexpr int kFragBytes = 4096;
// Fragments a single buffer may take (plus a last partial one): buffers beyond about 1 MiB are
// cut, and marked truncated.
inline constexpr int kMaxFragments = 256;
inline constexpr uint64_t kMaxBufferBytes = uint64_t{kMaxFragments} * kFragBytes + kFragBytes;

struct ProbeOptions {
  uint64_t max_buffer = 0;  // 0 = no cap (then kMaxBufferBytes)
  // task_struct member offsets, from BTF.
  int task_comm = -1, task_pid = -1, task_tgid = -1, task_real_parent = -1, task_exit_code = -1;
  // sched_process_exec: offset of the filename __data_loc; sched_process_exit: of group_dead
  // (-1: the leader's exit ends the process).
  int exec_filename_off = 8;
  int exit_group_dead_off = -1;
};

struct ProbeSet {
  bpf::ProgramSpec sys_enter, sys_exit;  // raw tracepoints
  bpf::ProgramSpec fork;                 // raw tracepoint sched_process_fork
  bpf::ProgramSpec exec, exit;           // tracepoints sched:sched_process_exec / exit
};

inline constexpr int kScratchSize = 4544;

Expected<ProbeSet> GenerateProbes(const ProbeOptions& options);

}  // namespace fay::record::ebpf
