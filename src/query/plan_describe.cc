#include <fmt/format.h>

#include "query/planner.h"

namespace fay {
namespace {

const char* AggName(AggFunc f) {
  switch (f) {
    case AggFunc::kCount:
      return "count";
    case AggFunc::kSum:
      return "sum";
    case AggFunc::kMin:
      return "min";
    case AggFunc::kMax:
      return "max";
    case AggFunc::kAvg:
      return "avg";
    case AggFunc::kHist:
      return "hist";
    case AggFunc::kLhist:
      return "lhist";
    case AggFunc::kQuantile:
      return "quantile";
    case AggFunc::kDistinct:
      return "distinct";
  }
  return "?";
}

std::string AttachText(const Plan& plan, const Attachment& a) {
  std::string role = a.role == ProgRole::kEntry        ? "entry"
                     : a.role == ProgRole::kScopeFork  ? "scope-fork"
                     : a.role == ProgRole::kScopeFree  ? "scope-free"
                     : a.role == ProgRole::kScopeStart ? "scope-start"
                     : a.role == ProgRole::kRemember   ? "remember"
                                                       : "main";
  switch (a.kind) {
    case AttachKind::kTracepoint:
      return fmt::format("tracepoint {}:{} ({})", a.category, a.name, role);
    case AttachKind::kRawSyscalls:
      return fmt::format("raw tracepoint {} ({})", a.name, role);
    case AttachKind::kUprobeMulti:
      return fmt::format("{} {} ({} functions, one uprobe_multi link) ({})",
                         a.is_exit ? "uretprobe" : "uprobe", a.name, a.probes.size(), role);
    case AttachKind::kUprobe: {
      const ProbeInfo& p = plan.probes[a.probe_index];
      return fmt::format("{} {}:{} +0x{:x} ({})", a.is_exit ? "uretprobe" : "uprobe", p.path,
                         p.symbol, p.file_offset, role);
    }
    case AttachKind::kPerfSoftware: {
      const ProbeInfo& p = plan.probes[a.probe_index];
      if (p.kind == ProbeKind::kProfile)
        return fmt::format("perf cpu-clock at {} Hz on every CPU ({})", p.hz, role);
      if (p.kind == ProbeKind::kSoftware)
        return fmt::format("perf software event {} every {} event{} on every CPU ({})",
                           p.name.substr(9), p.period_events, p.period_events > 1 ? "s" : "", role);
      return fmt::format("perf cpu-clock every {} ns on CPU 0 ({})", p.period_ns, role);
    }
  }
  return "?";
}

}  // namespace

std::string DescribePlan(const Plan& plan) {
  std::string out = "plan:\n";
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const Plan& sp = *plan.states[i];
    out += fmt::format(
        "  state pipeline {}: remember {} as {}, {}, in fay_state_{} ({} keys max)\n", i,
        sp.remember_value->text, sp.remember_name,
        sp.remember_ttl_ns >= kTriggerForever ? std::string("kept for good (LRU hash)")
        : sp.remember_ttl_ns ? fmt::format("kept {} ms (LRU hash)", sp.remember_ttl_ns / 1000000)
                             : std::string("taken by its read (hash)"),
        i, plan.max_keys);
    for (const auto& k : sp.keys)
      out += fmt::format("      key   {:<24} {:<8} @{} ({} bytes)\n", k.name, TypeName(k.type),
                         k.offset, k.size);
    for (const auto& a : sp.attachments) out += "      attach " + AttachText(sp, a) + "\n";
    if (sp.predicate) out += fmt::format("      where {}\n", sp.predicate->text);
  }
  out += "  probe part (eBPF, per CPU):\n";
  out += fmt::format("    probes: {}\n", plan.probes.size());
  for (const auto& a : plan.attachments) out += "      attach " + AttachText(plan, a) + "\n";
  if (plan.use_raw_syscalls)
    out +=
        "      (the syscall probes share these programs: syscall number -> probe index "
        "through fay_sysfilter)\n";
  if (plan.needs_exit) out += "    entry/exit correlation by thread id for ret/errno/latency\n";
  for (const Expr* r : plan.state_reads)
    out += fmt::format("    read {} before the where{}\n", r->text,
                       r->optional ? " (0 when nothing is kept: the event goes on)"
                       : plan.states[static_cast<size_t>(r->state)]->remember_ttl_ns
                           ? ""
                           : " (taken: deleted once every read found its value)");
  if (plan.predicate)
    out += fmt::format("    where {}\n",
                       plan.predicate->text.empty() ? "<conjunction>" : plan.predicate->text);
  if (plan.sample_den > 1 || plan.sample_num != plan.sample_den)
    out +=
        fmt::format("    sample {}/{} (bpf_get_prandom_u32)\n", plan.sample_num, plan.sample_den);
  if (plan.mode == PlanMode::kAggregate) {
    out += fmt::format(
        "    aggregate into a per-CPU hash: key {} bytes, value {} bytes, {} keys max\n",
        plan.key_size, plan.value_size, plan.max_keys);
    for (const auto& k : plan.keys)
      out += fmt::format("      key   {:<24} {:<8} @{} ({} bytes)\n", k.name, TypeName(k.type),
                         k.offset, k.size);
    for (const auto& a : plan.aggs)
      out += fmt::format("      agg   {:<24} {:<8} @{} ({} bytes)\n", a.item->name,
                         AggName(a.item->func), a.offset, a.size);
  } else {
    out += fmt::format("    stream events through a ring buffer: record {} bytes\n",
                       plan.key_size + 8);
    for (const auto& k : plan.keys)
      out += fmt::format("      field {:<24} {:<8} @{} ({} bytes)\n", k.name, TypeName(k.type),
                         k.offset + 8, k.size);
  }
  for (const auto& t : plan.tables) {
    out += fmt::format("    table {}: a per-CPU hash of its own: key {} bytes, value {} bytes\n",
                       t->table, t->key_size, t->value_size);
    for (const auto& k : t->keys)
      out += fmt::format("      key   {:<24} {:<8} @{} ({} bytes)\n", k.name, TypeName(k.type),
                         k.offset, k.size);
    for (const auto& a : t->aggs)
      out += fmt::format("      agg   {:<24} {:<8} @{} ({} bytes)\n", a.item->name,
                         AggName(a.item->func), a.offset, a.size);
  }
  out += "  machine part (user space):\n";
  if (plan.mode == PlanMode::kAggregate) {
    out += "    merge per-CPU states, sort by the first aggregate";
    if (plan.top_n) out += fmt::format(", keep top {}", plan.top_n);
    out += "\n";
    if (plan.every_ns)
      out += fmt::format("    every {} ms: swap double-buffered maps, print and reset the window\n",
                         plan.every_ns / 1000000);
  } else {
    out += "    decode records and print each event\n";
  }
  if (plan.for_ns) out += fmt::format("    stop after {} ms\n", plan.for_ns / 1000000);
  if (plan.mode == PlanMode::kAggregate)
    out +=
        "  cluster part (--hosts): each host's serialized window states, merged exactly up the "
        "tree (AggState::Merge); top and when at the root\n";
  else
    out += "  cluster part: none (select runs on one host)\n";
  return out;
}

}  // namespace fay
