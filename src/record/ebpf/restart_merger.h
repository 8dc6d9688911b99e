// Calls the program never saw return. A call that returns one of the kernel's restart codes
// (ERESTARTSYS and its family) with no signal pending is made again by the kernel before the
// program runs: the thread was woken for something other than a signal. The recorder's own
// freezes (--loss=block) are the usual cause: a thread waiting in a futex or a read is woken to
// freeze, and after the thaw its call is made again (or, for ERESTART_RESTARTBLOCK,
// restart_syscall is called in its place). The program made one call, and the ptrace backend,
// which never freezes, records one. The exit probe marks such an attempt (kEventInterrupted);
// the consumer drops it here and gives the attempt that completes it the first one's entry time
// (and, for restart_syscall, its number, arguments and the buffers captured at its entry).
//
// An attempt a real signal interrupts is left alone: the signal is still pending when the exit
// probe runs, and ptrace shows that attempt too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "schema/syscall_event.h"

namespace fay::record::ebpf {

// One consumer's merger: a thread's calls all reach the same consumer, in order.
class RestartMerger {
 public:
  // Drops the marked attempts from *calls and folds each into the call of its thread that
  // completes it (in this batch or a later one). Returns how many were dropped.
  size_t Apply(std::vector<SyscallEvent>* calls);
  // Attempts whose completing call has not been seen yet.
  size_t pending() const { return interrupted_.size(); }

 private:
  struct Interrupted {
    int32_t nr;
    std::array<uint64_t, 6> args;
    uint64_t entry_ns;
    bool restart_block;  // completed by restart_syscall
    std::vector<CapturedBuffer> buffers;
  };
  std::unordered_map<int32_t, Interrupted> interrupted_;  // by tid
};

}  // namespace fay::record::ebpf
