// The plan: a checked query split into the part that runs in the probe (eBPF) and the part that
// runs on the machine (user space). A future cluster part merges serialized aggregate states.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "query/ast.h"
#include "schema/probe.h"

namespace fay {

// One key or selected column, laid out in the probe's key struct / ring-buffer record.
struct Slot {
  const Expr* expr = nullptr;
  std::string name;
  Type type;
  int offset = 0;  // bytes from the start of the key (or record payload)
  int size = 8;    // 8 for ints, probe ids and stack ids; round_up(str_len, 8) for strings
};

struct AggSlot {
  const AggItem* item = nullptr;
  int offset = 0;  // bytes from the start of the map value
  int size = 0;    // see query/agg_layout.h
};

// kRemember: a state pipeline's plan, which stores `remember_value` under `keys`.
enum class PlanMode { kAggregate, kSelect, kRemember };

// How a probe gets attached. A program is generated per attachment.
enum class AttachKind {
  kTracepoint,    // perf_event tracepoint (tp_category/tp_name or exit name)
  kRawSyscalls,   // raw_syscalls:sys_enter / sys_exit shared by many syscall probes
  kUprobe,        // perf_event uprobe; is_return for uretprobe
  kUprobeMulti,   // one uprobe_multi link for many functions of one binary (Attachment::probes)
  kPerfSoftware,  // cpu-clock sampling (profile) or timer (interval)
};

enum class ProgRole {
  kMain,        // evaluates the pipeline at this point
  kEntry,       // syscall/uprobe entry that only records entry state for a kMain at exit
  kScopeFork,   // sched_process_fork: extends the traced set to the new task
  kScopeFree,   // sched_process_free: a task is gone for good; it leaves the set
  kScopeStart,  // raw sys_enter: a held `-c` command is traced from its first execve on
  kRemember,    // a state pipeline's probe: stores its value (Attachment::state says which)
};

struct Attachment {
  AttachKind kind = AttachKind::kTracepoint;
  ProgRole role = ProgRole::kMain;
  int probe_index = -1;        // into Plan::probes; -1 when shared (raw syscalls, scope tracking)
  bool is_exit = false;        // syscall exit / uretprobe
  std::string category, name;  // tracepoint; kUprobeMulti: name is the binary's path
  // kUprobeMulti: the probes the one program serves; each is attached with its index as the
  // BPF cookie, which the program reads to know which function fired.
  std::vector<int> probes;
  // kRemember: the state pipeline (Plan::states); probe_index and probes are into its plan.
  int state = -1;
};

struct Plan {
  std::shared_ptr<Query> query;  // owns the expressions the plan points into
  std::vector<ProbeInfo> probes;

  // --- probe part
  const Expr* predicate = nullptr;  // the conjunction of where stages (null: accept all)
  std::vector<ExprPtr> owned;       // synthesized expressions (e.g. the && of several wheres)
  uint64_t sample_num = 1, sample_den = 1;  // keep with probability num/den
  PlanMode mode = PlanMode::kAggregate;
  std::vector<Slot> keys;  // kAggregate: the `by` keys; kSelect: the selected columns
  int key_size = 0;        // bytes; 8 when there are no keys (a single zero key)
  std::vector<AggSlot> aggs;
  int value_size = 0;
  bool needs_exit = false;  // a syscall probe needs ret/errno/latency, or uprobe latency
  // With an exit part: the str() calls on an argument the call only reads (a syscall's
  // `const char *`, a uprobe argument). The probe reads them at entry and keeps the bytes with
  // the entry state: by the exit the memory may be gone (execve replaced it) or changed. One
  // per distinct text; others with the same text use its bytes.
  std::vector<const Expr*> entry_strings;
  bool use_raw_syscalls = false;  // many syscall probes share raw_syscalls programs
  std::vector<Attachment> attachments;
  uint32_t max_keys = 10240;

  // State across probes: the pipelines before ';' (each a kRemember plan of its own probes),
  // and the distinct reads of their values (Expr::read_slot) this plan's probes make. A read
  // that finds nothing drops the event.
  std::vector<std::shared_ptr<Plan>> states;
  std::vector<const Expr*> state_reads;
  // Several tables (`(count() by probe), (count() by comm)`): this plan's keys and aggregates
  // are the first table's; each further one is a plan of the same probes, predicate and
  // sampling with keys, aggregates and top of its own. One program updates them all.
  std::vector<std::shared_ptr<Plan>> tables;
  int table = -1;  // with several tables: this plan's place among them (0: the query's own)
  // kRemember: what is stored under `keys`, its name, and how long it is kept (0: until read).
  const Expr* remember_value = nullptr;
  std::string remember_name;
  uint64_t remember_ttl_ns = 0;
  // kRemember of system calls that reads ret or errno: runs at their return, with no entry.
  bool remember_at_exit = false;

  // --- machine part
  int64_t top_n = 0;      // 0: all rows
  uint64_t every_ns = 0;  // 0: one window, printed at the end
  uint64_t for_ns = 0;    // 0: until Ctrl-C or the traced command exits
  std::string format;     // kSelect: the text layout of a row (query/row_format.h); "" for columns
  // Output stages, applied to each window's rows (engine/output/row_stages.h): `when COND` on
  // the output columns, and `cluster K by KEY` (cluster_key: its place among the keys).
  const Expr* when = nullptr;
  // `snapshot NAME`: the state pipeline (into states) whose trigger prints the aggregation as
  // it stands each time it fires; -1 without.
  int snapshot_state = -1;
  std::string snapshot_name;
  int64_t cluster_k = 0;
  int cluster_key = -1;
};

// The plan's own table, then each of Plan::tables.
inline std::vector<const Plan*> AllTables(const Plan& plan) {
  std::vector<const Plan*> all{&plan};
  for (const auto& t : plan.tables) all.push_back(t.get());
  return all;
}

// Calls fn on every node of every expression the plan's probe part evaluates: the predicate,
// a state pipeline's value, the keys (or selected columns) and the aggregates' arguments, of
// every table, and the state reads (which a further table, a plan of its own, makes for the
// query's table too). Not the state pipelines' (Plan::states): theirs index other probes.
template <typename Fn>
void VisitPlanExprs(const Plan& plan, Fn&& fn) {
  auto walk = [&](const Expr* e, auto&& self) -> void {
    if (!e) return;
    fn(*e);
    for (const auto& k : e->kids) self(k.get(), self);
  };
  walk(plan.predicate, walk);
  walk(plan.remember_value, walk);
  for (const Plan* p : AllTables(plan)) {
    for (const Slot& s : p->keys) walk(s.expr, walk);
    for (const AggSlot& a : p->aggs) walk(a.item ? a.item->arg.get() : nullptr, walk);
  }
  // By index: PlanStateReads fills the list while it visits (these are found there already).
  for (size_t i = 0; i < plan.state_reads.size(); ++i) walk(plan.state_reads[i], walk);
}

// The first field the plan's probe part reads whose source `pred` accepts, or null.
template <typename Pred>
const Field* FindPlanField(const Plan& plan, Pred&& pred) {
  const Field* found = nullptr;
  VisitPlanExprs(plan, [&](const Expr& e) {
    if (found || e.kind != ExprKind::kField) return;
    for (size_t p = 0; p < plan.probes.size() && p < e.field_index.size(); ++p) {
      const Field& f = plan.probes[p].fields[static_cast<size_t>(e.field_index[p])];
      if (pred(f.source)) found = &f;
    }
  });
  return found;
}

// Whether a key of the plan, or of one of its tables, is a stack.
inline bool HasStackKeys(const Plan& plan) {
  for (const Plan* p : AllTables(plan))
    for (const Slot& s : p->keys)
      if (s.type.kind == TypeKind::kStack) return true;
  return false;
}

// Whether rows name user addresses (a user stack, usym()): their processes' maps are needed
// after they may have exited.
inline bool HasUserAddresses(const Plan& plan) {
  for (const Plan* p : AllTables(plan))
    for (const Slot& s : p->keys) {
      if (s.type.kind == TypeKind::kStack && s.expr && s.expr->name != "kstack") return true;
      if (s.expr && s.expr->kind == ExprKind::kCall && s.expr->name == "usym") return true;
    }
  return false;
}

struct PlanOptions {
  uint32_t max_keys = 10240;
  // Above this many syscall probes, attach raw_syscalls once instead of each syscall tracepoint.
  // Syscall probes beyond this many share raw sys_enter/sys_exit programs. 0, the default, puts
  // every syscall probe there: a raw tracepoint skips building the trace record, which is most
  // of what a per-syscall tracepoint costs (see docs/BENCHMARKS.md).
  size_t raw_syscalls_threshold = 0;
  // Several uprobes on one binary share one program and one uprobe_multi link (kernel 6.6 and
  // later): one load, one attach and one detach instead of one each per function, which for a
  // libc-wide glob is minutes against seconds. Off: one program and perf event per probe.
  bool uprobe_multi = true;
};

}  // namespace fay
