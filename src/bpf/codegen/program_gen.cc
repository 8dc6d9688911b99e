// Program assembly: the prologue every program shares (context, scratch, probe index, scope),
// the three program roles (main, entry, scope tracking) and the map set of a query.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "bpf/codegen/codegen.h"
#include "bpf/codegen/gen_context.h"

namespace fay::bpf {
namespace {

constexpr int16_t kRecordIdOff = 8;  // `long id` in raw_syscalls:sys_enter / sys_exit

int RoundUp8(int n) {
  return (n + 7) & ~7;
}

// R9 = the per-CPU scratch value.
void GenScratch(Gen& g) {
  Emitter& e = g.e;
  e.StoreImm(4, R10, kFpKey, 0);
  GenLookupFpKey(g, kMapScratch);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Mov(R9, R0);
}

// Raw syscalls: keep only the syscalls the query names, and remember which probe this is.
void GenSyscallFilter(Gen& g) {
  Emitter& e = g.e;
  // A state pipeline's system calls are other probes, in a filter of their own.
  const int filter = g.attach.state >= 0 ? kMapStateSysFilter0 + g.attach.state : kMapSysFilter;
  e.Comment("raw syscalls: syscall number -> probe index");
  e.Load(8, R1, R6, kRecordIdOff);
  e.JmpIfImm(BPF_JSLT, R1, 0, g.exit_label);
  e.JmpIfImm(BPF_JSGE, R1, kMaxSyscalls, g.exit_label);
  e.Store(4, R10, kFpKey, R1);
  GenLookupFpKey(g, filter);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(4, R1, R0, 0);
  e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
  e.AluImm(BPF_SUB, R1, 1);
  e.Store(8, R10, kFpProbe, R1);
}

bool IsUprobeAttach(const Gen& g) {
  return g.attach.kind == AttachKind::kUprobe || g.attach.kind == AttachKind::kUprobeMulti;
}

bool UseTaskPtr(const Gen& g) {
  return g.options.task_comm_offset >= 0 && g.options.task_pid_offset >= 0 &&
         g.options.task_tgid_offset >= 0 && !IsUprobeAttach(g);
}

// A uprobe_multi program serves many functions: each was attached with its probe index as the
// cookie.
void GenCookieProbe(Gen& g) {
  g.e.Comment("uprobe_multi: the attach cookie is the probe index");
  g.e.Mov(R1, R6);
  g.e.Call(BPF_FUNC_get_attach_cookie);
  g.e.Store(8, R10, kFpProbe, R0);
}

// fp-32 = the current task. One helper call buys tgid, tid and comm; each helper call costs
// about as much as the rest of a typical probe together, so the scope check, the pid and comm
// fields all read through this pointer rather than through helpers of their own.
void GenTaskPtr(Gen& g) {
  if (!UseTaskPtr(g) || g.task_ptr) return;
  g.e.Call(BPF_FUNC_get_current_task_btf);
  g.e.Store(8, R10, kFpTask, R0);
  g.task_ptr = true;
}

// R0 = the current tgid.
void GenCurrentTgid(Gen& g) {
  if (g.task_ptr) {
    g.e.Load(8, R0, R10, kFpTask);
    g.e.Load(4, R0, R0, static_cast<int16_t>(g.options.task_tgid_offset));
  } else {
    g.e.Call(BPF_FUNC_get_current_pid_tgid);
    g.e.AluImm(BPF_RSH, R0, 32);
  }
}

// Raw tracepoint prologue for syscall probes: R6 = a raw_syscalls-layout record in scratch
// holding the syscall number (and, at exit, the return value). Arguments come later, after the
// syscall filter, so calls the query does not name never pay for copying them.
void GenRawRecord(Gen& g) {
  Emitter& e = g.e;
  const int16_t rec = static_cast<int16_t>(g.raw_record_off);
  e.Store(8, R10, kFpCtx, R6);
  if (g.attach.is_exit) {
    e.Comment("raw sys_exit(regs, ret): the number is in regs->orig_ax");
    e.Load(8, R1, R6, 8);
    e.Store(8, R9, static_cast<int16_t>(rec + 16), R1);
    e.Load(8, R3, R6, 0);
    e.AluImm(BPF_ADD, R3, kRegsOrigAxOff);
    e.Mov(R1, R9);
    e.AluImm(BPF_ADD, R1, rec + 8);
    e.MovImm(R2, 8);
    e.Call(BPF_FUNC_probe_read_kernel);
    e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
  } else {
    e.Comment("raw sys_enter(regs, id)");
    e.Load(8, R1, R6, 8);
    e.Store(8, R9, static_cast<int16_t>(rec + 8), R1);
  }
  e.Mov(R6, R9);
  e.AluImm(BPF_ADD, R6, rec);
  g.raw_ctx = true;
}

// The six syscall arguments (di, si, dx, r10, r8, r9) into the record, from one copy of
// pt_regs r10..di.
void GenRawArgs(Gen& g) {
  Emitter& e = g.e;
  const int16_t rec = static_cast<int16_t>(g.raw_record_off);
  const int16_t tmp = static_cast<int16_t>(rec + kRawRecordSize);
  e.Comment("syscall arguments from pt_regs");
  e.Load(8, R3, R10, kFpCtx);
  e.Load(8, R3, R3, 0);
  e.AluImm(BPF_ADD, R3, kRegsR10Off);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, tmp);
  e.MovImm(R2, kRawRegsCopySize);
  e.Call(BPF_FUNC_probe_read_kernel);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
  // Offsets inside the copy, which starts at r10 (pt_regs +56).
  static constexpr int16_t kArgInCopy[6] = {56, 48, 40, 0, 16, 8};
  for (int i = 0; i < 6; ++i) {
    e.Load(8, R1, R9, static_cast<int16_t>(tmp + kArgInCopy[i]));
    e.Store(8, R9, static_cast<int16_t>(rec + 16 + 8 * i), R1);
  }
}

// Whether some seen events do not match: without a filter user space copies the count.
bool CountsMatched(const Plan& plan) {
  return plan.predicate || plan.sample_num < plan.sample_den || !plan.state_reads.empty();
}

bool PlanReadsArgs(const Plan& plan) {
  bool found = false;
  VisitPlanExprs(plan, [&](const Expr& e) {
    if (e.kind == ExprKind::kField && e.name.rfind("args.", 0) == 0) found = true;
  });
  return found;
}

// The record offset of the task a sched: or task: tracepoint is about, when that need not be
// the running one: sched_wakeup's wakee, sched_process_free's freed task, sched_migrate_task's
// migrant, sched_switch's next task (the running one is the previous). -1 for other probes,
// and for sched_process_wait, whose `pid` is wait's argument.
int SubjectPidOffset(const Gen& g) {
  if (g.attach.kind != AttachKind::kTracepoint || g.attach.probe_index < 0) return -1;
  const ProbeInfo& p = g.plan.probes[g.attach.probe_index];
  if (p.kind != ProbeKind::kTracepoint) return -1;
  if (p.tp_category != "sched" && p.tp_category != "task") return -1;
  if (p.tp_name == "sched_process_wait") return -1;
  const char* subject = p.tp_name == "sched_switch" ? "next_pid" : "pid";
  for (const Field& f : p.fields)
    if (f.name == subject && f.source == FieldSource::kCtx && f.size == 4) return f.offset;
  return -1;
}

// -c/-p: only the traced process tree; otherwise everything but fay itself. An event is in
// scope when the task it runs in belongs to a traced process or, on the sched: and task:
// tracepoints that name another task (SubjectPidOffset), when that task is traced.
void GenScope(Gen& g) {
  Emitter& e = g.e;
  GenTaskPtr(g);
  if (g.options.scoped) {
    // The traced set changes rarely, so each CPU remembers its last answer together with the
    // set's generation; only a new process or a changed set costs a hash lookup.
    const int subject_off = SubjectPidOffset(g);
    Label slow = e.NewLabel(), in_scope = e.NewLabel();
    Label out = subject_off >= 0 ? e.NewLabel() : g.exit_label;
    e.Comment("scope: is this process in the traced tree? (per-CPU cached)");
    GenCurrentTgid(g);
    e.Store(8, R10, kFpTgid, R0);
    e.StoreImm(4, R10, kFpKey, 0);
    GenLookupFpKey(g, kMapScopeGen);
    e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
    e.Load(8, R8, R0, 0);  // generation
    GenLookupFpKey(g, kMapScopeCache);
    e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
    e.Mov(R7, R0);  // cache entry: [u64 tgid + 1][u64 generation][u64 verdict]
    e.Load(8, R1, R7, 0);
    e.Load(8, R2, R10, kFpTgid);
    e.AluImm(BPF_ADD, R2, 1);
    e.JmpIf(BPF_JNE, R1, R2, slow);
    e.Load(8, R1, R7, 8);
    e.JmpIf(BPF_JNE, R1, R8, slow);
    e.Load(8, R1, R7, 16);
    e.JmpIfImm(BPF_JEQ, R1, 0, out);
    e.Jmp(in_scope);
    e.Bind(slow);
    e.Load(8, R1, R10, kFpTgid);
    e.Store(4, R10, kFpKey, R1);
    GenLookupFpKey(g, kMapScope);
    e.MovImm(R3, 0);
    Label store = e.NewLabel();
    e.JmpIfImm(BPF_JEQ, R0, 0, store);
    e.Load(1, R1, R0, 0);
    e.JmpIfImm(BPF_JNE, R1, kScopeActive, store);
    e.MovImm(R3, 1);
    e.Bind(store);
    e.Load(8, R1, R10, kFpTgid);
    e.AluImm(BPF_ADD, R1, 1);
    e.Store(8, R7, 0, R1);
    e.Store(8, R7, 8, R8);
    e.Store(8, R7, 16, R3);
    if (subject_off < 0) {
      e.JmpIfImm(BPF_JEQ, R3, 0, g.exit_label);
    } else {
      e.JmpIfImm(BPF_JNE, R3, 0, in_scope);
      e.Bind(out);
      e.Comment("scope: or is the task this event is about traced?");
      e.Load(4, R1, R6, static_cast<int16_t>(subject_off));
      e.Store(4, R10, kFpKey, R1);
      GenLookupFpKey(g, kMapScope);
      e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
      e.Load(1, R1, R0, 0);
      e.JmpIfImm(BPF_JNE, R1, kScopeActive, g.exit_label);
    }
    e.Bind(in_scope);
  } else if (g.options.self_tgid) {
    e.Comment("skip fay's own events");
    GenCurrentTgid(g);
    e.JmpIfImm(BPF_JEQ, R0, static_cast<int32_t>(g.options.self_tgid), g.exit_label);
  }
}

bool IsSyscallAttach(const Gen& g) {
  return g.attach.kind == AttachKind::kRawSyscalls ||
         (g.attach.probe_index >= 0 &&
          g.plan.probes[g.attach.probe_index].kind == ProbeKind::kSyscall);
}

constexpr int16_t kRegsSpOff = 152;  // x86-64 struct pt_regs

// fp-56 = the call's entry-map key, {thread id, stack pointer}. Both ends of a pair are generated
// alike, so they agree. A thread is in one system call at a time, but in many probed functions:
// gethostbyname2 calls gethostbyname2_r, a function may recurse. The stack pointer tells those
// calls apart: at a function's first instruction it points at the return address, and when the
// uretprobe fires the `ret` has popped it, so it is 8 bytes higher. Two probes of one address
// (aliases such as malloc and __libc_malloc) each keep their own record: the probe's index + 1
// sits in the bits above 48, which a user-space stack pointer never uses.
void GenEntryKey(Gen& g) {
  Emitter& e = g.e;
  GenTaskPtr(g);
  if (g.task_ptr) {
    e.Load(8, R1, R10, kFpTask);
    e.Load(4, R1, R1, static_cast<int16_t>(g.options.task_pid_offset));
    e.Store(8, R10, kFpEntryKey, R1);
  } else {
    e.Call(BPF_FUNC_get_current_pid_tgid);
    e.Store(8, R10, kFpEntryKey, R0);
  }
  if (IsUprobeAttach(g)) {
    if (g.static_probe() >= 0) {
      e.LdImm64(R2, static_cast<uint64_t>(g.static_probe() + 1) << kEntryKeyProbeShift);
    } else {
      e.Load(8, R2, R10, kFpProbe);
      e.AluImm(BPF_ADD, R2, 1);
      e.AluImm(BPF_LSH, R2, kEntryKeyProbeShift);
    }
    e.Load(8, R1, R6, kRegsSpOff);
    if (g.attach.is_exit) e.AluImm(BPF_SUB, R1, 8);
    e.Alu(BPF_OR, R1, R2);
    e.Store(8, R10, kFpEntryKey + 8, R1);
  } else {
    e.StoreImm(8, R10, kFpEntryKey + 8, 0);
  }
}

// Entry: remember the entry time and arguments under the thread id.
void GenEntryBody(Gen& g) {
  Emitter& e = g.e;
  GenScope(g);
  e.Comment("entry state: time and arguments, keyed by thread");
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R9, static_cast<int16_t>(g.entry_off), R0);
  static constexpr int16_t kRegsArgOff[6] = {112, 104, 96, 88, 72, 64};
  // The kernel refuses to attach a tracepoint program that reads past the record, so a
  // per-syscall entry copies only the arguments that syscall has.
  int nargs = 6;
  if (g.attach.kind == AttachKind::kTracepoint && g.attach.probe_index >= 0) {
    nargs = 0;
    for (const Field& f : g.plan.probes[g.attach.probe_index].fields)
      if (f.source == FieldSource::kCtx) nargs = std::max(nargs, f.index + 1);
  }
  for (int i = 0; i < nargs; ++i) {
    int16_t src = IsSyscallAttach(g) ? static_cast<int16_t>(16 + 8 * i) : kRegsArgOff[i];
    e.Load(8, R1, R6, src);
    e.Store(8, R9, static_cast<int16_t>(g.entry_off + 8 + 8 * i), R1);
  }
  for (const EntryString& s : g.entry.strings) {
    // Zeroed first: the exit copies whole words, and string keys must be canonical.
    for (int w = 0; w < (s.len + 7) / 8; ++w)
      e.StoreImm(8, R9, static_cast<int16_t>(g.entry_off + s.off + 8 * w), 0);
    GenStringExpr(g, *s.expr, g.entry_off + s.off, s.len);
  }
  GenEntryKey(g);
  e.LdMap(R1, kMapEntry);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpEntryKey);
  e.Mov(R3, R9);
  e.AluImm(BPF_ADD, R3, g.entry_off);
  e.MovImm(R4, BPF_ANY);
  e.Call(BPF_FUNC_map_update_elem);
}

// Exit: fetch and drop the entry state; no entry (attached mid-call) means no event.
void GenFetchEntry(Gen& g) {
  Emitter& e = g.e;
  e.Comment("exit: fetch this call's entry state");
  GenEntryKey(g);
  e.LdMap(R1, kMapEntry);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpEntryKey);
  e.Call(BPF_FUNC_map_lookup_elem);
  Label found = e.NewLabel();
  e.JmpIfImm(BPF_JNE, R0, 0, found);
  // Counted only for calls the query would have seen: the entry program dropped the rest.
  GenScope(g);
  GenBumpStat(g, kStatNoEntry);
  e.Jmp(g.exit_label);
  e.Bind(found);
  for (int w = 0; w < g.entry.size / 8; ++w) {
    e.Load(8, R1, R0, static_cast<int16_t>(8 * w));
    e.Store(8, R9, static_cast<int16_t>(g.entry_off + 8 * w), R1);
  }
  e.LdMap(R1, kMapEntry);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpEntryKey);
  e.Call(BPF_FUNC_map_delete_elem);
  g.has_entry = true;
}

}  // namespace

void GenSample(Gen& g) {
  const Plan& plan = g.plan;
  if (plan.sample_num >= plan.sample_den) return;
  Emitter& e = g.e;
  uint64_t threshold = (plan.sample_num << 32) / plan.sample_den;
  e.Comment(fmt::format("sample {}/{}", plan.sample_num, plan.sample_den));
  e.Call(BPF_FUNC_get_prandom_u32);
  e.LdImm64(R1, threshold);
  e.JmpIf(BPF_JGE, R0, R1, g.exit_label);
}

namespace {

void GenMainBody(Gen& g) {
  Emitter& e = g.e;
  bool paired = g.attach.is_exit && g.plan.needs_exit;
  if (paired)
    GenFetchEntry(g);
  else
    GenScope(g);
  GenBumpStat(g, kStatSeen);
  GenStateReads(g);
  if (g.plan.predicate) {
    e.Comment("where " + g.plan.predicate->text);
    GenIntExpr(g, *g.plan.predicate);
    e.JmpIfImm(BPF_JEQ, R7, 0, g.exit_label);
  }
  GenSample(g);
  // Without a filter every seen event matches; user space copies the count.
  if (CountsMatched(g.plan)) GenBumpStat(g, kStatMatched);
  if (g.plan.mode != PlanMode::kAggregate) {
    GenSelect(g);
    return;
  }
  // Each table in turn: one that cannot take the event (its map full) leaves the others be.
  const Label exit = g.exit_label;
  const bool main_cache = g.use_cache;
  for (size_t t = 0; t <= g.plan.tables.size(); ++t) {
    if (!g.plan.tables.empty()) e.Comment(fmt::format("table {}", t));
    g.table = static_cast<int>(t);
    g.use_cache = t == 0 ? main_cache : g.table_caches[t - 1];
    g.exit_label = t == g.plan.tables.size() ? exit : e.NewLabel();
    GenAggregate(g);
    if (g.exit_label.id != exit.id) e.Bind(g.exit_label);
  }
  g.exit_label = exit;
  g.table = 0;
  g.use_cache = main_cache;
}

// Invalidates every CPU's scope cache.
void GenBumpScopeGen(Gen& g) {
  Emitter& e = g.e;
  e.StoreImm(4, R10, kFpKey, 0);
  GenLookupFpKey(g, kMapScopeGen);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.MovImm(R1, 1);
  e.AtomicAdd64(R0, 0, R1);
}

// A `-c` command is in the set from its fork, pending: the calls fay's child makes before the
// exec are fay's. It is traced from the entry of its first execve (or execveat) on, so that call
// and everything the exec does (sched_prepare_exec, sched_process_exec) are the command's. This
// program is attached before every other on sys_enter, and the kernel runs a tracepoint's
// programs in the order they were attached, so the query's own sys_enter program already sees
// the execve. It is detached once the exec has happened (LiveQuery::CommandStarted).
void GenScopeStart(Gen& g) {
  Emitter& e = g.e;
  Label go = e.NewLabel();
  e.Comment("a held command's execve: trace it from this call on");
  e.Load(8, R1, R6, 8);  // raw sys_enter(regs, id)
  e.JmpIfImm(BPF_JEQ, R1, kSysExecve, go);
  e.JmpIfImm(BPF_JNE, R1, kSysExecveat, g.exit_label);
  e.Bind(go);
  e.Call(BPF_FUNC_get_current_pid_tgid);
  e.AluImm(BPF_RSH, R0, 32);
  e.Store(4, R10, kFpKey, R0);
  GenLookupFpKey(g, kMapScope);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(1, R1, R0, 0);
  e.JmpIfImm(BPF_JNE, R1, kScopePendingExec, g.exit_label);
  e.StoreImm(1, R0, 0, kScopeActive);
  GenBumpScopeGen(g);
}

// The raw tracepoint argument at `arg_off` is a task_struct pointer: its pid into kFpKey, read
// with bpf_probe_read_kernel at the pid's BTF offset.
void GenTaskPid(Gen& g, int16_t arg_off) {
  Emitter& e = g.e;
  e.Load(8, R3, R6, arg_off);
  e.AluImm(BPF_ADD, R3, g.options.task_pid_offset);
  e.Mov(R1, R10);
  e.AluImm(BPF_ADD, R1, kFpKey);
  e.MovImm(R2, 4);
  e.Call(BPF_FUNC_probe_read_kernel);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
}

// A traced task forked or made a thread: trace the new task too. Keys are task ids; a process's
// key is its leader's, which is its tgid, the key the scope check looks up.
void GenScopeFork(Gen& g) {
  Emitter& e = g.e;
  e.Comment("a traced process forked: trace the child too");
  e.Call(BPF_FUNC_get_current_pid_tgid);
  e.AluImm(BPF_RSH, R0, 32);
  e.Store(4, R10, kFpKey, R0);
  GenLookupFpKey(g, kMapScope);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(1, R1, R0, 0);
  e.JmpIfImm(BPF_JNE, R1, kScopeActive, g.exit_label);
  if (RawScope(g.options)) {
    // Raw sched_process_fork(parent, child): the child task's pid, at its BTF offset.
    GenTaskPid(g, 8);
  } else {
    e.Load(4, R1, R6, static_cast<int16_t>(g.options.fork_child_off));
    e.Store(4, R10, kFpKey, R1);
  }
  e.StoreImm(1, R10, kFpProbe, kScopeActive);
  e.LdMap(R1, kMapScope);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpKey);
  e.Mov(R3, R10);
  e.AluImm(BPF_ADD, R3, kFpProbe);
  e.MovImm(R4, BPF_ANY);
  e.Call(BPF_FUNC_map_update_elem);
  GenBumpScopeGen(g);
}

// A task is freed: forget its id. Not at sched_process_exit: the exit itself, the dead task's
// last context switch and sched_process_free are still the traced task's events, and a leader
// that exits before its threads must not take the whole process out of scope. Attached after
// the query's programs, so a query on sched_process_free still sees the task in scope.
void GenScopeFree(Gen& g) {
  Emitter& e = g.e;
  e.Comment("a task was freed: forget its id");
  if (RawScope(g.options)) {
    GenTaskPid(g, 0);  // raw sched_process_free(task)
  } else {
    e.Load(4, R1, R6, static_cast<int16_t>(g.options.free_pid_off));
    e.Store(4, R10, kFpKey, R1);
  }
  e.LdMap(R1, kMapScope);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpKey);
  e.Call(BPF_FUNC_map_delete_elem);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
  GenBumpScopeGen(g);
}

bpf_prog_type ProgType(AttachKind k) {
  switch (k) {
    case AttachKind::kUprobe:
    case AttachKind::kUprobeMulti:
      return BPF_PROG_TYPE_KPROBE;
    case AttachKind::kPerfSoftware:
      return BPF_PROG_TYPE_PERF_EVENT;
    case AttachKind::kRawSyscalls:
      return BPF_PROG_TYPE_RAW_TRACEPOINT;
    default:
      return BPF_PROG_TYPE_TRACEPOINT;
  }
}

Expected<GeneratedProgram> GenProgram(const Plan& plan, const CodegenOptions& options,
                                      const Attachment& attach, int entry_off, int raw_record_off,
                                      int str_base, int n, bool use_cache,
                                      const std::vector<bool>& table_caches) {
  Gen g(plan, options, attach, entry_off);
  g.entry = LayOutEntry(plan);
  g.state_str_base = raw_record_off + kRawRecordSize + kRawRegsCopySize;
  g.use_cache = use_cache;
  g.table_caches = table_caches;
  g.set_str_base(str_base);
  Emitter& e = g.e;
  g.exit_label = e.NewLabel();
  e.Comment("R6 = context");
  e.Mov(R6, R1);
  if (attach.role == ProgRole::kScopeFork) {
    GenScopeFork(g);
  } else if (attach.role == ProgRole::kScopeStart) {
    GenScopeStart(g);
  } else if (attach.role == ProgRole::kScopeFree) {
    GenScopeFree(g);
  } else {
    GenScratch(g);
    if (attach.kind == AttachKind::kUprobeMulti) GenCookieProbe(g);
    if (attach.kind == AttachKind::kRawSyscalls) {
      g.raw_record_off = raw_record_off;
      GenRawRecord(g);
      GenSyscallFilter(g);
      if (!attach.is_exit && (attach.role == ProgRole::kEntry || PlanReadsArgs(plan)))
        GenRawArgs(g);
    }
    if (attach.role == ProgRole::kEntry) {
      GenEntryBody(g);
    } else if (attach.role == ProgRole::kRemember) {
      GenScope(g);
      GenRemember(g);
    } else {
      GenMainBody(g);
    }
  }
  e.Bind(g.exit_label);
  e.MovImm(R0, 0);
  e.Exit();
  if (!g.status.ok()) return g.status;

  GeneratedProgram prog;
  prog.attach = attach;
  prog.type = ProgType(attach.kind);
  if (attach.kind == AttachKind::kUprobeMulti) prog.expected_attach_type = kAttachUprobeMulti;
  const char* role = attach.role == ProgRole::kEntry        ? "entry"
                     : attach.role == ProgRole::kRemember   ? "state"
                     : attach.role == ProgRole::kScopeFork  ? "fork"
                     : attach.role == ProgRole::kScopeFree  ? "free"
                     : attach.role == ProgRole::kScopeStart ? "start"
                                                            : "main";
  prog.name = fmt::format("fay_{}_{}", role, n);
  FAY_ASSIGN_OR_RETURN(prog.insns, e.Finish());
  prog.relocs = e.relocs();
  prog.comments = e.comments();
  return prog;
}

}  // namespace

EntryLayout LayOutEntry(const Plan& plan) {
  EntryLayout layout;
  for (const Expr* s : plan.entry_strings) {
    int len = std::min(s->type.str_len > 0 ? s->type.str_len : 64, kStrBufSize);
    layout.strings.push_back({s, layout.size, len});
    layout.size += RoundUp8(len);
  }
  return layout;
}

Expected<GeneratedQuery> Generate(const Plan& plan, const CodegenOptions& options) {
  GeneratedQuery q;
  auto set = [&](MapId id, bpf_map_type type, const char* name, uint32_t k, uint32_t v,
                 uint32_t n) { q.maps[id] = MapDesc{true, type, name, k, v, n, 0}; };

  // The key area at the start of scratch also holds a state pipeline's key and value, and
  // each table's key.
  int key_area = std::max(plan.key_size, 8);
  for (const auto& sp : plan.states) key_area = std::max(key_area, sp->key_size + sp->value_size);
  // ... and, before the query's own key is built, the keys of its state reads, side by side.
  int read_keys = 0;
  for (const Expr* r : plan.state_reads)
    read_keys += RoundUp8(plan.states[static_cast<size_t>(r->state)]->key_size);
  key_area = std::max(key_area, read_keys);
  for (const auto& t : plan.tables) key_area = std::max(key_area, t->key_size);
  int entry_off = RoundUp8(key_area);
  const EntryLayout entry = LayOutEntry(plan);
  int raw_record_off = entry_off + entry.size;
  // The string values the query's state reads copy out, then the string buffers.
  int state_strs = 0;
  for (const Expr* r : plan.state_reads)
    if (r->type.kind == TypeKind::kString)
      state_strs += plan.states[static_cast<size_t>(r->state)]->value_size - 8;
  int str_base = raw_record_off + kRawRecordSize + kRawRegsCopySize + state_strs;
  // Every offset into scratch is a 16-bit displacement, and a map value has its limits too.
  if (str_base + kStrBufSize * kStrBufs > 32000)
    return Error(Code::kUnsupported,
                 fmt::format("the query needs {} bytes of scratch in the probe, more than it "
                             "has: read fewer or narrower remembered strings",
                             str_base + kStrBufSize * kStrBufs));
  q.scratch_entry_off = entry_off;
  set(kMapStats, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_stats", 4, 8 * kStatCount, 1);
  set(kMapScratch, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_scratch", 4, str_base + kStrBufSize * kStrBufs,
      1);
  if (plan.mode == PlanMode::kAggregate) {
    set(kMapAggA, BPF_MAP_TYPE_PERCPU_HASH, "fay_agg_a", plan.key_size, plan.value_size,
        plan.max_keys);
    // Preallocating every key's per-CPU states was most of fay's start-up; keys are inserted
    // rarely (the per-CPU cache absorbs the updates), so allocate them as they come.
    q.maps[kMapAggA].flags = BPF_F_NO_PREALLOC;
    set(kMapZero, BPF_MAP_TYPE_ARRAY, "fay_zero", 4, plan.value_size, 1);
    if (plan.every_ns) {
      set(kMapAggB, BPF_MAP_TYPE_PERCPU_HASH, "fay_agg_b", plan.key_size, plan.value_size,
          plan.max_keys);
      q.maps[kMapAggB].flags = BPF_F_NO_PREALLOC;
      set(kMapControl, BPF_MAP_TYPE_ARRAY, "fay_control", 4, 8, 1);
    }
  } else {
    set(kMapRing, BPF_MAP_TYPE_RINGBUF, "fay_events", 0, 0, kRingBytes);
  }
  if (plan.needs_exit) {
    // Calls in flight at once, machine-wide; fewer when each keeps strings (8 MiB at most).
    uint32_t entries = std::clamp<uint32_t>((8u << 20) / entry.size, 8192, 65536);
    set(kMapEntry, BPF_MAP_TYPE_LRU_HASH, "fay_entry", 16, entry.size, entries);
  }
  if (options.scoped) {
    set(kMapScope, BPF_MAP_TYPE_HASH, "fay_scope", 4, 1, 65536);
    q.maps[kMapScope].flags = BPF_F_NO_PREALLOC;
    set(kMapScopeGen, BPF_MAP_TYPE_ARRAY, "fay_scope_gen", 4, 8, 1);
    set(kMapScopeCache, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_scope_cache", 4, 24, 1);
  }
  q.counts_matched = CountsMatched(plan);
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const Plan& sp = *plan.states[i];
    set(static_cast<MapId>(kMapState0 + i),
        sp.remember_ttl_ns ? BPF_MAP_TYPE_LRU_HASH : BPF_MAP_TYPE_HASH,
        fmt::format("fay_state_{}", i).c_str(), static_cast<uint32_t>(sp.key_size),
        static_cast<uint32_t>(sp.value_size), plan.max_keys);
    if (sp.use_raw_syscalls)
      set(static_cast<MapId>(kMapStateSysFilter0 + i), BPF_MAP_TYPE_ARRAY,
          fmt::format("fay_state_sys_{}", i).c_str(), 4, 4, kMaxSyscalls);
  }
  // Small keys and states go through the per-CPU cache; big ones (histograms, sketches)
  // would make it too large to be worth it.
  int cache_entry = 8 + plan.key_size + plan.value_size;
  q.uses_cache = plan.mode == PlanMode::kAggregate && cache_entry <= kCacheMaxEntry;
  if (q.uses_cache) {
    set(kMapCacheA, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_cache_a", 4, cache_entry, kCacheSlots);
    if (plan.every_ns)
      set(kMapCacheB, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_cache_b", 4, cache_entry, kCacheSlots);
  }
  for (size_t i = 0; i < plan.tables.size(); ++i) {
    const Plan& t = *plan.tables[i];
    const int n = static_cast<int>(i) + 1;
    auto name = [&](const char* what) { return fmt::format("fay_t{}_{}", n, what); };
    auto tset = [&](int base, bpf_map_type type, const char* what, uint32_t k, uint32_t v,
                    uint32_t entries, uint32_t flags) {
      q.maps[TableMap(base, n)] = MapDesc{true, type, name(what), k, v, entries, flags};
    };
    tset(kMapAggA, BPF_MAP_TYPE_PERCPU_HASH, "agg_a", t.key_size, t.value_size, plan.max_keys,
         BPF_F_NO_PREALLOC);
    tset(kMapZero, BPF_MAP_TYPE_ARRAY, "zero", 4, t.value_size, 1, 0);
    if (plan.every_ns)
      tset(kMapAggB, BPF_MAP_TYPE_PERCPU_HASH, "agg_b", t.key_size, t.value_size, plan.max_keys,
           BPF_F_NO_PREALLOC);
    const int entry = 8 + t.key_size + t.value_size;
    q.table_caches.push_back(entry <= kCacheMaxEntry);
    if (entry <= kCacheMaxEntry) {
      tset(kMapCacheA, BPF_MAP_TYPE_PERCPU_ARRAY, "cache_a", 4, entry, kCacheSlots, 0);
      if (plan.every_ns)
        tset(kMapCacheB, BPF_MAP_TYPE_PERCPU_ARRAY, "cache_b", 4, entry, kCacheSlots, 0);
    }
  }
  if (plan.use_raw_syscalls)
    set(kMapSysFilter, BPF_MAP_TYPE_ARRAY, "fay_sysfilter", 4, 4, kMaxSyscalls);
  if (HasStackKeys(plan))
    set(kMapStacks, BPF_MAP_TYPE_STACK_TRACE, "fay_stacks", 4, 127 * 8, 16384);

  std::vector<Attachment> attachments = plan.attachments;
  if (options.scoped) {
    // Raw tracepoints where BTF gives the task's pid offset: no trace record is built, and no
    // tracefs is read, which an unprivileged fay with capabilities cannot (tracefs is 0700).
    const AttachKind scope = RawScope(options) ? AttachKind::kRawSyscalls : AttachKind::kTracepoint;
    attachments.push_back({scope, ProgRole::kScopeFork, -1, false, "sched", "sched_process_fork"});
    attachments.push_back({scope, ProgRole::kScopeFree, -1, false, "sched", "sched_process_free"});
    if (options.held_command)
      attachments.push_back({AttachKind::kRawSyscalls, ProgRole::kScopeStart, -1, false,
                             "raw_syscalls", "sys_enter"});
  }
  int n = 0;
  for (const auto& a : attachments) {
    FAY_ASSIGN_OR_RETURN(auto prog, GenProgram(plan, options, a, entry_off, raw_record_off,
                                               str_base, n++, q.uses_cache, q.table_caches));
    q.programs.push_back(std::move(prog));
  }
  // The state pipelines' programs, each generated against its own plan's probes.
  for (const auto& sp : plan.states) {
    for (const auto& a : sp->attachments) {
      FAY_ASSIGN_OR_RETURN(auto prog, GenProgram(*sp, options, a, entry_off, raw_record_off,
                                                 str_base, n++, false, {}));
      q.programs.push_back(std::move(prog));
    }
  }
  return q;
}

}  // namespace fay::bpf
