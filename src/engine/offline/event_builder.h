// Turns recorded syscalls into the interpreter's events for one plan. Only the fields the plan
// reads are filled, into per-probe events reused from call to call (strings keep their
// capacity), so building an event costs a few stores rather than allocations.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/value.h"
#include "query/plan.h"
#include "schema/syscall_event.h"

namespace fay {

class EventBuilder {
 public:
  explicit EventBuilder(const Plan& plan);

  // Whether the plan reads `path`: the fd table must then see every call in file order.
  bool needs_paths() const { return needs_paths_; }
  // Whether the plan reads any captured bytes (a path, or str() of an argument): when not, the
  // reader can leave the blob store unread.
  bool needs_bytes() const { return needs_bytes_; }

  // The plan's probe for syscall nr, or -1 when the query does not trace it.
  int ProbeOf(int nr) const {
    return nr >= 0 && static_cast<size_t>(nr) < probe_of_nr_.size() ? probe_of_nr_[nr] : -1;
  }

  // The event for ev, which must be of a traced syscall (ProbeOf(ev.nr) >= 0). `path` is what
  // the fd table says (ignored unless the plan reads it). Valid until the next Build.
  const Event& Build(const SyscallEvent& ev, std::string_view path);

  // The trace the events come from and its host: the `trace` and `host` fields, constant over
  // a trace, so set once rather than per event.
  void SetOrigin(std::string_view trace, std::string_view host);

  // The plan's probe of the signals delivered (tracepoint:signal:signal_deliver), or -1.
  int signal_probe() const { return signal_probe_; }
  // The event for a signal record; `uid` and `comm` are its thread's, from its calls before.
  const Event& BuildSignal(const ProcessEvent& ev, uint32_t uid, std::string_view comm);

 private:
  struct Need {
    int index = 0;  // into ProbeInfo::fields and Event::values
    FieldSource source = FieldSource::kTime;
    int arg = 0;             // syscall argument position, for kCtx
    bool low32 = false;      // an `int`-sized argument: only its low half, as the probe loads it
    bool is_signed = false;  // of low32
  };
  struct PerProbe {
    std::vector<Need> needs;
    // Fields str() reads, with their argument positions: their captured strings.
    std::vector<std::pair<int, int>> strings;
    Event event;
    std::array<char, 16> comm{};  // what the comm value holds: unchanged runs skip the copy
  };

  std::vector<int> probe_of_nr_;
  int signal_probe_ = -1;
  std::vector<PerProbe> probes_;
  bool needs_paths_ = false;
  bool needs_bytes_ = false;
  bool at_exit_ = false;       // the plan's probe fires at the call's exit (Event::time_ns)
  bool time_at_exit_ = false;  // and `time` is read there (a state pipeline at the return)
};

// An argument value as the live probe loads it (see bpf/codegen/field_gen.cc).
int64_t ArgValue(const Field& f, uint64_t raw);

}  // namespace fay
