#include "record/ebpf/restart_merger.h"

#include <sys/syscall.h>

namespace fay::record::ebpf {

namespace {
constexpr int64_t kERestartRestartBlock = 516;  // include/linux/errno.h
}  // namespace

size_t RestartMerger::Apply(std::vector<SyscallEvent>* calls) {
  size_t kept = 0, dropped = 0;
  for (size_t i = 0; i < calls->size(); ++i) {
    SyscallEvent& ev = (*calls)[i];
    if (!interrupted_.empty()) {
      auto it = interrupted_.find(ev.tid);
      if (it != interrupted_.end()) {
        Interrupted& was = it->second;
        if (was.restart_block && ev.nr == SYS_restart_syscall) {
          ev.nr = was.nr;
          ev.args = was.args;
          ev.entry_ns = was.entry_ns;
          // restart_syscall captures nothing: what the call's entry read is the first attempt's.
          if (ev.buffers.empty()) ev.buffers = std::move(was.buffers);
        } else if (!was.restart_block && ev.nr == was.nr && ev.args == was.args) {
          ev.entry_ns = was.entry_ns;
        }
        // Anything else leaves the call as it is (the thread was killed, or exec'd from another
        // thread, before the attempt was made again).
        interrupted_.erase(it);
      }
    }
    if (ev.flags & kEventInterrupted) {
      interrupted_[ev.tid] = Interrupted{ev.nr, ev.args, ev.entry_ns,
                                         ev.ret == -kERestartRestartBlock, std::move(ev.buffers)};
      ++dropped;
      continue;
    }
    if (kept != i) (*calls)[kept] = std::move(ev);
    ++kept;
  }
  calls->resize(kept);
  return dropped;
}

}  // namespace fay::record::ebpf
