// Puts the signals the eBPF recorder notes when they are sent (signal_generate: an ignored signal
// the kernel drops, a fatal one it turns into SIGKILL) where ptrace, and so strace, shows them:
// when their thread would have taken them, on its way back to user space. A thread inside a call
// takes it after that call returns; a thread in user space, before its next call. Until the
// thread's next call or its exit says which, the signal waits here.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "schema/syscall_event.h"

namespace fay::record::ebpf {

class SignalPlacer {
 public:
  // Takes the sent signals (kSignal with is_thread set, the wire's mark) out of `procs`, and puts
  // back, at their place in time, those whose place the calls or exits now tell. `procs` stays
  // sorted by time; `calls` is as delivered.
  void Apply(const std::vector<SyscallEvent>& calls, std::vector<ProcessEvent>* procs);
  // The end of the recording: every signal still waiting, at the time it was sent.
  void Flush(std::vector<ProcessEvent>* procs);

 private:
  std::unordered_map<int32_t, std::vector<ProcessEvent>> waiting_;  // by thread
};

}  // namespace fay::record::ebpf
