#include "record/dump_trigger.h"

#include <fmt/core.h>

#include <algorithm>

#include "engine/offline/trace_catalog.h"
#include "probes/catalog.h"
#include "query/compile.h"
#include "trace/flight.h"

namespace fay::record {
namespace {

// "syscall:openat where ret < 0" reads as a sentence; the query form puts a '|' before where.
// Only a '|' before the first ` where ` makes it the query form: `||` and strings may follow.
std::string AsQuery(const std::string& text) {
  size_t at = text.find(" where ");
  if (at == std::string::npos || text.find('|') < at) return text;
  return text.substr(0, at) + " |" + text.substr(at);
}

}  // namespace

Expected<std::unique_ptr<DumpTrigger>> DumpTrigger::Compile(const std::string& text,
                                                            trace::FlightControl* flight,
                                                            SyscallObserver* next,
                                                            uint64_t rest_ns) {
  // The predicate sees what a query over the dump sees: calls as recorded, fields named by the
  // syscall table when tracefs cannot say.
  SystemCatalog live;
  TraceCatalog catalog(live);
  // Selecting the thread gives a row per match, and nothing else is evaluated.
  auto plan = CompileQuery(AsQuery(text) + " | select tid", catalog);
  if (!plan.ok())
    return Error(plan.status().code(),
                 fmt::format("--dump-on '{}': {}", text, plan.status().message()));
  // The recorder shows it each call as it is handed to the trace: syscalls, one at a time.
  bool syscalls = std::all_of(plan->probes.begin(), plan->probes.end(),
                              [](const ProbeInfo& p) { return p.kind == ProbeKind::kSyscall; });
  if (!syscalls || !plan->states.empty())
    return Error(Code::kInvalidArgument,
                 fmt::format("--dump-on '{}': a trigger is system calls and a condition on each, "
                             "e.g. 'syscall:openat where errno == 13'",
                             text));
  // path comes from an fd table built over the whole trace, from its start: a recorder that
  // sees calls from several threads out of order, and only some of them, cannot keep one.
  if (FindPlanField(*plan, [](FieldSource s) { return s == FieldSource::kPath; }))
    return Error(Code::kInvalidArgument,
                 fmt::format("--dump-on '{}': path is known over a recorded trace only; name "
                             "the file a call opens with str(args.filename)",
                             text));
  return std::make_unique<DumpTrigger>(Key{}, text, std::move(plan).value(), flight, next, rest_ns);
}

DumpTrigger::DumpTrigger(Key, std::string text, Plan plan, trace::FlightControl* flight,
                         SyscallObserver* next, uint64_t rest_ns)
    : text_(std::move(text)),
      plan_(std::move(plan)),
      builder_(plan_),
      flight_(flight),
      next_(next),
      rest_ns_(rest_ns),
      interp_(plan_) {}

bool DumpTrigger::Wants(int nr) const {
  return builder_.ProbeOf(nr) >= 0 || (next_ && next_->Wants(nr));
}

std::vector<int> DumpTrigger::Syscalls() const {
  std::vector<int> nrs;
  for (int nr = 0; nr < 1024; ++nr)
    if (builder_.ProbeOf(nr) >= 0) nrs.push_back(nr);
  return nrs;
}

void DumpTrigger::Observe(const SyscallEvent& ev) {
  if (next_ && next_->Wants(ev.nr)) next_->Observe(ev);
  if (builder_.ProbeOf(ev.nr) < 0) return;  // a call only the next observer wanted
  std::lock_guard lk(mu_);
  if (!interp_.Select(builder_.Build(ev, {}))) return;
  const uint64_t t = ev.LastNs();
  if (fired_ && t < last_fired_ns_ + rest_ns_) return;
  last_fired_ns_ = t;
  ++fired_;
  flight_->Request(fmt::format("{} (pid {}, tid {})", text_, ev.pid, ev.tid), false, t);
}

uint64_t DumpTrigger::fired() const {
  std::lock_guard lk(mu_);
  return fired_;
}

}  // namespace fay::record
