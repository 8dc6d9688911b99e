#include "record/ebpf/restart_merger.h"

#include <sys/syscall.h>

#include <iterator>

#include "schema/syscall_values.h"

namespace fay::record::ebpf {

void RestartMerger::Apply(std::vector<SyscallEvent>* calls,
                          const std::vector<ProcessEvent>& processes) {
  if (held_.empty()) {
    bool marked = false;
    for (const SyscallEvent& ev : *calls) marked |= (ev.flags & kEventInterrupted) != 0;
    if (!marked) return;  // nearly every batch
  }
  std::vector<SyscallEvent> out;
  out.reserve(calls->size() + held_.size());
  for (SyscallEvent& ev : *calls) {
    if (auto it = held_.find(ev.tid); it != held_.end()) {
      SyscallEvent& was = it->second;
      bool restart_block = was.ret == -kERestartRestartBlock;
      if (restart_block && ev.nr == SYS_restart_syscall) {
        ev.nr = was.nr;
        ev.args = was.args;
        ev.entry_ns = was.entry_ns;
        // restart_syscall captures nothing: what the call's entry read is the first attempt's.
        if (ev.buffers.empty()) ev.buffers = std::move(was.buffers);
        ++folded_;
      } else if (!restart_block && ev.nr == was.nr && ev.args == was.args) {
        ev.entry_ns = was.entry_ns;
        ++folded_;
      } else {
        was.flags &= ~kEventInterrupted;
        out.push_back(std::move(was));
      }
      held_.erase(it);
    }
    if (ev.flags & kEventInterrupted) {
      held_[ev.tid] = std::move(ev);
      continue;
    }
    out.push_back(std::move(ev));
  }
  // A thread that ends holding an attempt was killed before the call was made again (a fatal
  // signal, another thread's exit_group or exec, sent while it was frozen): the call never
  // returned to it.
  for (const ProcessEvent& pe : processes) {
    if (pe.kind != ProcessEventKind::kExit) continue;
    auto it = held_.find(pe.tid);
    if (it == held_.end()) continue;
    SyscallEvent ev = std::move(it->second);
    held_.erase(it);
    ev.flags = (ev.flags & ~kEventInterrupted) | kEventNoExit;
    ev.exit_ns = 0;
    PutBack(&out, std::move(ev));
  }
  *calls = std::move(out);
}

void RestartMerger::Flush(std::vector<SyscallEvent>* calls) {
  for (auto& [tid, ev] : held_) {
    ev.flags &= ~kEventInterrupted;
    PutBack(calls, std::move(ev));
  }
  held_.clear();
}

void RestartMerger::PutBack(std::vector<SyscallEvent>* calls, SyscallEvent ev) {
  // The calls are in the order they returned; a thread's calls never overlap, so this keeps the
  // attempt after its thread's earlier calls.
  auto at = calls->end();
  while (at != calls->begin() && std::prev(at)->LastNs() > ev.LastNs()) --at;
  calls->insert(at, std::move(ev));
}

}  // namespace fay::record::ebpf
