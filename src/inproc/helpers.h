// The helpers an in-process probe program calls (Interpreter's table), behaving as the kernel's
// do for a uprobe program in the same thread: ids, time, comm, user-memory reads that cannot
// crash the process, and the map helpers over the runtime's ShmMaps. The thread's slot (its
// copy of per-CPU maps, and what bpf_get_smp_processor_id answers) is set by the runtime for
// each run.
#pragma once

#include <cstdint>

#include "inproc/interpreter.h"

namespace fay::inproc {

// The helpers' table, env unused (the state is per thread). Map helpers take a ShmMap* as the
// map argument (what Interpreter::Prepare's map_address gives them).
Helpers RuntimeHelpers();

// The slot the calling thread's programs use until changed.
void SetCurrentSlot(uint32_t slot);
// The calling thread's id, cached (and read again after a fork).
uint32_t CurrentTid();
// The clock bpf_ktime_get_ns reads when usable (the region's); clock_gettime otherwise.
struct TscClock;
void SetTscClock(const TscClock* clock);
// What bpf_get_attach_cookie answers on the calling thread until changed: the probe's index.
void SetCurrentCookie(uint64_t cookie);

}  // namespace fay::inproc
