// The eBPF code generator: turns a Plan's probe part into one program per attachment, plus the
// maps those programs share. This is "compiled query + resources": everything needed to run the
// query on a host.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bpf/attach.h"
#include "bpf/emitter.h"
#include "common/status.h"
#include "query/plan.h"

namespace fay::bpf {

// Fixed map slots; an unused map is not created.
enum MapId {
  kMapStats = 0,   // PERCPU_ARRAY[1] of kStatCount u64 counters
  kMapAggA,        // PERCPU_HASH key -> aggregate states (window A)
  kMapAggB,        // the same, window B (only with `every`)
  kMapControl,     // ARRAY[1] u64: bit 0 selects the active window
  kMapZero,        // ARRAY[1] of zeroed aggregate states: the template for new keys
  kMapScratch,     // PERCPU_ARRAY[1]: key, entry copy and string buffers (bigger than the stack)
  kMapEntry,       // HASH tid -> {entry time, six arguments} for entry/exit correlation
  kMapScope,       // HASH tgid -> 1: the traced process tree (-c / -p)
  kMapSysFilter,   // ARRAY[kMaxSyscalls] u32: syscall nr -> probe index + 1 (raw syscalls)
  kMapStacks,      // STACK_TRACE for ustack keys
  kMapRing,        // RINGBUF for select
  kMapCacheA,      // PERCPU_ARRAY: direct-mapped aggregation cache in front of kMapAggA
  kMapCacheB,      // the same for window B
  kMapScopeGen,    // ARRAY[1] u64: bumped whenever the traced set changes
  kMapScopeCache,  // PERCPU_ARRAY[1]: the last {tgid, generation, verdict} this CPU checked
  kMapState0,      // HASH (LRU_HASH with `for`) key -> {value, time stored}: state pipeline 0
  kMapStateSysFilter0 = kMapState0 + kMaxStates,  // kMapSysFilter of state pipeline 0's syscalls
  // Each further table (Plan::tables) has its own kMapAggA, kMapAggB, kMapZero, kMapCacheA and
  // kMapCacheB, kTableMaps ids from here (TableMap).
  kMapTable1 = kMapStateSysFilter0 + kMaxStates,
  kMapCount = kMapTable1 + 5 * (kMaxTables - 1),
};

enum StatIndex {
  kStatSeen = 0,
  kStatMatched,
  kStatDropped,
  kStatMapFull,  // a new key refused: -E2BIG, the map holds --max-keys
  kStatReadErrors,
  kStatMapBusy,    // a new key refused: -EBUSY, a probe nested on this CPU holds the lock
  kStatMapErrors,  // a new key refused for another reason (-ENOMEM: no free element)
  kStatNoEntry,    // an exit whose entry state is missing
  kStatStateFull,  // a state pipeline's value not stored: its map is full
  kStatNoState,    // an event dropped: a state it reads is not there (or expired)
  kStatCount = 10,
};

constexpr int kMaxSyscalls = 512;
// Values in kMapScope.
constexpr int kScopeActive = 1;
constexpr int kScopePendingExec = 2;
constexpr int kSysExecve = 59, kSysExecveat = 322;  // x86-64
// Syscall probes run as raw tracepoint programs on sys_enter/sys_exit: the kernel then skips
// building a trace record, which is most of what a syscall tracepoint costs. The prologue builds
// the record the rest of the code generator reads (raw_syscalls layout: id at +8, args or ret at
// +16) inside the scratch value, at kRawRecordOff past the entry copy.
constexpr int kRawRecordSize = 64;
constexpr int kRawRegsCopySize = 64;  // pt_regs r10..di, copied in one read when args are needed
constexpr int16_t kRegsR10Off = 56;   // x86-64 struct pt_regs
constexpr int16_t kRegsOrigAxOff = 120;

constexpr int kEntryValueSize = 56;  // u64 entry time + 6 u64 arguments
// A uprobe's entry key is {thread, stack pointer | (probe index + 1) << this}.
constexpr int kEntryKeyProbeShift = 48;
constexpr int kStrBufSize = 256;
constexpr int kStrBufs = 8;
constexpr uint32_t kRingBytes = 8 << 20;
// A select record in the ring: u64 probe index, u64 CLOCK_MONOTONIC time, then the columns.
constexpr int kSelectHeader = 16;
// The aggregation cache: kCacheSlots per CPU, each [u64 used][key][value]. A key whose slot is
// taken by another key falls through to the hash map, so the cache never loses an update; it
// only spares the common keys a hashed map lookup.
constexpr int kCacheBits = 8;
constexpr int kCacheSlots = 1 << kCacheBits;
constexpr int kCacheMaxEntry = 256;

// `base` (kMapAggA, kMapAggB, kMapZero, kMapCacheA, kMapCacheB) of table `table` (0: the
// query's own, Plan::table).
inline int TableMap(int base, int table) {
  if (table <= 0) return base;
  const int slot = base == kMapAggA     ? 0
                   : base == kMapAggB   ? 1
                   : base == kMapZero   ? 2
                   : base == kMapCacheA ? 3
                                        : 4;
  return kMapTable1 + 5 * (table - 1) + slot;
}

struct MapDesc {
  bool used = false;
  bpf_map_type type = BPF_MAP_TYPE_UNSPEC;
  std::string name;
  uint32_t key_size = 0, value_size = 0, max_entries = 0;
  uint32_t flags = 0;
};

struct GeneratedProgram {
  Attachment attach;
  bpf_prog_type type = BPF_PROG_TYPE_TRACEPOINT;
  uint32_t expected_attach_type = 0;  // BPF_TRACE_UPROBE_MULTI for kUprobeMulti
  std::string name;
  std::vector<bpf_insn> insns;
  std::vector<MapReloc> relocs;
  std::vector<std::pair<size_t, std::string>> comments;
};

struct CodegenOptions {
  bool scoped = false;        // filter by kMapScope (-c / -p) and track forks and frees
  bool held_command = false;  // -c: the scope holds a command pending its exec (kScopeStart)
  uint32_t self_tgid = 0;     // when not scoped, ignore this process (fay itself); 0 = none
  // Offsets of sched_process_fork's child_pid and sched_process_free's pid, from tracefs
  // (LiveQuery::Load reads them; these are kernel 6.18's).
  int fork_child_off = 20, free_pid_off = 12;
  // >= 0: read comm straight from the current task_struct (BTF pointer) at this offset,
  // which is several times cheaper than bpf_get_current_comm.
  int task_comm_offset = -1;
  // >= 0: with task_comm_offset, read tgid and tid from the current task_struct too, so one
  // helper call (bpf_get_current_task_btf) answers scope, pid, tid and comm.
  int task_pid_offset = -1, task_tgid_offset = -1;
};

struct GeneratedQuery {
  MapDesc maps[kMapCount];
  std::vector<GeneratedProgram> programs;
  int scratch_entry_off = 0;       // where programs keep their entry copy inside the scratch value
  bool uses_cache = false;         // aggregates also live in kMapCacheA/B
  std::vector<bool> table_caches;  // the same for each further table (Plan::tables)
  bool counts_matched = false;     // false: every seen event matches (no where, no sample)
};

Expected<GeneratedQuery> Generate(const Plan& plan, const CodegenOptions& options);

// Whether scope tracking attaches raw sched_process_fork/free (the task's pid by its BTF
// offset) rather than their tracepoints (the pid from the trace record, by tracefs's offsets).
inline bool RawScope(const CodegenOptions& o) {
  return o.task_pid_offset >= 0;
}

}  // namespace fay::bpf
