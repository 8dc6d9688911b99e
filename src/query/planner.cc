#include "query/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "query/agg_layout.h"
#include "schema/syscall_table.h"

namespace fay {
namespace {

int RoundUp8(int n) {
  return (n + 7) & ~7;
}

// Bytes a key or selected column takes in the probe's key struct or record.
int SlotSize(const Expr& e) {
  if (e.type.kind == TypeKind::kString) {
    if (e.kind == ExprKind::kField && (e.name == "probe" || e.name == "func")) return 8;
    return RoundUp8(e.type.str_len);
  }
  return 8;
}

int AggSize(const AggItem& a) {
  switch (a.func) {
    case AggFunc::kCount:
    case AggFunc::kSum:
      return 8;
    case AggFunc::kMin:
    case AggFunc::kMax:
    case AggFunc::kAvg:
      return 16;
    case AggFunc::kHist:
      return kHistSlots * 8;
    case AggFunc::kLhist:
      return LhistSlots(a.lo, a.hi, a.step) * 8;
    case AggFunc::kQuantile:
      return kQuantSlots * 8;
    case AggFunc::kDistinct:
      return kHllRegs;
  }
  return 8;
}

ExprPtr MakeField(const std::string& name, const std::vector<ProbeInfo>& probes) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::kField;
  e->name = name;
  e->text = name;
  for (const auto& p : probes) {
    for (size_t i = 0; i < p.fields.size(); ++i) {
      if (p.fields[i].name == name) {
        e->field_index.push_back(static_cast<int>(i));
        e->type = p.fields[i].type;
        break;
      }
    }
  }
  return e;
}

// Whether a syscall argument is memory the kernel writes (by fay's signature table).
bool IsOutputArg(const ProbeInfo& probe, const Field& f) {
  if (probe.syscall_nr < 0 || f.index < 0 || f.index >= 6) return false;
  const SyscallSignature& sig = Signature(probe.syscall_nr);
  return sig.decoded && f.index < sig.nargs &&
         sig.args[static_cast<size_t>(f.index)].dir != ArgDir::kIn;
}

// Which fields does the query read? Decides the attach points.
bool UsesExitFields(const Plan& plan) {
  bool uses = false;
  auto check = [&](const Expr& e) {
    if (e.kind != ExprKind::kField) return;
    for (size_t p = 0; p < plan.probes.size() && p < e.field_index.size(); ++p) {
      const Field& f = plan.probes[p].fields[e.field_index[p]];
      FieldSource s = f.source;
      if (s == FieldSource::kRet || s == FieldSource::kErrno || s == FieldSource::kLatency)
        uses = true;
      // A struct the kernel fills (statx's buffer) holds its answer only at the return.
      if (s == FieldSource::kUserBtf && IsOutputArg(plan.probes[p], f)) uses = true;
    }
  };
  VisitPlanExprs(plan, check);
  return uses;
}

// A state pipeline of system calls that reads ret or errno runs where the calls return (raw
// sys_exit), with no entry program: it remembers nothing the entry knows, so it must not read
// the arguments, gone by then.
Status RememberAtExit(Plan& sp) {
  const Field* arg = FindPlanField(sp, [](FieldSource s) {
    return s == FieldSource::kCtx || s == FieldSource::kDataLoc || s == FieldSource::kUserBtf ||
           s == FieldSource::kUprobeArg || s == FieldSource::kLatency;
  });
  bool syscalls = std::all_of(sp.probes.begin(), sp.probes.end(),
                              [](const ProbeInfo& p) { return p.kind == ProbeKind::kSyscall; });
  if (arg && arg->source == FieldSource::kUprobeArg)
    return Error(Code::kInvalidArgument,
                 fmt::format("the state pipeline of '{}' reads a uretprobe's arguments, which "
                             "are gone at the return: remember them at the uprobe instead",
                             sp.remember_name));
  if (!syscalls)
    return Error(Code::kInvalidArgument,
                 fmt::format("the state pipeline of '{}' reads ret or errno, which only system "
                             "calls have at their return: give it system calls alone",
                             sp.remember_name));
  if (arg || !sp.entry_strings.empty())
    return Error(Code::kInvalidArgument,
                 fmt::format("the state pipeline of '{}' reads ret or errno, so it runs where "
                             "the call returns, and {} is gone by then: test the argument in "
                             "the query that reads the state instead",
                             sp.remember_name, arg ? arg->name : "a string argument"));
  sp.needs_exit = false;
  sp.remember_at_exit = true;
  std::erase_if(sp.attachments, [](const Attachment& a) { return a.role == ProgRole::kEntry; });
  for (Attachment& a : sp.attachments) a.is_exit = true;
  return Status::Ok();
}

bool UsesLatency(const Plan& plan) {
  bool uses = false;
  auto check = [&](const Expr& e) {
    if (e.kind == ExprKind::kField && e.name == "latency") uses = true;
  };
  VisitPlanExprs(plan, check);
  return uses;
}

// Is `e` str() of a pointer the call reads, on every probe? See Plan::entry_strings.
// A syscall argument that the kernel only reads, by fay's signature table, which follows the
// SYSCALL_DEFINE prototypes: it also knows the inputs that the kernel does not declare const
// (mount's source, target and filesystemtype).
bool IsInputArg(const ProbeInfo& probe, const Field& f) {
  if (probe.syscall_nr < 0 || f.index < 0 || f.index >= 6) return false;
  const SyscallSignature& sig = Signature(probe.syscall_nr);
  return sig.decoded && f.index < sig.nargs &&
         sig.args[static_cast<size_t>(f.index)].dir == ArgDir::kIn &&
         sig.args[static_cast<size_t>(f.index)].len == LenKind::kNul;
}

bool IsInputString(const Plan& plan, const Expr& e) {
  if (e.kind != ExprKind::kCall || (e.name != "str" && e.name != "join") || e.kids.empty())
    return false;
  const Expr& ptr = *e.kids[0];
  if (ptr.kind != ExprKind::kField || ptr.field_index.size() != plan.probes.size()) return false;
  for (size_t p = 0; p < plan.probes.size(); ++p) {
    const Field& f = plan.probes[p].fields[static_cast<size_t>(ptr.field_index[p])];
    const ProbeInfo& probe = plan.probes[p];
    bool input = (probe.kind == ProbeKind::kSyscall && f.source == FieldSource::kCtx &&
                  (f.c_type.rfind("const ", 0) == 0 || IsInputArg(probe, f))) ||
                 f.source == FieldSource::kUprobeArg;
    if (!input) return false;
  }
  return true;
}

void PlanEntryStrings(Plan& plan) {
  auto check = [&](const Expr& e) {
    if (!IsInputString(plan, e)) return;
    for (const Expr* s : plan.entry_strings)
      if (s->text == e.text && s->type == e.type) return;
    plan.entry_strings.push_back(&e);
  };
  VisitPlanExprs(plan, check);
}

// Uprobes of one kind on one binary that can share a program (PlanOptions::uprobe_multi): the
// probe indices, keyed by kind and path, for groups of two or more.
std::map<std::pair<ProbeKind, std::string>, std::vector<int>> UprobeGroups(const Plan& plan) {
  std::map<std::pair<ProbeKind, std::string>, std::vector<int>> groups;
  for (size_t i = 0; i < plan.probes.size(); ++i) {
    const ProbeInfo& p = plan.probes[i];
    if (p.kind == ProbeKind::kUprobe || p.kind == ProbeKind::kUretprobe)
      groups[{p.kind, p.path}].push_back(static_cast<int>(i));
  }
  for (auto it = groups.begin(); it != groups.end();)
    it = it->second.size() < 2 ? groups.erase(it) : std::next(it);
  return groups;
}

void PlanAttachments(Plan& plan, const PlanOptions& options) {
  size_t syscalls = 0;
  for (const auto& p : plan.probes) syscalls += p.kind == ProbeKind::kSyscall;
  plan.use_raw_syscalls = syscalls > options.raw_syscalls_threshold;
  bool raw_done = false;
  auto groups = options.uprobe_multi
                    ? UprobeGroups(plan)
                    : std::map<std::pair<ProbeKind, std::string>, std::vector<int>>{};
  for (size_t i = 0; i < plan.probes.size(); ++i) {
    const ProbeInfo& p = plan.probes[i];
    int idx = static_cast<int>(i);
    if (auto g = groups.find({p.kind, p.path}); g != groups.end()) {
      if (g->second.front() != idx) continue;  // the group's first probe attached them all
      Attachment a{AttachKind::kUprobeMulti, ProgRole::kMain, -1, false, "", p.path, g->second};
      if (p.kind == ProbeKind::kUretprobe) {
        if (plan.needs_exit) {
          Attachment entry = a;
          entry.role = ProgRole::kEntry;
          plan.attachments.push_back(entry);
        }
        a.is_exit = true;
      }
      plan.attachments.push_back(a);
      continue;
    }
    switch (p.kind) {
      case ProbeKind::kSyscall:
        if (plan.use_raw_syscalls) {
          if (raw_done) break;
          raw_done = true;
          if (plan.needs_exit) {
            plan.attachments.push_back({AttachKind::kRawSyscalls, ProgRole::kEntry, -1, false,
                                        "raw_syscalls", "sys_enter"});
            plan.attachments.push_back(
                {AttachKind::kRawSyscalls, ProgRole::kMain, -1, true, "raw_syscalls", "sys_exit"});
          } else {
            plan.attachments.push_back({AttachKind::kRawSyscalls, ProgRole::kMain, -1, false,
                                        "raw_syscalls", "sys_enter"});
          }
          break;
        }
        if (plan.needs_exit) {
          plan.attachments.push_back(
              {AttachKind::kTracepoint, ProgRole::kEntry, idx, false, p.tp_category, p.tp_name});
          plan.attachments.push_back(
              {AttachKind::kTracepoint, ProgRole::kMain, idx, true, p.tp_category, p.exit_tp_name});
        } else {
          plan.attachments.push_back(
              {AttachKind::kTracepoint, ProgRole::kMain, idx, false, p.tp_category, p.tp_name});
        }
        break;
      case ProbeKind::kTracepoint:
        plan.attachments.push_back(
            {AttachKind::kTracepoint, ProgRole::kMain, idx, false, p.tp_category, p.tp_name});
        break;
      case ProbeKind::kUprobe:
        plan.attachments.push_back({AttachKind::kUprobe, ProgRole::kMain, idx, false, "", ""});
        break;
      case ProbeKind::kUretprobe:
        if (plan.needs_exit)
          plan.attachments.push_back({AttachKind::kUprobe, ProgRole::kEntry, idx, false, "", ""});
        plan.attachments.push_back({AttachKind::kUprobe, ProgRole::kMain, idx, true, "", ""});
        break;
      case ProbeKind::kInterval:
      case ProbeKind::kProfile:
      case ProbeKind::kSoftware:
        plan.attachments.push_back(
            {AttachKind::kPerfSoftware, ProgRole::kMain, idx, false, "", ""});
        break;
    }
  }
}

void AddSlot(Plan* plan, const Expr* e, const std::string& name, int* offset) {
  Slot s;
  s.expr = e;
  s.name = name;
  s.type = e->type;
  s.offset = *offset;
  s.size = SlotSize(*e);
  *offset += s.size;
  plan->keys.push_back(s);
}

Status CheckSizes(const Plan& plan) {
  if (plan.key_size > 320)
    return Error(Code::kInvalidArgument,
                 fmt::format("the keys take {} bytes; the probe can build at most 320 "
                             "(shorten strings with str(x, N))",
                             plan.key_size));
  if (plan.value_size > 32 * 1024)
    return Error(Code::kInvalidArgument,
                 fmt::format("the aggregates take {} bytes per key; at most 32768 fit in a "
                             "per-CPU map value (use fewer quantile() aggregates)",
                             plan.value_size));
  return Status::Ok();
}

// An aggregate stage's keys and states, laid out in the probe's key and value.
Status LayOutAggregate(Plan* plan, const AggregateStage& agg) {
  plan->mode = PlanMode::kAggregate;
  int offset = 0;
  for (const auto& k : agg.keys) AddSlot(plan, k.expr.get(), k.name, &offset);
  plan->key_size = offset == 0 ? 8 : offset;
  int voff = 0;
  for (const auto& a : agg.aggs) {
    AggSlot s{&a, voff, AggSize(a)};
    voff += RoundUp8(s.size);
    plan->aggs.push_back(s);
  }
  plan->value_size = voff;
  return CheckSizes(*plan);
}

// Whether two expressions compute the same thing, however they are spelled.
bool SameExpr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.name != b.name || a.op != b.op || a.int_value != b.int_value ||
      a.str_value != b.str_value || a.optional != b.optional || a.kids.size() != b.kids.size())
    return false;
  for (size_t i = 0; i < a.kids.size(); ++i)
    if (!SameExpr(*a.kids[i], *b.kids[i])) return false;
  return true;
}

// The distinct state reads of the plan's probe part, each numbered (Expr::read_slot).
void PlanStateReads(Plan& plan) {
  auto check = [&](const Expr& e) {
    if (e.kind != ExprKind::kState) return;
    auto& mut = const_cast<Expr&>(e);  // the plan owns the query
    for (size_t i = 0; i < plan.state_reads.size(); ++i)
      if (SameExpr(*plan.state_reads[i], e)) mut.read_slot = static_cast<int>(i);
    if (mut.read_slot >= 0) return;
    mut.read_slot = static_cast<int>(plan.state_reads.size());
    plan.state_reads.push_back(&e);
  };
  VisitPlanExprs(plan, check);
}

}  // namespace

Expected<Plan> BuildPlan(std::shared_ptr<Query> query, std::vector<ProbeInfo> probes,
                         const PlanOptions& options,
                         std::vector<std::vector<ProbeInfo>> state_probes) {
  Plan plan;
  plan.query = query;
  plan.probes = std::move(probes);
  plan.max_keys = options.max_keys;

  // Each state pipeline is a plan of its own. Its system calls are on raw sys_enter as the
  // query's are, in a program of their own attached after the query's, so a call that both
  // reads and remembers reads first (a raw tracepoint runs its programs in attach order).
  if (query->states.size() != state_probes.size())
    return Error(Code::kInternal, "the state pipelines' probes were not resolved");
  PlanOptions state_options = options;
  state_options.raw_syscalls_threshold = 0;
  for (size_t i = 0; i < query->states.size(); ++i) {
    FAY_ASSIGN_OR_RETURN(Plan sp,
                         BuildPlan(query->states[i], std::move(state_probes[i]), state_options));
    if (sp.needs_exit) FAY_RETURN_IF_ERROR(RememberAtExit(sp));
    for (Attachment& a : sp.attachments) {
      a.role = ProgRole::kRemember;
      a.state = static_cast<int>(i);
    }
    plan.states.push_back(std::make_shared<Plan>(std::move(sp)));
  }

  const AggregateStage* agg = nullptr;
  const SelectStage* sel = nullptr;
  const RememberStage* remember = nullptr;
  const TablesStage* tables = nullptr;
  for (const auto& node : query->stages) {
    if (auto* s = std::get_if<SampleStage>(&node.stage)) {
      // Only the ratio matters (the probe keeps an event when a random u32 is below
      // num/den * 2^32): reduce it, so `sample 50%` written as 5000000000/10000000000, or
      // several sample stages, are the rates they say and never overflow.
      unsigned __int128 num = static_cast<unsigned __int128>(plan.sample_num) * s->num;
      unsigned __int128 den = static_cast<unsigned __int128>(plan.sample_den) * s->den;
      unsigned __int128 a = num, b = den;
      while (b) {
        unsigned __int128 t = a % b;
        a = b;
        b = t;
      }
      if (a > 1) num /= a, den /= a;
      if (den > 0xffffffffULL) {  // the same rate in 2^32ths, rounded
        num = (num * (static_cast<unsigned __int128>(1) << 32) + den / 2) / den;
        den = static_cast<unsigned __int128>(1) << 32;
      }
      plan.sample_num = static_cast<uint64_t>(num);
      plan.sample_den = static_cast<uint64_t>(den);
      if (plan.sample_num == 0)
        return Error(Code::kInvalidArgument, "sampling rate too small: at most 1/4294967295");
    }
    if (auto* a = std::get_if<AggregateStage>(&node.stage)) agg = a;
    if (auto* s = std::get_if<SelectStage>(&node.stage)) sel = s;
    if (auto* r = std::get_if<RememberStage>(&node.stage)) remember = r;
    if (auto* t = std::get_if<TablesStage>(&node.stage)) {
      tables = t;
      agg = &t->tables[0].agg;
      plan.top_n = t->tables[0].top_n;
    }
    if (auto* t = std::get_if<TopStage>(&node.stage)) plan.top_n = t->n;
    if (auto* e = std::get_if<EveryStage>(&node.stage)) plan.every_ns = e->ns;
    if (auto* f = std::get_if<ForStage>(&node.stage)) plan.for_ns = f->ns;
    if (auto* f = std::get_if<FormatStage>(&node.stage)) plan.format = f->fmt;
    if (auto* w = std::get_if<WhenStage>(&node.stage)) plan.when = w->cond.get();
    if (auto* s = std::get_if<SnapshotStage>(&node.stage)) {
      plan.snapshot_name = s->name;
      for (size_t i = 0; i < query->states.size(); ++i)
        if (std::get<RememberStage>(query->states[i]->stages.back().stage).name == s->name)
          plan.snapshot_state = static_cast<int>(i);
    }
    if (auto* c = std::get_if<ClusterStage>(&node.stage)) {
      plan.cluster_k = c->k;
      for (size_t i = 0; agg && i < agg->keys.size(); ++i)
        if (agg->keys[i].name == c->by) plan.cluster_key = static_cast<int>(i);
    }
  }

  // Several where stages are one conjunction. The planner owns the query, so it moves the
  // conditions under one && node rather than copying them.
  std::vector<ExprPtr*> conds;
  for (auto& node : query->stages)
    if (auto* w = std::get_if<WhereStage>(&node.stage)) conds.push_back(&w->cond);
  if (conds.size() == 1) {
    plan.predicate = conds[0]->get();
  } else if (conds.size() > 1) {
    auto both = std::make_unique<Expr>();
    both->kind = ExprKind::kBinary;
    both->op = "&&";
    both->type = Type::Int(true);
    both->kids.push_back(std::move(*conds[0]));
    for (size_t i = 1; i < conds.size(); ++i) {
      if (both->kids.size() == 2) {
        auto outer = std::make_unique<Expr>();
        outer->kind = ExprKind::kBinary;
        outer->op = "&&";
        outer->type = Type::Int(true);
        outer->kids.push_back(std::move(both));
        both = std::move(outer);
      }
      both->kids.push_back(std::move(*conds[i]));
    }
    plan.predicate = both.get();
    plan.owned.push_back(std::move(both));
  }

  auto add_slot = [&](const Expr* e, const std::string& name, int& offset) {
    AddSlot(&plan, e, name, &offset);
  };

  int offset = 0;
  if (remember) {
    plan.mode = PlanMode::kRemember;
    plan.remember_value = remember->value.get();
    plan.remember_name = remember->name;
    plan.remember_ttl_ns = remember->ttl_ns;
    for (const auto& k : remember->keys) add_slot(k.get(), k->text, offset);
    if (remember->keys.empty()) {
      plan.owned.push_back(MakeField("tid", plan.probes));
      add_slot(plan.owned.back().get(), "tid", offset);
    }
    plan.key_size = offset;
    // The value (8 bytes, or a string's width rounded up), then the time it was stored: the
    // layout the probe's state map, GenRemember and GenStateReads all take from here.
    const Type& vt = remember->value->type;
    plan.value_size = vt.kind == TypeKind::kString
                          ? ((std::min(vt.str_len > 0 ? vt.str_len : 64, 256) + 7) & ~7) + 8
                          : 16;
  } else if (agg) {
    FAY_RETURN_IF_ERROR(LayOutAggregate(&plan, *agg));
    // The further tables: the same events, keys and aggregates of their own.
    for (size_t i = 1; tables && i < tables->tables.size(); ++i) {
      auto t = std::make_shared<Plan>();
      t->query = query;
      t->probes = plan.probes;
      t->predicate = plan.predicate;
      t->sample_num = plan.sample_num;
      t->sample_den = plan.sample_den;
      t->max_keys = plan.max_keys;
      t->every_ns = plan.every_ns;
      t->for_ns = plan.for_ns;
      t->top_n = tables->tables[i].top_n;
      t->table = static_cast<int>(i);
      FAY_RETURN_IF_ERROR(LayOutAggregate(t.get(), tables->tables[i].agg));
      plan.tables.push_back(std::move(t));
    }
    if (tables) plan.table = 0;
  } else {
    plan.mode = PlanMode::kSelect;
    if (sel) {
      for (const auto& k : sel->items) add_slot(k.expr.get(), k.name, offset);
    } else {
      // No aggregate and no select: stream the common fields, like a plain tracer would.
      for (const char* f : {"time", "pid", "tid", "comm", "probe"}) {
        plan.owned.push_back(MakeField(f, plan.probes));
        add_slot(plan.owned.back().get(), f, offset);
      }
      for (const char* f : {"ret"}) {
        bool all = !plan.probes.empty();
        for (const auto& p : plan.probes) all = all && p.FindField(f);
        if (!all) continue;
        plan.owned.push_back(MakeField(f, plan.probes));
        add_slot(plan.owned.back().get(), f, offset);
      }
    }
    plan.key_size = offset;
  }
  FAY_RETURN_IF_ERROR(CheckSizes(plan));

  plan.needs_exit = UsesExitFields(plan);
  // At a uretprobe the argument registers hold whatever the function left there: arguments
  // must be remembered at entry.
  auto uses_args = [&] {
    bool uses = false;
    auto check = [&](const Expr& e) {
      if (e.kind == ExprKind::kField && e.name.rfind("arg", 0) == 0) uses = true;
    };
    VisitPlanExprs(plan, check);
    return uses;
  };
  for (const auto& p : plan.probes)
    if (p.kind == ProbeKind::kUretprobe && uses_args()) plan.needs_exit = true;
  for (const auto& p : plan.probes)
    if (p.kind == ProbeKind::kUretprobe && UsesLatency(plan)) plan.needs_exit = true;
  if (plan.needs_exit) PlanEntryStrings(plan);
  PlanStateReads(plan);
  PlanAttachments(plan, options);
  // A table read over a recording alone is a plan of its own: it pairs calls and reads the
  // states as the query does (each such pass keeps the states anew, over the same events).
  for (auto& t : plan.tables) {
    t->needs_exit = plan.needs_exit;
    t->use_raw_syscalls = plan.use_raw_syscalls;
    t->attachments = plan.attachments;
    t->states = plan.states;
    t->state_reads = plan.state_reads;
    t->entry_strings = plan.entry_strings;
  }
  return plan;
}

}  // namespace fay
