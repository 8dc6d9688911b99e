// The helpers an in-process probe program calls (Interpreter's table), behaving as the kernel's
// do for a uprobe program in the same thread: ids, time, comm, user-memory reads that cannot
// crash the process, and the map helpers over the runtime's ShmMaps. The thread's slot (its
// copy of per-CPU maps, and what bpf_get_smp_processor_id answers) is set by the runtime for
// each run.
#pragma once

#include <atomic>
#include <cstdint>

#include "inproc/interpreter.h"

namespace fay::inproc {

// The helpers' table, env unused (the state is per thread). Map helpers take a ShmMap* as the
// map argument (what Interpreter::Prepare's map_address gives them).
Helpers RuntimeHelpers();

// The calling thread's state, inline for the runtime's per-call path. Constant-initialized, so
// reading them is one %fs-relative load, with no TLS wrapper call.
namespace thread_state {
struct Ids {
  uint64_t generation = 0;  // g_fork_generation when read: a fork makes a child's copy stale
  uint64_t pid_tgid = 0;
  uint64_t uid_gid = 0;
  char comm[16] = {};
};
extern constinit thread_local Ids t_ids;
extern constinit thread_local uint32_t t_slot;
extern constinit thread_local uint64_t t_cookie;
// The entry record of the return being probed (null elsewhere), and the stack slot its key
// names: what a lookup of this thread's entry map answers.
extern constinit thread_local const void* t_entry_record;
extern constinit thread_local uint64_t t_entry_slot;
extern std::atomic<uint64_t> g_fork_generation;
const Ids& Refresh();  // reads the ids again
}  // namespace thread_state

// The slot the calling thread's programs use until changed.
inline void SetCurrentSlot(uint32_t slot) {
  thread_state::t_slot = slot;
}
// The calling thread's id, cached (and read again after a fork).
inline uint32_t CurrentTid() {
  using namespace thread_state;
  if (t_ids.generation == g_fork_generation.load(std::memory_order_relaxed)) [[likely]]
    return static_cast<uint32_t>(t_ids.pid_tgid);
  return static_cast<uint32_t>(Refresh().pid_tgid);
}
// The clock bpf_ktime_get_ns reads when usable (the region's); clock_gettime otherwise.
struct TscClock;
void SetTscClock(const TscClock* clock);
// What bpf_ktime_get_ns answers: the entry records of return probes read it too.
uint64_t ProbeClockNs();
// While a return's programs run: the record its entry kept (the time and the six arguments, as
// the entry program would have stored them in the entry map) and the stack slot that held the
// return address. A lookup of the entry map under this thread's id and that slot (whichever
// probe's bits the key carries above bit 48) answers the record, and its delete is a no-op, so
// the entry program need not run. Null: none.
inline void SetCurrentEntryRecord(const void* record, uint64_t slot) {
  thread_state::t_entry_record = record;
  thread_state::t_entry_slot = slot;
}
// What bpf_get_attach_cookie answers on the calling thread until changed: the probe's index.
inline void SetCurrentCookie(uint64_t cookie) {
  thread_state::t_cookie = cookie;
}

}  // namespace fay::inproc
