// The eBPF recorder's probes, generated with fay's own assembler: raw sys_enter / sys_exit
// programs that park a call's number and entry time in its thread's slot and write the whole
// call at exit (see CallSlot), its buffers as fragments ahead of it; and raw sched fork / exec /
// exit programs that keep the traced set of processes inside the kernel. Also the wire layout
// of what they put in the ring buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "bpf/program.h"
#include "common/status.h"

namespace fay::record::ebpf {

// Map slots the programs refer to (Emitter::LdMap index).
enum MapSlot : int {
  kMapTraced = 0,   // HASH u32 tgid -> u8 1: the processes alive, for user space to wait on
  kMapSpec = 1,     // ARRAY nr -> SyscallSpec (200 bytes)
  kMapScratch = 2,  // PERCPU_ARRAY, one value of kScratchSize
  kMapRing = 3,     // RINGBUF
  kMapStates = 4,   // ARRAY, one value: TracedState, 2 bits per tgid (StatesBytes)
  kMapSlots = 5,    // ARRAY, one value: kSlots CallSlots, indexed by tid % kSlots
  // ARRAY (mmapable), one u64 per ring: non-zero while that ring's consumer sleeps; then one
  // (kGovernorWakeSlot) non-zero while the --loss=block governor sleeps. A forced ring wakeup
  // is an interrupt the tracee pays for (a self-IPI, a VM exit under a hypervisor): it is sent
  // only when one of them is asleep and the ring holds more than wake_bytes.
  kMapWake = 6,
  // RINGBUFs 1 .. rings-1 (ring 0 is kMapRing); see ProbeOptions::rings.
  kMapMoreRings = 7,
  kMapCount = 14,
};
inline constexpr uint32_t kMaxRings = kMapCount - kMapMoreRings + 1;
inline constexpr uint32_t kGovernorWakeSlot = kMaxRings;
inline constexpr uint32_t kWakeSlots = kMaxRings + 1;
// The map slot of ring i.
inline int RingSlot(uint32_t i) {
  return i == 0 ? kMapRing : kMapMoreRings + static_cast<int>(i) - 1;
}

// Per-CPU counters, u64 each, at kStatsOffset in the scratch value: in the map every program
// has at hand already, a count is one instruction. In a map of their own, each of the two dozen
// places that count looked the map up, and the verifier patched every look-up in place.
enum StatSlot : int { kStatLostRecords = 0, kStatLostFragments = 1, kStatCount = 2 };

// Every syscall on the machine asks whether its process is traced, so the answer is two bits
// in a bitmap indexed by tgid: an inlined array lookup and a load, where a hash lookup would
// cost several function calls (each expensive under the return-stack mitigations).
enum TracedState : uint8_t { kPendingExec = 1, kActive = 2 };
// Bytes of the state bitmap for pids below pid_max (rounded up to a power of two).
inline uint64_t StatesBytes(uint64_t pid_limit) {
  return pid_limit / 4;
}

// A call is two records, written where the call enters and where it returns, so the probes
// keep no per-thread state: the consumer pairs them by thread (one shared ring keeps each
// thread's records in order). Buffers follow the record of their phase as fragments.
enum RecType : uint32_t {
  kRecEnter = 1,
  kRecFrag = 2,
  kRecFork = 3,
  kRecExec = 4,
  kRecProcExit = 5,
  kRecReturn = 6,
  kRecCall = 7,    // a whole call in one record (see CallSlot)
  kRecBatch = 8,   // WireBatch: whole calls staged on one CPU (see kStageOffset)
  kRecSignal = 9,  // WireProc: `parent` the signal, `filename` its kernel_siginfo, `is_thread`
                   // 1 when noted as it was sent (signal_generate)
};

// Most calls are written as one record, at exit: the enter probe claims the thread's slot
// (compare-and-swap of tid on 0) and leaves the call's number and entry time there; the exit
// probe finds them, reads the arguments again from the user registers, and frees the slot.
// A thread whose slot another thread holds, and execve (whose registers the new program
// replaces), fall back to an enter record and a return record.
// The slot also keeps which inbound buffers the enter probe could not read (their pages not
// mapped yet), for the exit probe to read again once the call has faulted them in: per thread,
// because by the exit the thread may run on another CPU, and other threads' calls may have
// entered on this one.
struct CallSlot {
  uint32_t tid;
  uint32_t nr;
  uint64_t entry_ns;
  uint32_t retry_mask;
  uint32_t unused;
  uint64_t unused2;  // a power of two: GenSlot indexes by shifting
};
static_assert(sizeof(CallSlot) == 32);
inline constexpr int kCallSlotShift = 5;
inline constexpr int16_t kCallSlotRetry = 16;  // offsetof(CallSlot, retry_mask)
inline constexpr uint32_t kSlots = 1 << 16;

// kRecCall: a call entered and returned (or never returning: kEventNoExit).
struct WireCall {
  uint32_t type;
  uint16_t flags;
  uint16_t cpu;  // 0xffff: unknown
  uint32_t tgid, tid, ppid, uid;
  uint64_t entry_ns, exit_ns;
  int64_t nr;
  uint64_t args[6];
  int64_t ret;
  char comm[16];
};
static_assert(sizeof(WireCall) == 120);

// Whole-call records, and the fragments of buffers up to kStageFragMax bytes, are not written
// to the ring one by one: the probes stage them in their CPU's scratch and write up to
// kStageBytes of them as one record. A ring write is the costliest step of a small call, and
// most of its cost is per write. What is staged is written before anything the CPU writes
// directly (a long buffer's fragments, enter and return records, process events), and when
// the CPU switches tasks (so a thread's records stay in order when it moves). What is staged
// when the probes are detached is read from the scratch by user space.
struct WireBatch {
  uint32_t type;   // kRecBatch
  uint32_t bytes;  // records following: WireCalls, and WireFragHeaders with their data, each
                   // padded to 8 bytes
};
static_assert(sizeof(WireBatch) == 8);
inline constexpr uint32_t kStageBytes = 2048;
inline constexpr uint32_t kStageFragMax = 256;

struct WireEnter {
  uint32_t type;
  uint16_t pad;
  uint16_t cpu;  // 0xffff: unknown
  uint32_t tgid, tid, ppid, uid;
  uint64_t entry_ns;
  int64_t nr;
  uint64_t args[6];
  char comm[16];
};
static_assert(sizeof(WireEnter) == 104);

struct WireReturn {
  uint32_t type;
  uint32_t tid;
  int64_t nr;
  int64_t ret;
  uint64_t exit_ns;
};
static_assert(sizeof(WireReturn) == 32);

enum FragFlags : uint32_t { kFragExplicit = 1, kFragTruncated = 2, kFragNotCaptured = 4 };

// One piece (at most kFragBytes) of one captured buffer. The first piece of a buffer has
// offset 0; a read that fails emits an empty piece at the offset it failed at.
struct WireFragHeader {
  uint32_t type;
  uint32_t tid;
  uint64_t seq;  // unused (0)
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
  int32_t exit_code;   // kRecProcExit: wait status
  uint32_t is_thread;  // kRecFork: a thread; kRecProcExit: the whole process ended
  char filename[256];  // kRecExec
};
static_assert(sizeof(WireProc) == 288);

inline constexpr int kFragBytes = 4096;

struct ProbeOptions {
  // Bytes of one buffer captured at most (--max-buffer, bounded by the ring's size).
  uint64_t max_buffer = 1 << 20;
  // A return record wakes a sleeping consumer or governor when the ring holds more than this.
  uint64_t wake_bytes = 1 << 20;
  // task_struct member offsets, from BTF.
  int task_comm = -1, task_pid = -1, task_tgid = -1, task_real_parent = -1, task_exit_code = -1;
  int task_cred = -1, cred_uid = -1;
  // task_struct.thread_info.cpu; -1: the records say the CPU is unknown.
  int task_cpu = -1;
  // See bpf::TaskOffsets: 0 when unknown (task pointers are then walked as trusted ones).
  int task_struct_btf_id = 0, rdonly_cast_btf_id = 0;
  // pid_max rounded up to a power of two (at least 64): sizes the state bitmap.
  uint64_t pid_limit = 1 << 22;
  // linux_binprm.filename, for the exec tracepoint's path.
  int binprm_filename = -1;
  // The exit tracepoint says whether the process ended (group_dead); without it, the leader's
  // exit is taken to end it.
  bool exit_has_group_dead = false;
  // BTF type ids of btf_trace_sys_enter / btf_trace_sys_exit. When set, the syscall probes are
  // BTF-typed raw tracepoints: they read the user registers through their pt_regs argument
  // with plain loads, where an untyped one needs a bpf_task_pt_regs call per syscall.
  int sys_enter_btf_id = 0, sys_exit_btf_id = 0;
  // task_struct.pending.signal.sig[0]; -1: unknown (a call cut short by SIGKILL is then
  // recorded with the value it returned into the kernel's exit path).
  int task_pending_signal = -1;
  // task_struct.signal, signal_struct.flags, .group_exit_code and .group_exec_task: whether that
  // SIGKILL is one ptrace would also see the call end with (exec, exit_group, kill -9), or a
  // fatal signal the kernel turned into SIGKILL only because nobody traces the process.
  int task_signal = -1, signal_flags = -1, group_exit_code = -1, group_exec_task = -1;
  // signal_struct.shared_pending.signal.sig[0]; -1: unknown (a call the kernel restarts unseen
  // is then recorded twice, as the attempt a freeze cut short and the one that completed).
  int signal_shared_pending = -1;
  // Rings, each read by a consumer thread of its own (at most kMaxRings). A thread's records
  // all go to ring tid % rings, so that one consumer sees them in order; the execs (enter and
  // return records, and what they capture) go to ring tgid % rings, because a thread that execs
  // returns with the leader's id. Staged records go where their thread's go.
  uint32_t rings = 1;
};
// Where the scratch value keeps the ring its CPU's staged records go to (u32).
inline constexpr int kStagedRingOffset = 280;

struct ProbeSet {
  bpf::ProgramSpec sys_enter, sys_exit;  // raw tracepoints
  bpf::ProgramSpec fork, exec, exit;     // raw tracepoints sched_process_fork / exec / exit
  bpf::ProgramSpec sched_switch;         // raw tracepoint: writes the staged calls out
  // raw tracepoints signal_deliver, and signal_generate for the signals ptrace would see
  // delivered that never reach signal_deliver untraced (ignored ones, and fatal ones the kernel
  // turns into SIGKILL)
  bpf::ProgramSpec signal_deliver, signal_generate;
};

// Where the scratch value keeps the staged records: their bytes (u32), how many calls and
// fragments they are (u16 each), then a WireBatch and kStageBytes of records.
inline constexpr int kStagedBytesOffset = 504;
inline constexpr int kStagedCallsOffset = 508;
inline constexpr int kStagedFragsOffset = 510;
inline constexpr int kStageOffset = 4672;
inline constexpr int kStatsOffset = kStageOffset + 8 + kStageBytes;
inline constexpr int kScratchSize = kStatsOffset + 8 * kStatCount;

Expected<ProbeSet> GenerateProbes(const ProbeOptions& options);

}  // namespace fay::record::ebpf
