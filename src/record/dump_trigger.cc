#include "record/dump_trigger.h"

#include <fmt/core.h>

#include "engine/offline/trace_catalog.h"
#include "probes/catalog.h"
#include "query/compile.h"
#include "trace/flight.h"

namespace fay::record {
namespace {

// "syscall:openat where ret < 0" reads as a sentence; the query form puts a '|' before where.
std::string AsQuery(const std::string& text) {
  if (text.find('|') != std::string::npos) return text;
  size_t at = text.find(" where ");
  if (at == std::string::npos) return text;
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
  // A predicate on `path` of an fd-based call needs the fd table, which every call builds.
  return builder_.needs_paths() || builder_.ProbeOf(nr) >= 0 || (next_ && next_->Wants(nr));
}

void DumpTrigger::Observe(const SyscallEvent& ev) {
  if (next_ && next_->Wants(ev.nr)) next_->Observe(ev);
  std::lock_guard lk(mu_);
  std::string_view path = builder_.needs_paths() ? paths_.Apply(ev) : std::string_view();
  if (builder_.ProbeOf(ev.nr) < 0) return;
  if (!interp_.Select(builder_.Build(ev, path))) return;
  const uint64_t t = ev.LastNs();
  if (fired_ && t < last_fired_ns_ + rest_ns_) return;
  last_fired_ns_ = t;
  ++fired_;
  flight_->Request(fmt::format("{} (pid {}, tid {})", text_, ev.pid, ev.tid));
}

uint64_t DumpTrigger::fired() const {
  std::lock_guard lk(mu_);
  return fired_;
}

}  // namespace fay::record
