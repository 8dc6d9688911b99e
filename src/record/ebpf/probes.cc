#include "record/ebpf/probes.h"

#include <linux/bpf.h>

#include <algorithm>

#include "bpf/emitter.h"
#include "record/ebpf/capture_spec.h"
#include "schema/syscall_capture.h"
#include "schema/syscall_event.h"

namespace fay::record::ebpf {
namespace {

using bpf::Emitter;
using bpf::Label;
using namespace bpf;  // registers

// Stack slots.
constexpr int16_t kFpTid = -8, kFpTgid = -16, kFpNr = -24, kFpZero = -32, kFpTmp = -40,
                  kFpVal = -48;

// Scratch value layout.
constexpr int16_t kScrRec = 0;  // WireSyscall
constexpr int16_t kScrEntry =
    128;                           // entry_ns, nr, args[6] (+16 spare so args[len_arg & 7] is safe)
constexpr int16_t kScrRegs = 208;  // pt_regs r10..di (72 bytes)
constexpr int16_t kVAddr = 288, kVWant = 296, kVOff = 304, kVRet = 312;
constexpr int16_t kScrFrag = 384;  // WireFragHeader + data; also WireProc
constexpr int16_t kScrData = kScrFrag + 56;
static_assert(kScrData + kMaxCapturedString + 2 <= kScratchSize);
static_assert(kScrFrag + 288 <= kScratchSize);
constexpr int kEntrySize = 64;

struct Gen {
  Emitter e;
  const ProbeOptions& o;
  Label exit_label;
  explicit Gen(const ProbeOptions& opt) : o(opt) { exit_label = e.NewLabel(); }

  void Lookup(int map, int16_t fp_key) {
    e.LdMap(R1, map);
    e.Mov(R2, R10);
    e.AluImm(BPF_ADD, R2, fp_key);
    e.Call(BPF_FUNC_map_lookup_elem);
  }
  void Delete(int map, int16_t fp_key) {
    e.LdMap(R1, map);
    e.Mov(R2, R10);
    e.AluImm(BPF_ADD, R2, fp_key);
    e.Call(BPF_FUNC_map_delete_elem);
  }
  // fp-8 = tid, fp-16 = tgid (both u32 in a zeroed u64 slot), fp-32 = 0.
  void Ids() {
    e.Call(BPF_FUNC_get_current_pid_tgid);
    e.StoreImm(8, R10, kFpTid, 0);
    e.StoreImm(8, R10, kFpTgid, 0);
    e.StoreImm(8, R10, kFpZero, 0);
    e.Store(4, R10, kFpTid, R0);
    e.AluImm(BPF_RSH, R0, 32);
    e.Store(4, R10, kFpTgid, R0);
  }
  // R9 = per-CPU scratch.
  void Scratch() {
    Lookup(kMapScratch, kFpZero);
    e.JmpIfImm(BPF_JEQ, R0, 0, exit_label);
    e.Mov(R9, R0);
  }
  // Counts a failed ring-buffer output (R0 < 0) in stats word `slot`.
  void CountLost(int slot) {
    Label ok = e.NewLabel();
    e.JmpIfImm(BPF_JSGE, R0, 0, ok);
    Lookup(kMapStats, kFpZero);
    e.JmpIfImm(BPF_JEQ, R0, 0, ok);
    e.MovImm(R1, 1);
    e.AtomicAdd64(R0, static_cast<int16_t>(8 * slot), R1);
    e.Bind(ok);
  }
  // ringbuf_output(scratch + off, size in R3 already set).
  void OutputR3(int16_t off) {
    e.LdMap(R1, kMapRing);
    e.Mov(R2, R9);
    e.AluImm(BPF_ADD, R2, off);
    e.MovImm(R4, 0);
    e.Call(BPF_FUNC_ringbuf_output);
  }
  void Output(int16_t off, int32_t size) {
    e.MovImm(R3, size);
    OutputR3(off);
  }
  void Finish(ProgramSpec* spec, bpf_prog_type type, const char* name, Status* st) {
    e.Bind(exit_label);
    e.MovImm(R0, 0);
    e.Exit();
    auto insns = e.Finish();
    if (!insns.ok()) {
      *st = insns.status();
      return;
    }
    spec->type = type;
    spec->name = name;
    spec->insns = std::move(insns).value();
    spec->relocs = e.relocs();
  }
};

uint64_t Cap(const ProbeOptions& o) {
  return o.max_buffer ? std::min<uint64_t>(o.max_buffer, kMaxBufferBytes) : kMaxBufferBytes;
}

// One capture rule (slot `i` of the phase at spec offset `base`). R8 = spec, R9 = scratch; the
// fragment header's type, tid, seq and dir are already set.
void GenRule(Gen& g, int16_t base, int i) {
  Emitter& e = g.e;
  const int16_t rb = static_cast<int16_t>(base + 16 * i);
  Label next = e.NewLabel(), str = e.NewLabel(), have = e.NewLabel(), loop = e.NewLabel(),
        tail = e.NewLabel(), fail = e.NewLabel();
  e.Comment("capture rule " + std::to_string(i));
  e.Load(1, R1, R8, rb + 0);
  e.JmpIfImm(BPF_JEQ, R1, kRuleNone, next);
  // addr = args[arg]
  e.Load(1, R2, R8, rb + 1);
  e.Store(1, R9, kScrFrag + 16, R2);
  e.AluImm(BPF_AND, R2, 7);
  e.AluImm(BPF_LSH, R2, 3);
  e.Mov(R3, R9);
  e.Alu(BPF_ADD, R3, R2);
  e.Load(8, R3, R3, kScrEntry + 16);
  e.JmpIfImm(BPF_JEQ, R3, 0, next);
  e.Store(8, R9, kVAddr, R3);
  e.Store(8, R9, kScrFrag + 40, R3);
  e.StoreImm(8, R9, kScrFrag + 32, 0);
  e.JmpIfImm(BPF_JEQ, R1, kRuleString, str);

  // Byte range: compute its length into R4.
  Label not_fixed = e.NewLabel(), not_arg = e.NewLabel(), not_ret = e.NewLabel();
  e.Load(1, R2, R8, rb + 2);
  e.JmpIfImm(BPF_JNE, R2, kSrcFixed, not_fixed);
  e.Load(4, R4, R8, rb + 8);
  e.Jmp(have);
  e.Bind(not_fixed);
  // R3 = args[len_arg] (used by kSrcArg and kSrcArgPtr)
  e.Load(1, R1, R8, rb + 3);
  e.AluImm(BPF_AND, R1, 7);
  e.AluImm(BPF_LSH, R1, 3);
  e.Mov(R3, R9);
  e.Alu(BPF_ADD, R3, R1);
  e.Load(8, R3, R3, kScrEntry + 16);
  e.JmpIfImm(BPF_JNE, R2, kSrcArg, not_arg);
  e.Mov(R4, R3);
  e.Jmp(have);
  e.Bind(not_arg);
  e.JmpIfImm(BPF_JNE, R2, kSrcRet, not_ret);
  e.Load(8, R4, R9, kVRet);
  e.Jmp(have);
  e.Bind(not_ret);
  e.JmpIfImm(BPF_JEQ, R3, 0, next);
  e.StoreImm(8, R10, kFpTmp, 0);
  e.Mov(R1, R10);
  e.AluImm(BPF_ADD, R1, kFpTmp);
  e.MovImm(R2, 4);
  e.Call(BPF_FUNC_probe_read_user);
  e.JmpIfImm(BPF_JNE, R0, 0, next);
  e.Load(4, R4, R10, kFpTmp);
  e.Bind(have);
  {
    Label no_u32 = e.NewLabel(), no_bits = e.NewLabel(), small = e.NewLabel(),
          no_max = e.NewLabel(), nonzero = e.NewLabel();
    e.Load(1, R5, R8, rb + 4);
    e.Mov(R1, R5);
    e.AluImm(BPF_AND, R1, kRuleU32);
    e.JmpIfImm(BPF_JEQ, R1, 0, no_u32);
    e.AluImm(BPF_LSH, R4, 32);
    e.AluImm(BPF_RSH, R4, 32);
    e.Bind(no_u32);
    e.Mov(R1, R5);
    e.AluImm(BPF_AND, R1, kRuleFdSetBits);
    e.JmpIfImm(BPF_JEQ, R1, 0, no_bits);
    e.JmpIfImm(BPF_JLE, R4, 1 << 20, small);
    e.MovImm(R4, 1 << 20);
    e.Bind(small);
    e.AluImm(BPF_ADD, R4, 63);
    e.AluImm(BPF_RSH, R4, 6);
    e.AluImm(BPF_LSH, R4, 3);
    e.Bind(no_bits);
    e.Load(4, R1, R8, rb + 12);
    e.JmpIfImm(BPF_JEQ, R1, 0, no_max);
    e.JmpIf(BPF_JLE, R4, R1, no_max);
    e.Mov(R4, R1);
    e.Bind(no_max);
    e.Load(1, R1, R8, rb + 5);
    e.Alu(BPF_MUL, R4, R1);
    e.JmpIfImm(BPF_JNE, R4, 0, nonzero);
    e.AluImm(BPF_AND, R5, kRuleSkipZero);
    e.JmpIfImm(BPF_JNE, R5, 0, next);
    e.Bind(nonzero);
  }
  e.Store(8, R9, kScrFrag + 24, R4);
  {
    Label capped = e.NewLabel();
    e.LdImm64(R1, Cap(g.o));
    e.JmpIf(BPF_JLE, R4, R1, capped);
    e.Mov(R4, R1);
    e.Bind(capped);
  }
  e.Store(8, R9, kVWant, R4);
  e.StoreImm(8, R9, kVOff, 0);
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  e.MovImm(R7, 0);
  // Whole fragments while more than one is left; the verifier walks this kMaxFragments times.
  e.Bind(loop);
  e.Load(8, R1, R9, kVWant);
  e.Load(8, R2, R9, kVOff);
  e.Alu(BPF_SUB, R1, R2);
  e.JmpIfImm(BPF_JLE, R1, kFragBytes, tail);
  e.JmpIfImm(BPF_JGE, R7, kMaxFragments, next);
  e.AluImm(BPF_ADD, R7, 1);
  e.StoreImm(4, R9, kScrFrag + 48, kFragBytes);
  e.Store(8, R9, kScrFrag + 32, R2);
  e.Load(8, R3, R9, kVAddr);
  e.Alu(BPF_ADD, R3, R2);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrData);
  e.MovImm(R2, kFragBytes);
  e.Call(BPF_FUNC_probe_read_user);
  e.JmpIfImm(BPF_JNE, R0, 0, fail);
  g.Output(kScrFrag, 56 + kFragBytes);
  g.CountLost(1);
  e.Load(8, R1, R9, kVOff);
  e.AluImm(BPF_ADD, R1, kFragBytes);
  e.Store(8, R9, kVOff, R1);
  e.Jmp(loop);
  // The last, partial fragment (possibly empty).
  e.Bind(tail);
  e.Mov(R7, R1);
  e.Store(4, R9, kScrFrag + 48, R7);
  e.Store(8, R9, kScrFrag + 32, R2);
  e.Load(8, R3, R9, kVAddr);
  e.Alu(BPF_ADD, R3, R2);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrData);
  e.Mov(R2, R7);
  e.Call(BPF_FUNC_probe_read_user);
  e.JmpIfImm(BPF_JNE, R0, 0, fail);
  e.Mov(R3, R7);
  e.AluImm(BPF_ADD, R3, 56);
  g.OutputR3(kScrFrag);
  g.CountLost(1);
  e.Jmp(next);
  e.Bind(fail);
  e.StoreImm(4, R9, kScrFrag + 48, 0);
  g.Output(kScrFrag, 56);
  g.CountLost(1);
  e.Jmp(next);

  // NUL-terminated string: up to 4096 bytes; 4098 read so "exactly 4096" and "longer" differ.
  e.Bind(str);
  {
    Label ok = e.NewLabel(), s1 = e.NewLabel(), s2 = e.NewLabel();
    e.Mov(R1, R9);
    e.AluImm(BPF_ADD, R1, kScrData);
    e.MovImm(R2, kMaxCapturedString + 2);
    e.Call(BPF_FUNC_probe_read_user_str);
    e.JmpIfImm(BPF_JSGT, R0, 0, ok);
    e.StoreImm(4, R9, kScrFrag + 20, kFragExplicit | kFragNotCaptured);
    e.StoreImm(8, R9, kScrFrag + 24, 0);
    e.StoreImm(4, R9, kScrFrag + 48, 0);
    g.Output(kScrFrag, 56);
    g.CountLost(1);
    e.Jmp(next);
    e.Bind(ok);
    e.Mov(R7, R0);
    e.AluImm(BPF_SUB, R7, 1);
    e.StoreImm(4, R9, kScrFrag + 20, kFragExplicit);
    e.JmpIfImm(BPF_JLE, R7, kMaxCapturedString, s1);
    e.MovImm(R7, kMaxCapturedString);
    e.StoreImm(4, R9, kScrFrag + 20, kFragExplicit | kFragTruncated);
    e.Bind(s1);
    e.Store(8, R9, kScrFrag + 24, R7);
    e.LdImm64(R1, Cap(g.o));
    e.JmpIf(BPF_JLE, R7, R1, s2);
    e.Mov(R7, R1);
    e.StoreImm(4, R9, kScrFrag + 20, kFragExplicit | kFragTruncated);
    e.Bind(s2);
    e.Store(4, R9, kScrFrag + 48, R7);
    e.Mov(R3, R7);
    e.AluImm(BPF_ADD, R3, 56);
    g.OutputR3(kScrFrag);
    g.CountLost(1);
  }
  e.Bind(next);
}

// Sets the fragment header's constant fields and runs the phase's six rules.
void GenPhase(Gen& g, bool at_exit) {
  Emitter& e = g.e;
  e.StoreImm(4, R9, kScrFrag + 0, kRecFrag);
  e.Load(4, R1, R10, kFpTid);
  e.Store(4, R9, kScrFrag + 4, R1);
  e.Load(8, R1, R9, kScrEntry + 0);
  e.Store(8, R9, kScrFrag + 8, R1);
  e.StoreImm(1, R9, kScrFrag + 17,
             static_cast<int32_t>(at_exit ? BufferDir::kOut : BufferDir::kIn));
  e.StoreImm(2, R9, kScrFrag + 18, 0);
  e.StoreImm(4, R9, kScrFrag + 52, 0);
  int16_t base = at_exit ? kSpecExitOff : kSpecEnterOff;
  for (int i = 0; i < kRulesPerPhase; ++i) GenRule(g, base, i);
}

// Fills the WireSyscall at kScrRec from the entry copy, the current task and R7 = exit time,
// and outputs it. `flags`: kEventNoExit for calls that never return.
void GenEmitSyscall(Gen& g, uint32_t flags) {
  Emitter& e = g.e;
  e.StoreImm(4, R9, kScrRec + 0, kRecSyscall);
  e.StoreImm(4, R9, kScrRec + 4, static_cast<int32_t>(flags));
  e.Load(4, R1, R10, kFpTgid);
  e.Store(4, R9, kScrRec + 8, R1);
  e.Load(4, R1, R10, kFpTid);
  e.Store(4, R9, kScrRec + 12, R1);
  e.Store(8, R9, kScrRec + 32, R7);
  for (int w = 0; w < 8; ++w) {  // entry_ns, nr, args[6]
    e.Load(8, R1, R9, static_cast<int16_t>(kScrEntry + 8 * w));
    e.Store(8, R9, static_cast<int16_t>((w == 0 ? kScrRec + 24 : kScrRec + 40 + 8 * (w - 1))), R1);
  }
  e.Load(8, R1, R9, kVRet);
  e.Store(8, R9, kScrRec + 96, R1);
  e.Call(BPF_FUNC_get_current_uid_gid);
  e.Store(4, R9, kScrRec + 20, R0);
  e.Call(BPF_FUNC_get_current_task_btf);
  e.Load(8, R1, R0, static_cast<int16_t>(g.o.task_comm));
  e.Store(8, R9, kScrRec + 104, R1);
  e.Load(8, R1, R0, static_cast<int16_t>(g.o.task_comm + 8));
  e.Store(8, R9, kScrRec + 112, R1);
  e.Load(8, R1, R0, static_cast<int16_t>(g.o.task_real_parent));
  e.Load(4, R1, R1, static_cast<int16_t>(g.o.task_tgid));
  e.Store(4, R9, kScrRec + 16, R1);
  g.Output(kScrRec, sizeof(WireSyscall));
  g.CountLost(0);
}

void GenSysEnter(Gen& g) {
  Emitter& e = g.e;
  Label ok = e.NewLabel();
  e.Mov(R6, R1);
  g.Ids();
  e.Comment("is this process traced?");
  g.Lookup(kMapTraced, kFpTgid);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(1, R1, R0, 0);
  e.Load(8, R2, R6, 8);
  e.JmpIfImm(BPF_JSLT, R2, 0, g.exit_label);
  e.JmpIfImm(BPF_JSGE, R2, kMaxNr, g.exit_label);
  e.StoreImm(8, R10, kFpNr, 0);
  e.Store(4, R10, kFpNr, R2);
  e.JmpIfImm(BPF_JEQ, R1, kActive, ok);
  e.Comment("held before exec: only the exec itself counts");
  e.JmpIfImm(BPF_JNE, R1, kPendingExec, g.exit_label);
  e.JmpIfImm(BPF_JEQ, R2, sysno::execve, ok);
  e.JmpIfImm(BPF_JNE, R2, sysno::execveat, g.exit_label);
  e.Bind(ok);
  g.Lookup(kMapSpec, kFpNr);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Mov(R8, R0);
  e.Load(4, R1, R8, 0);
  e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
  g.Scratch();
  e.Comment("arguments from pt_regs (r10..di)");
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrRegs);
  e.MovImm(R2, 72);
  e.Load(8, R3, R6, 0);
  e.AluImm(BPF_ADD, R3, 56);
  e.Call(BPF_FUNC_probe_read_kernel);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
  static constexpr int16_t kArgInCopy[6] = {56, 48, 40, 0, 16, 8};
  for (int i = 0; i < 6; ++i) {
    e.Load(8, R1, R9, static_cast<int16_t>(kScrRegs + kArgInCopy[i]));
    e.Store(8, R9, static_cast<int16_t>(kScrEntry + 16 + 8 * i), R1);
  }
  e.Load(4, R1, R10, kFpNr);
  e.Store(8, R9, kScrEntry + 8, R1);
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R9, kScrEntry + 0, R0);
  e.LdMap(R1, kMapEntry);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpTid);
  e.Mov(R3, R9);
  e.AluImm(BPF_ADD, R3, kScrEntry);
  e.MovImm(R4, BPF_ANY);
  e.Call(BPF_FUNC_map_update_elem);
  e.Comment("buffers going into the kernel");
  GenPhase(g, false);
}

void GenSysExit(Gen& g) {
  Emitter& e = g.e;
  Label emit = e.NewLabel();
  e.Mov(R6, R1);
  g.Ids();
  g.Lookup(kMapEntry, kFpTid);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Mov(R8, R0);
  g.Scratch();
  for (int w = 0; w < kEntrySize / 8; ++w) {
    e.Load(8, R1, R8, static_cast<int16_t>(8 * w));
    e.Store(8, R9, static_cast<int16_t>(kScrEntry + 8 * w), R1);
  }
  g.Delete(kMapEntry, kFpTid);
  e.Load(8, R1, R6, 8);
  e.Store(8, R9, kVRet, R1);
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R9, kScrRec + 32, R0);
  e.Load(8, R1, R9, kScrEntry + 8);
  e.StoreImm(8, R10, kFpNr, 0);
  e.Store(4, R10, kFpNr, R1);
  e.Load(8, R1, R9, kVRet);
  e.JmpIfImm(BPF_JSLT, R1, 0, emit);
  g.Lookup(kMapSpec, kFpNr);
  e.JmpIfImm(BPF_JEQ, R0, 0, emit);
  e.Mov(R8, R0);
  e.Comment("buffers coming out of the kernel");
  GenPhase(g, true);
  e.Bind(emit);
  e.Load(8, R7, R9, kScrRec + 32);
  GenEmitSyscall(g, 0);
}

// R1 = 1 when the current process is active-traced, else jumps out.
void GenRequireActive(Gen& g) {
  Emitter& e = g.e;
  g.Lookup(kMapTraced, kFpTgid);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(1, R1, R0, 0);
  e.JmpIfImm(BPF_JNE, R1, kActive, g.exit_label);
}

void GenProcHeader(Gen& g, RecType type) {
  Emitter& e = g.e;
  e.StoreImm(4, R9, kScrFrag + 0, static_cast<int32_t>(type));
  e.Load(4, R1, R10, kFpTgid);
  e.Store(4, R9, kScrFrag + 4, R1);
  e.Load(4, R1, R10, kFpTid);
  e.Store(4, R9, kScrFrag + 8, R1);
  e.StoreImm(4, R9, kScrFrag + 12, 0);
  e.StoreImm(8, R9, kScrFrag + 24, 0);
  e.StoreImm(1, R9, kScrFrag + 32, 0);
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R9, kScrFrag + 16, R0);
}

// raw sched_process_fork(parent, child): a traced process's child is traced from birth.
void GenFork(Gen& g) {
  Emitter& e = g.e;
  Label thread = e.NewLabel();
  e.Mov(R6, R1);
  g.Ids();
  GenRequireActive(g);
  g.Scratch();
  GenProcHeader(g, kRecFork);
  e.Load(4, R1, R10, kFpTgid);
  e.Store(4, R9, kScrFrag + 12, R1);
  e.Load(8, R3, R6, 8);
  e.AluImm(BPF_ADD, R3, g.o.task_tgid);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrFrag + 4);
  e.MovImm(R2, 4);
  e.Call(BPF_FUNC_probe_read_kernel);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
  e.Load(8, R3, R6, 8);
  e.AluImm(BPF_ADD, R3, g.o.task_pid);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrFrag + 8);
  e.MovImm(R2, 4);
  e.Call(BPF_FUNC_probe_read_kernel);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
  e.Load(4, R1, R9, kScrFrag + 4);
  e.Load(4, R2, R9, kScrFrag + 8);
  e.StoreImm(4, R9, kScrFrag + 28, 1);
  e.JmpIf(BPF_JNE, R1, R2, thread);
  e.StoreImm(4, R9, kScrFrag + 28, 0);
  e.StoreImm(8, R10, kFpTmp, 0);
  e.Store(4, R10, kFpTmp, R2);
  e.StoreImm(8, R10, kFpVal, kActive);
  e.LdMap(R1, kMapTraced);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpTmp);
  e.Mov(R3, R10);
  e.AluImm(BPF_ADD, R3, kFpVal);
  e.MovImm(R4, BPF_ANY);
  e.Call(BPF_FUNC_map_update_elem);
  e.Bind(thread);
  g.Output(kScrFrag, 32);
  g.CountLost(0);
}

// sched_process_exec: a held command starts being recorded; a traced one reports its exec.
void GenExec(Gen& g) {
  Emitter& e = g.e;
  Label go = e.NewLabel();
  e.Mov(R6, R1);
  g.Ids();
  g.Lookup(kMapTraced, kFpTgid);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(1, R1, R0, 0);
  e.JmpIfImm(BPF_JEQ, R1, kActive, go);
  e.JmpIfImm(BPF_JNE, R1, kPendingExec, g.exit_label);
  e.StoreImm(1, R0, 0, kActive);
  e.Bind(go);
  g.Scratch();
  GenProcHeader(g, kRecExec);
  e.Load(4, R3, R6, static_cast<int16_t>(g.o.exec_filename_off));
  e.AluImm(BPF_AND, R3, 0xffff);
  e.Alu(BPF_ADD, R3, R6);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrFrag + 32);
  e.MovImm(R2, 256);
  e.Call(BPF_FUNC_probe_read_kernel_str);
  g.Output(kScrFrag, sizeof(WireProc));
  g.CountLost(0);
}

// sched_process_exit: a call the thread never returns from, then the exit itself.
void GenExit(Gen& g) {
  Emitter& e = g.e;
  Label proc = e.NewLabel(), keep = e.NewLabel();
  e.Mov(R6, R1);
  g.Ids();
  GenRequireActive(g);
  g.Scratch();
  g.Lookup(kMapEntry, kFpTid);
  e.JmpIfImm(BPF_JEQ, R0, 0, proc);
  e.Mov(R8, R0);
  for (int w = 0; w < kEntrySize / 8; ++w) {
    e.Load(8, R1, R8, static_cast<int16_t>(8 * w));
    e.Store(8, R9, static_cast<int16_t>(kScrEntry + 8 * w), R1);
  }
  g.Delete(kMapEntry, kFpTid);
  e.StoreImm(8, R9, kVRet, 0);
  e.MovImm(R7, 0);
  GenEmitSyscall(g, kEventNoExit);
  e.Bind(proc);
  GenProcHeader(g, kRecExit);
  e.Call(BPF_FUNC_get_current_task_btf);
  e.Load(4, R1, R0, static_cast<int16_t>(g.o.task_exit_code));
  e.Store(4, R9, kScrFrag + 24, R1);
  g.Output(kScrFrag, 32);
  g.CountLost(0);
  if (g.o.exit_group_dead_off >= 0) {
    e.Load(1, R1, R6, static_cast<int16_t>(g.o.exit_group_dead_off));
    e.JmpIfImm(BPF_JEQ, R1, 0, keep);
  } else {
    e.Load(4, R1, R10, kFpTid);
    e.Load(4, R2, R10, kFpTgid);
    e.JmpIf(BPF_JNE, R1, R2, keep);
  }
  g.Delete(kMapTraced, kFpTgid);
  e.Bind(keep);
}

}  // namespace

Expected<ProbeSet> GenerateProbes(const ProbeOptions& o) {
  if (o.task_comm < 0 || o.task_pid < 0 || o.task_tgid < 0 || o.task_real_parent < 0 ||
      o.task_exit_code < 0)
    return Error(Code::kUnsupported, "the eBPF recorder needs task_struct offsets from BTF");
  ProbeSet set;
  Status st;
  struct Role {
    void (*gen)(Gen&);
    ProgramSpec* out;
    bpf_prog_type type;
    const char* name;
  };
  const Role roles[] = {
      {GenSysEnter, &set.sys_enter, BPF_PROG_TYPE_RAW_TRACEPOINT, "fay_rec_enter"},
      {GenSysExit, &set.sys_exit, BPF_PROG_TYPE_RAW_TRACEPOINT, "fay_rec_exit"},
      {GenFork, &set.fork, BPF_PROG_TYPE_RAW_TRACEPOINT, "fay_rec_fork"},
      {GenExec, &set.exec, BPF_PROG_TYPE_TRACEPOINT, "fay_rec_exec"},
      {GenExit, &set.exit, BPF_PROG_TYPE_TRACEPOINT, "fay_rec_pexit"},
  };
  for (const Role& r : roles) {
    Gen g(o);
    r.gen(g);
    g.Finish(r.out, r.type, r.name, &st);
  }
  if (!st.ok()) return st;
  return set;
}

}  // namespace fay::record::ebpf
