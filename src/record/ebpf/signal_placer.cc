#include "record/ebpf/signal_placer.h"

#include <algorithm>

namespace fay::record::ebpf {

void SignalPlacer::Apply(const std::vector<SyscallEvent>& calls, std::vector<ProcessEvent>* procs) {
  size_t kept = 0;
  for (size_t i = 0; i < procs->size(); ++i) {
    ProcessEvent& pe = (*procs)[i];
    if (pe.kind == ProcessEventKind::kSignal && pe.is_thread) {
      pe.is_thread = false;
      waiting_[pe.tid].push_back(std::move(pe));
    } else {
      if (kept != i) (*procs)[kept] = std::move(pe);  // never onto itself: that empties it
      ++kept;
    }
  }
  procs->resize(kept);
  if (waiting_.empty()) return;
  bool placed = false;
  for (const SyscallEvent& ev : calls) {
    auto it = waiting_.find(ev.tid);
    if (it == waiting_.end()) continue;
    std::vector<ProcessEvent>& sigs = it->second;
    for (auto s = sigs.begin(); s != sigs.end();) {
      if (s->time_ns > ev.LastNs()) {  // sent after this call: the next one tells
        ++s;
        continue;
      }
      // Sent during the call: taken as it returns, after it. Before it: at its time already.
      if (s->time_ns >= ev.entry_ns) s->time_ns = ev.LastNs() + 1;
      procs->push_back(std::move(*s));
      s = sigs.erase(s);
      placed = true;
    }
    if (sigs.empty()) waiting_.erase(it);
  }
  // A thread that ends takes what was sent to it before it ended (a fatal signal, first).
  for (size_t i = 0; i < kept; ++i) {
    if ((*procs)[i].kind != ProcessEventKind::kExit) continue;
    // Copies: the pushes below may move the vector.
    const int32_t tid = (*procs)[i].tid;
    const uint64_t exit_ns = (*procs)[i].time_ns;
    auto it = waiting_.find(tid);
    if (it == waiting_.end()) continue;
    for (ProcessEvent& s : it->second) {
      s.time_ns = std::min(s.time_ns, exit_ns ? exit_ns - 1 : 0);
      procs->push_back(std::move(s));
    }
    waiting_.erase(it);
    placed = true;
  }
  if (placed)
    std::stable_sort(
        procs->begin(), procs->end(),
        [](const ProcessEvent& a, const ProcessEvent& b) { return a.time_ns < b.time_ns; });
}

void SignalPlacer::Flush(std::vector<ProcessEvent>* procs) {
  for (auto& [tid, sigs] : waiting_)
    for (ProcessEvent& s : sigs) procs->push_back(std::move(s));
  waiting_.clear();
  std::stable_sort(procs->begin(), procs->end(), [](const ProcessEvent& a, const ProcessEvent& b) {
    return a.time_ns < b.time_ns;
  });
}

}  // namespace fay::record::ebpf
