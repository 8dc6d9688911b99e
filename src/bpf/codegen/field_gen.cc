// Loading probe fields: helpers for the common fields, the record for tracepoint fields, the
// entry copy for syscall arguments seen at exit, and pt_regs for uprobes.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "bpf/codegen/gen_context.h"

namespace fay::bpf {
namespace {

// struct pt_regs offsets on x86-64, for the System V argument registers and rax.
constexpr int16_t kRegsArgOff[6] = {112, 104, 96, 88, 72, 64};  // di si dx cx r8 r9
constexpr int16_t kRegsAxOff = 80;
constexpr int16_t kSysExitRetOff = 16;  // `long ret` in sys_exit_* and raw_syscalls:sys_exit

const Field& FieldOf(const Gen& g, const Expr& expr, int probe) {
  return g.plan.probes[probe].fields[expr.field_index[probe]];
}

// Two probes read a field the same way when every fact the loads below depend on agrees.
bool SameLayout(const Field& a, const Field& b, const ProbeInfo& pa, const ProbeInfo& pb) {
  return a.source == b.source && a.offset == b.offset && a.size == b.size && a.index == b.index &&
         a.c_type == b.c_type && a.type == b.type && pa.kind == pb.kind && a.hops == b.hops &&
         a.leaf_size == b.leaf_size;
}

// Narrow loads zero-extend; signed narrow fields need their sign back.
void SignExtend(Gen& g, Reg r, int size) {
  if (size >= 8) return;
  int shift = 64 - size * 8;
  g.e.AluImm(BPF_LSH, r, shift);
  g.e.AluImm(BPF_ARSH, r, shift);
}

void LoadProbeIndex(Gen& g, Reg dst) {
  if (g.static_probe() >= 0)
    g.e.MovImm(dst, g.static_probe());
  else
    g.e.Load(8, dst, R10, kFpProbe);
}

}  // namespace

namespace {

void GenFieldOf(Gen& g, const Field& f, int probe);

// A BTF-typed field (kTaskBtf, kUserBtf, kKernelPtrBtf): R7 = the address of its leaf, after
// following each pointer on the way, or 0 when one of them is NULL or unreadable (the read errors
// count it). The reads go through the kernel's or the user's memory helpers, as the field's root
// says.
void GenBtfAddress(Gen& g, const Field& f, int probe) {
  Emitter& e = g.e;
  if (f.source == FieldSource::kTaskBtf) {
    e.Call(BPF_FUNC_get_current_task);
    e.Mov(R7, R0);
  } else {
    Field base = f;  // the argument that points at the struct, loaded as the record has it
    base.source = FieldSource::kCtx;
    base.type = Type::Int(false);
    base.c_type.clear();
    GenFieldOf(g, base, probe);
  }
  const int helper =
      f.source == FieldSource::kTaskBtf ? BPF_FUNC_probe_read_kernel : BPF_FUNC_probe_read_user;
  const int16_t tmp = g.AllocTemp();
  Label null = e.NewLabel(), done = e.NewLabel();
  for (size_t i = 0; i + 1 < f.hops.size(); ++i) {
    e.JmpIfImm(BPF_JEQ, R7, 0, null);
    e.Mov(R3, R7);
    e.AluImm(BPF_ADD, R3, static_cast<int32_t>(f.hops[i]));
    e.Mov(R1, R10);
    e.AluImm(BPF_ADD, R1, tmp);
    e.MovImm(R2, 8);
    e.Call(helper);
    e.JmpIfImm(BPF_JNE, R0, 0, null);
    e.Load(8, R7, R10, tmp);
  }
  e.JmpIfImm(BPF_JEQ, R7, 0, null);
  e.AluImm(BPF_ADD, R7, static_cast<int32_t>(f.hops.back()));
  e.Jmp(done);
  e.Bind(null);
  e.MovImm(R7, 0);
  e.Bind(done);
  g.FreeTemp();
}

void GenFieldOf(Gen& g, const Field& f, int probe) {
  Emitter& e = g.e;
  e.Comment(f.name);
  switch (f.source) {
    case FieldSource::kTime:
      e.Call(BPF_FUNC_ktime_get_ns);
      e.Mov(R7, R0);
      return;
    case FieldSource::kCpu:
      e.Call(BPF_FUNC_get_smp_processor_id);
      e.Mov(R7, R0);
      return;
    case FieldSource::kPid:
      if (g.task_ptr) {
        e.Load(8, R7, R10, kFpTask);
        e.Load(4, R7, R7, static_cast<int16_t>(g.options.task_tgid_offset));
        return;
      }
      e.Call(BPF_FUNC_get_current_pid_tgid);
      e.Mov(R7, R0);
      e.AluImm(BPF_RSH, R7, 32);
      return;
    case FieldSource::kTid:
      if (g.task_ptr) {
        e.Load(8, R7, R10, kFpTask);
        e.Load(4, R7, R7, static_cast<int16_t>(g.options.task_pid_offset));
        return;
      }
      [[fallthrough]];
    case FieldSource::kUid:
      e.Call(f.source == FieldSource::kTid ? BPF_FUNC_get_current_pid_tgid
                                           : BPF_FUNC_get_current_uid_gid);
      e.Mov(R7, R0);
      e.AluImm(BPF_LSH, R7, 32);
      e.AluImm(BPF_RSH, R7, 32);
      return;
    case FieldSource::kProbe:
    case FieldSource::kFunc:
      LoadProbeIndex(g, R7);
      return;
    case FieldSource::kCtx:
      if (g.has_entry && g.plan.probes[probe].kind == ProbeKind::kSyscall) {
        e.Load(8, R7, R9, static_cast<int16_t>(g.entry_off + 8 + 8 * f.index));
      } else {
        e.Load(f.size, R7, R6, static_cast<int16_t>(f.offset));
        if (f.type.is_signed) SignExtend(g, R7, f.size);
      }
      // Syscall arguments are stored as longs; an `int` argument keeps only its low half.
      if (f.c_type == "int" || f.c_type == "pid_t" || f.c_type == "unsigned int" ||
          f.c_type == "uid_t" || f.c_type == "gid_t" || f.c_type == "u32") {
        if (f.size == 8) {
          e.AluImm(BPF_LSH, R7, 32);
          e.AluImm(f.type.is_signed ? BPF_ARSH : BPF_RSH, R7, 32);
        }
      }
      return;
    case FieldSource::kRet:
      e.Load(8, R7, R6, kSysExitRetOff);
      return;
    case FieldSource::kErrno: {
      // errno = -ret for ret in [-4095, -1], else 0.
      Label zero = e.NewLabel(), done = e.NewLabel();
      e.Load(8, R7, R6, kSysExitRetOff);
      e.JmpIfImm(BPF_JSGE, R7, 0, zero);
      e.JmpIfImm(BPF_JSLT, R7, -4095, zero);
      e.AluImm(BPF_NEG, R7, 0);
      e.Jmp(done);
      e.Bind(zero);
      e.MovImm(R7, 0);
      e.Bind(done);
      return;
    }
    case FieldSource::kLatency:
      if (!g.has_entry) {
        g.Fail("latency needs both the entry and the exit of " + g.plan.probes[probe].name);
        return;
      }
      e.Call(BPF_FUNC_ktime_get_ns);
      e.Mov(R7, R0);
      e.Load(8, R1, R9, static_cast<int16_t>(g.entry_off));
      e.Alu(BPF_SUB, R7, R1);
      return;
    case FieldSource::kUprobeArg:
      if (g.has_entry) {
        e.Load(8, R7, R9, static_cast<int16_t>(g.entry_off + 8 + 8 * f.index));
      } else {
        e.Load(8, R7, R6, kRegsArgOff[f.index % 6]);
      }
      return;
    case FieldSource::kUprobeRet:
      e.Load(8, R7, R6, kRegsAxOff);
      return;
    case FieldSource::kKernelStack:
    case FieldSource::kUserStack:
      if (g.raw_ctx)
        e.Load(8, R1, R10, kFpCtx);
      else
        e.Mov(R1, R6);
      e.LdMap(R2, kMapStacks);
      e.MovImm(R3, f.source == FieldSource::kUserStack ? BPF_F_USER_STACK : 0);
      e.Call(BPF_FUNC_get_stackid);
      if (f.source == FieldSource::kKernelStack) {
        // The kernel's frames belong to no process: the key is the stack id alone.
        e.Mov(R7, R0);
      } else {
        // The key is (tgid << 32) | stack id, so user space knows whose address space the
        // frames belong to when it names them; a negative id (no stack) stays as it is.
        Label done = e.NewLabel();
        e.Mov(R7, R0);
        e.JmpIfImm(BPF_JSLT, R7, 0, done);
        e.Call(BPF_FUNC_get_current_pid_tgid);
        e.AluImm(BPF_RSH, R0, 32);
        e.AluImm(BPF_LSH, R0, 32);
        e.Alu(BPF_OR, R7, R0);
        e.Bind(done);
      }
      return;
    case FieldSource::kTaskBtf:
    case FieldSource::kUserBtf:
    case FieldSource::kKernelPtrBtf: {
      GenBtfAddress(g, f, probe);
      const int16_t tmp = g.AllocTemp();
      Label done = e.NewLabel(), failed = e.NewLabel();
      e.StoreImm(8, R10, tmp, 0);  // a narrow leaf fills the low bytes; the rest stay 0
      e.JmpIfImm(BPF_JEQ, R7, 0, failed);
      e.Mov(R3, R7);
      e.Mov(R1, R10);
      e.AluImm(BPF_ADD, R1, tmp);
      e.MovImm(R2, f.leaf_size);
      e.Call(f.source == FieldSource::kUserBtf ? BPF_FUNC_probe_read_user
                                               : BPF_FUNC_probe_read_kernel);
      e.JmpIfImm(BPF_JEQ, R0, 0, done);
      e.Bind(failed);
      GenBumpStat(g, kStatReadErrors);
      e.StoreImm(8, R10, tmp, 0);
      e.Bind(done);
      e.Load(8, R7, R10, tmp);
      if (f.type.is_signed) SignExtend(g, R7, f.leaf_size);
      g.FreeTemp();
      return;
    }
    case FieldSource::kComm:
    case FieldSource::kDataLoc:
      g.Fail(fmt::format("internal: string field {} used as an integer", f.name));
      return;
    case FieldSource::kBytes:
    case FieldSource::kPath:
    case FieldSource::kTrace:
    case FieldSource::kHost:
      // Only trace-file probes publish these; a live probe never resolves them.
      g.Fail(fmt::format("internal: field {} exists only in recorded traces", f.name));
      return;
  }
}

void GenStringFieldOf(Gen& g, const Field& f, int probe, int off, int cap) {
  Emitter& e = g.e;
  e.Comment(f.name);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, off);
  switch (f.source) {
    case FieldSource::kComm:
      if (g.task_ptr && cap >= 16) {
        e.Load(8, R2, R10, kFpTask);
        for (int w = 0; w < 2; ++w) {
          e.Load(8, R1, R2, static_cast<int16_t>(g.options.task_comm_offset + 8 * w));
          e.Store(8, R9, static_cast<int16_t>(off + 8 * w), R1);
        }
        return;
      }
      if (g.options.task_comm_offset >= 0 && cap >= 16) {
        // task->comm is NUL-padded by the kernel, so two word loads give a canonical key.
        e.Call(BPF_FUNC_get_current_task_btf);
        for (int w = 0; w < 2; ++w) {
          e.Load(8, R1, R0, static_cast<int16_t>(g.options.task_comm_offset + 8 * w));
          e.Store(8, R9, static_cast<int16_t>(off + 8 * w), R1);
        }
        return;
      }
      e.MovImm(R2, std::min(cap, 16));
      e.Call(BPF_FUNC_get_current_comm);
      return;
    case FieldSource::kCtx:
      // A char[N] array inside the record.
      e.MovImm(R2, std::min(cap, f.size));
      e.Mov(R3, R6);
      e.AluImm(BPF_ADD, R3, f.offset);
      e.Call(BPF_FUNC_probe_read_kernel_str);
      return;
    case FieldSource::kTaskBtf:
    case FieldSource::kUserBtf:
    case FieldSource::kKernelPtrBtf: {
      // A char array: read as a string, NUL-terminated within the buffer.
      GenBtfAddress(g, f, probe);
      Label done = e.NewLabel(), failed = e.NewLabel();
      e.JmpIfImm(BPF_JEQ, R7, 0, failed);
      e.Mov(R1, R9);
      e.AluImm(BPF_ADD, R1, off);
      e.MovImm(R2, std::min(cap, f.leaf_size));
      e.Mov(R3, R7);
      e.Call(f.source == FieldSource::kUserBtf ? BPF_FUNC_probe_read_user_str
                                               : BPF_FUNC_probe_read_kernel_str);
      e.JmpIfImm(BPF_JSGE, R0, 0, done);
      // A NULL pointer on the way, or an unreadable string: "" (never the last event's
      // bytes), counted.
      e.Bind(failed);
      e.StoreImm(1, R9, static_cast<int16_t>(off), 0);
      GenBumpStat(g, kStatReadErrors);
      e.Bind(done);
      return;
    }
    case FieldSource::kDataLoc:
      // The u32 descriptor holds the string's offset in its low half and length in its high.
      e.Load(4, R3, R6, static_cast<int16_t>(f.offset));
      e.AluImm(BPF_AND, R3, 0xffff);
      e.Alu(BPF_ADD, R3, R6);
      e.MovImm(R2, cap);
      e.Call(BPF_FUNC_probe_read_kernel_str);
      return;
    default:
      g.Fail(fmt::format("internal: field {} is not a string", f.name));
  }
}

}  // namespace

std::vector<int> ProgramProbes(const Gen& g) {
  if (g.static_probe() >= 0) return {g.static_probe()};
  if (!g.attach.probes.empty()) return g.attach.probes;
  std::vector<int> out;
  for (size_t i = 0; i < g.plan.probes.size(); ++i)
    if (g.plan.probes[i].kind == ProbeKind::kSyscall) out.push_back(static_cast<int>(i));
  if (out.empty()) out.push_back(0);
  return out;
}

void GenPerProbe(Gen& g, const Expr& expr, const std::function<void(const Field&, int)>& body) {
  // One group per distinct way of reading the field, each with the probes that read it so.
  std::vector<std::vector<int>> groups;
  for (int p : ProgramProbes(g)) {
    const Field& f = FieldOf(g, expr, p);
    auto same = [&](const std::vector<int>& grp) {
      return SameLayout(FieldOf(g, expr, grp[0]), f, g.plan.probes[grp[0]], g.plan.probes[p]);
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end())
      groups.push_back({p});
    else
      it->push_back(p);
  }
  if (groups.size() == 1) {
    body(FieldOf(g, expr, groups[0][0]), groups[0][0]);
    return;
  }
  // A program shared by probes that place the field differently (openat's filename is its
  // second argument, open's its first): pick the load by the probe index at run time.
  Emitter& e = g.e;
  e.Comment(fmt::format("{}: {} layouts across the probes; dispatch on the probe", expr.text,
                        groups.size()));
  Label done = e.NewLabel();
  std::vector<Label> starts;
  e.Load(8, R1, R10, kFpProbe);
  for (size_t i = 1; i < groups.size(); ++i) {
    starts.push_back(e.NewLabel());
    for (int p : groups[i]) e.JmpIfImm(BPF_JEQ, R1, p, starts.back());
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) e.Bind(starts[i - 1]);
    body(FieldOf(g, expr, groups[i][0]), groups[i][0]);
    if (i + 1 < groups.size()) e.Jmp(done);
  }
  e.Bind(done);
}

void GenField(Gen& g, const Expr& expr) {
  GenPerProbe(g, expr, [&](const Field& f, int probe) { GenFieldOf(g, f, probe); });
}

// The name of a probe (`probe`, or a uprobe's `func`) as a string: known per probe when the
// program is generated, so it is stored as a literal, chosen by the probe index in a shared
// program. Keys and comparisons with literals use the index instead; this is for the rest
// (distinct(probe), probe == comm).
void GenNameString(Gen& g, const Expr& expr, int off, int cap) {
  Emitter& e = g.e;
  std::vector<int> probes = ProgramProbes(g);
  auto store = [&](int p) {
    const ProbeInfo& info = g.plan.probes[p];
    std::string name = expr.name == "func" ? info.symbol : info.name;
    name = name.substr(0, static_cast<size_t>(cap - 1));
    for (size_t i = 0; i <= name.size(); ++i)
      e.StoreImm(1, R9, static_cast<int16_t>(off + i),
                 i < name.size() ? static_cast<unsigned char>(name[i]) : 0);
  };
  e.Comment(expr.name + " as a string");
  if (probes.size() == 1) {
    store(probes[0]);
    return;
  }
  Label done = e.NewLabel();
  std::vector<Label> at;
  e.Load(8, R1, R10, kFpProbe);
  for (size_t i = 1; i < probes.size(); ++i) {
    at.push_back(e.NewLabel());
    e.JmpIfImm(BPF_JEQ, R1, probes[i], at.back());
  }
  for (size_t i = 0; i < probes.size(); ++i) {
    if (i > 0) e.Bind(at[i - 1]);
    store(probes[i]);
    if (i + 1 < probes.size()) e.Jmp(done);
  }
  e.Bind(done);
}

void GenStringField(Gen& g, const Expr& expr, int off, int cap) {
  FieldSource src = FieldOf(g, expr, ProgramProbes(g)[0]).source;
  if (src == FieldSource::kProbe || src == FieldSource::kFunc) {
    GenNameString(g, expr, off, cap);
    return;
  }
  GenPerProbe(g, expr, [&](const Field& f, int p) { GenStringFieldOf(g, f, p, off, cap); });
}

}  // namespace fay::bpf
