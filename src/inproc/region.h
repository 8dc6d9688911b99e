// The memory fay and a traced process share for in-process probes (docs/INPROCESS.md): one
// memfd that fay fills before the command starts and the runtime library (libfay_inproc.so)
// maps in every process of the traced tree. It holds what the runtime needs to patch and run
// the probes (the programs, the functions, the maps' shapes), the maps themselves, and the
// counters both sides watch. Plain data at fixed offsets: the two sides are separate builds of
// the same header and check its magic and version before trusting anything else.
#pragma once

#include <atomic>
#include <cstdint>

#include "inproc/tsc_clock.h"

namespace fay::inproc {

inline constexpr uint64_t kRegionMagic = 0x3150524e49594146ull;  // "FAYINPR1"
inline constexpr uint32_t kRegionVersion = 4;
// Copies of each per-CPU map: a probe run holds one for its whole run, as a CPU does.
inline constexpr uint32_t kMaxSlots = 64;
// In a slot's `held`: the slot is its thread's for as long as the thread lives.
inline constexpr uint32_t kSlotOwned = 0x80000000u;
// "FD,PID": the region's descriptor in the process, and fay's pid, whose /proc/PID/fd/FD the
// runtime opens when the program closed or lost the descriptor.
inline constexpr char kRegionEnv[] = "FAY_INPROC";
// How long fay may go without a heartbeat before the probes of every process stop running.
inline constexpr uint64_t kHeartbeatTimeoutNs = 1'000'000'000;

struct RegionHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t slots;
  uint64_t total_bytes;
  uint32_t map_count, program_count, patch_count, reserved;
  uint64_t maps_off, programs_off, patches_off;

  // Written by fay while the query runs.
  std::atomic<uint32_t> stop;  // 1: every probe is a no-op from now on
  uint32_t reserved2;
  std::atomic<uint64_t> heartbeat_ns;  // fay's CLOCK_MONOTONIC_COARSE, every 100 ms

  // Written by the runtimes, read by fay.
  std::atomic<uint64_t> processes;    // processes whose runtime started
  std::atomic<uint64_t> patched;      // functions patched, summed over processes
  std::atomic<uint64_t> refused;      // functions a process could not patch
  std::atomic<uint64_t> dropped;      // runs skipped: every slot was held
  std::atomic<uint64_t> interpreted;  // programs a process runs interpreted, not translated
  // One cache line a slot: threads claiming or marking runs in neighbouring slots do not
  // share a line.
  struct alignas(64) Slot {
    std::atomic<uint32_t> held;  // the holder's thread id, 0 when free
    // A slot a thread owns (its id | kSlotOwned in `held`) counts its runs here: odd while one
    // is in progress. Only the owner writes it, with no atomic read-modify-write; fay sees a
    // run in flight after a membarrier (InprocHost::WaitForRunsInFlight).
    std::atomic<uint32_t> runs;
  } slot[kMaxSlots];
  uint32_t owned_slots;  // slots [0, owned_slots) may be owned; 0: none (no membarrier here)
  uint32_t reserved3;
  uint64_t pid_ns_dev, pid_ns_ino;  // fay's pid namespace: only its processes own slots
  std::atomic<uint32_t> error_claimed;
  char first_error[256];  // the first refusal's reason, NUL-terminated

  TscClock clock;  // written by fay: what bpf_ktime_get_ns answers in the process
};

// A map whose every key starts with the pid_tgid of the thread that uses it (the entry map):
// each thread keeps its keys to itself (thread_entries.h), and fay never reads it.
inline constexpr uint32_t kRegionMapThreadKeyed = 1;

struct RegionMap {
  int32_t id;  // fay's map slot (bpf::MapId): what a program's map reference names
  uint32_t type, key_size, value_size, max_entries, slots;
  uint32_t flags;  // kRegionMap*
  uint64_t offset, bytes;
};

inline constexpr uint32_t kRegionPatchEntryRecord = 1;

struct RegionProgram {
  uint64_t insns_off;
  uint32_t insn_count;
  uint32_t reserved;
};

// One program to run at one function: several share a function when a query probes its entry
// and its return, or a uretprobe keeps an entry state.
struct RegionPatch {
  uint64_t dev, ino;     // the ELF file, as /proc/self/maps names it
  uint64_t file_offset;  // the function's first byte in the file
  uint64_t size;         // its st_size: how far the branch check looks
  uint64_t cookie;       // what bpf_get_attach_cookie answers: the probe's index
  uint32_t program;      // into the programs
  uint32_t is_return;    // run when the function returns
  // kRegionPatchEntryRecord: the program only keeps the entry record (time and arguments) that
  // the function's return programs read; the return probe's shadow frame keeps it instead, and
  // the program is not run.
  uint32_t flags;
  uint32_t reserved;
  char path[256];  // the probe's name, for messages
  char file[256];  // the ELF file's real path: matched where the maps name another device
};

}  // namespace fay::inproc
