// The steps every program may end with: the staging area's writer (a global function) and the
// program's assembly, which appends the callbacks and functions its parts asked for.
#include "record/ebpf/probe_gen.h"

namespace fay::record::ebpf::gen {

// The staged records' writer, a global function: the verifier checks it once, where inlined
// at each of the dozen places that write to the ring it doubled the syscall probes' load time.
// R1 = the ring wakeup flags.
void GenFlushFunc(Gen& g) {
  Emitter& e = g.e;
  Label done = e.NewLabel();
  e.BeginFunc(g.flush_fn, true);
  e.Mov(R6, R1);
  g.ZeroKey();
  g.Lookup(kMapScratch, kFpZero);
  e.JmpIfImm(BPF_JEQ, R0, 0, done);
  e.Mov(R9, R0);
  e.Load(4, R3, R9, kVStaged);
  e.JmpIfImm(BPF_JEQ, R3, 0, done);
  e.StoreImm(4, R9, kVStaged, 0);
  e.JmpIfImm(BPF_JGT, R3, kStageBytes, done);  // never: bounds the size for the verifier
  e.StoreImm(8, R10, kFpStaged, 0);
  e.Load(2, R1, R9, kVStagedCalls);
  e.Store(4, R10, kFpStaged, R1);
  e.StoreImm(8, R10, kFpStagedFrags, 0);
  e.Load(2, R1, R9, kVStagedFrags);
  e.Store(4, R10, kFpStagedFrags, R1);
  e.StoreImm(4, R9, kVStagedCalls, 0);  // both u16 counters
  e.StoreImm(4, R9, kStage + 0, kRecBatch);
  e.Store(4, R9, kStage + 4, R3);
  e.AluImm(BPF_ADD, R3, sizeof(WireBatch));
  g.LdRing();
  e.Mov(R2, R9);
  e.AluImm(BPF_ADD, R2, kStage);
  e.Mov(R4, R6);
  e.Call(BPF_FUNC_ringbuf_output);
  {
    Label failed = e.NewLabel();
    e.JmpIfImm(BPF_JSLT, R0, 0, failed);
    e.JmpIfImm(BPF_JNE, R6, BPF_RB_FORCE_WAKEUP, done);
    g.ClearConsumerWake();
    e.Jmp(done);
    e.Bind(failed);
  }
  g.CountN(kStatLostRecords, kFpStaged);
  g.CountN(kStatLostFragments, kFpStagedFrags);
  e.Bind(done);
  e.MovImm(R0, 0);
  e.Exit();
}

void Gen::Finish(ProgramSpec* spec, bpf_prog_type type, const char* name, Status* st) {
  e.Bind(exit_label);
  e.MovImm(R0, 0);
  e.Exit();
  // Callbacks that use others come first, so those are known to be needed.
  if (uses_rule_cb) {
    GenRuleCallback(*this);
    GenRuleFunc(*this);
  }
  if (uses_array_cb) GenArrayCallback(*this);
  if (uses_iovec_cb) GenIovecCallback(*this);
  if (uses_frag_cb) GenFragCallback(*this);
  if (uses_flush) GenFlushFunc(*this);
  auto insns = e.Finish();
  if (!insns.ok()) {
    *st = insns.status();
    return;
  }
  spec->type = type;
  spec->name = name;
  spec->insns = std::move(insns).value();
  spec->relocs = e.relocs();
  spec->func_starts = e.func_starts();
  spec->func_global = e.func_global();
}

}  // namespace fay::record::ebpf::gen
