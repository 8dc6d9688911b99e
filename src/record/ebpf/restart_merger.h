// Calls the program never saw return. A call that returns one of the kernel's restart codes
// (ERESTARTSYS and its family) with no signal pending is usually made again by the kernel before
// the program runs: the thread was woken for something other than a signal. The recorder's own
// freezes (--loss=block) are the usual cause: a thread waiting in a futex or a read is woken to
// freeze, and after the thaw its call is made again (or, for ERESTART_RESTARTBLOCK,
// restart_syscall is called in its place). The program made one call, and the ptrace backend,
// which never freezes, records one. The exit probe marks such an attempt (kEventInterrupted);
// the consumer holds it here until the thread's next call. When that call is the attempt made
// again, the attempt is dropped and the call takes its entry time (and, for restart_syscall,
// its number, arguments and entry buffers).
//
// Otherwise the program did see the attempt: a signal sent while the thread was frozen is
// handled after the thaw (the call returns EINTR, or a handler runs first). The attempt is then
// put back, unmarked, ahead of that call, as ptrace shows it; so it is when the thread ends
// first (as a call that never returned) and when the recording ends first. An attempt a signal
// pending at its return interrupted is never marked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "schema/syscall_event.h"

namespace fay::record::ebpf {

// One consumer's merger: a thread's calls and its exit all reach the same consumer, in order.
class RestartMerger {
 public:
  // Holds the marked attempts of *calls, and resolves those held before against the calls that
  // follow them and against the threads' ends in `processes`.
  void Apply(std::vector<SyscallEvent>* calls, const std::vector<ProcessEvent>& processes);
  // Appends every attempt still held to *calls, unmarked: the recording ended first.
  void Flush(std::vector<SyscallEvent>* calls);
  // Attempts dropped because the call that completes them was seen.
  uint64_t folded() const { return folded_; }
  size_t held() const { return held_.size(); }

 private:
  // Puts `ev` into *calls after the calls that ended before it.
  static void PutBack(std::vector<SyscallEvent>* calls, SyscallEvent ev);

  std::unordered_map<int32_t, SyscallEvent> held_;  // by tid
  uint64_t folded_ = 0;
};

}  // namespace fay::record::ebpf
