// The traced set of processes (two bits per tgid) and the raw sched programs that keep it:
// fork, exec and exit, and sched_switch, which writes out what the leaving task staged.
#include "record/ebpf/probe_gen.h"

namespace fay::record::ebpf::gen {

// R0 = the address of the bitmap word holding the tgid at fp-16, R2 = the bit shift of its
// state in that word. Jumps out if the bitmap is missing. fp-8 must hold 0.
void GenStateWord(Gen& g) {
  Emitter& e = g.e;
  g.Lookup(kMapStates, kFpZero);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(4, R1, R10, kFpTgid);
  e.Mov(R2, R1);
  e.AluImm(BPF_AND, R2, 31);
  e.AluImm(BPF_LSH, R2, 1);
  e.AluImm(BPF_RSH, R1, 5);
  e.AluImm(BPF_AND, R1, static_cast<int32_t>((g.o.pid_limit >> 5) - 1));
  e.AluImm(BPF_LSH, R1, 3);
  e.Alu(BPF_ADD, R0, R1);
}

// R1 = the state of the process whose tgid is at fp-16.
void GenLoadState(Gen& g) {
  Emitter& e = g.e;
  GenStateWord(g);
  e.Load(8, R1, R0, 0);
  e.Alu(BPF_RSH, R1, R2);
  e.AluImm(BPF_AND, R1, 3);
}

// Jumps out unless the process whose tgid is at fp-16 is traced and started (fp-8 must hold 0).
void GenExitUnlessActive(Gen& g) {
  Label go = g.e.NewLabel();
  GenLoadState(g);
  g.e.JmpIfImm(BPF_JSET, R1, kActive, go);
  g.e.Jmp(g.exit_label);
  g.e.Bind(go);
}

// Sets (op BPF_OR) or clears (BPF_AND) state bits `bits` of the tgid at fp-16.
void GenChangeState(Gen& g, uint8_t op, int32_t bits) {
  Emitter& e = g.e;
  GenStateWord(g);
  e.MovImm(R1, bits);
  e.Alu(BPF_LSH, R1, R2);
  if (op == BPF_AND) e.AluImm(BPF_XOR, R1, -1);
  e.Atomic64(op, R0, 0, R1);
}

// `size` bytes of a kernel structure's member at `member`, through the pointer that is argument
// `arg_off` of the raw tracepoint (ctx at R6), into the scratch at `dst`; jumps out if the read
// fails.
void GenReadArgField(Gen& g, int16_t arg_off, int32_t member, int16_t dst, int32_t size) {
  Emitter& e = g.e;
  e.Load(8, R3, R6, arg_off);
  e.AluImm(BPF_ADD, R3, member);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, dst);
  e.MovImm(R2, size);
  e.Call(BPF_FUNC_probe_read_kernel);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
}

// fp-8 = 0, fp-16 = tgid, fp-24 = tid (each in a zeroed u64 slot). R6 = ctx.
void GenIds(Gen& g) {
  Emitter& e = g.e;
  e.Mov(R6, R1);
  g.ZeroKey();
  e.Call(BPF_FUNC_get_current_pid_tgid);
  e.StoreImm(8, R10, kFpTgid, 0);
  e.StoreImm(8, R10, kFpNr, 0);
  e.Store(4, R10, kFpNr, R0);
  e.AluImm(BPF_RSH, R0, 32);
  e.Store(4, R10, kFpTgid, R0);
}

void GenProcHeader(Gen& g, RecType type) {
  Emitter& e = g.e;
  e.StoreImm(4, R9, kScrFrag + 0, static_cast<int32_t>(type));
  e.Load(4, R1, R10, kFpTgid);
  e.Store(4, R9, kScrFrag + 4, R1);
  e.Load(4, R1, R10, kFpNr);
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
  GenIds(g);
  GenExitUnlessActive(g);
  g.Scratch(g.exit_label);
  e.Load(4, R1, R10, kFpNr);  // the current thread's ring
  g.SetRing(R1);
  GenProcHeader(g, kRecFork);
  e.Load(4, R1, R10, kFpTgid);
  e.Store(4, R9, kScrFrag + 12, R1);
  GenReadArgField(g, 8, g.o.task_tgid, kScrFrag + 4, 4);
  GenReadArgField(g, 8, g.o.task_pid, kScrFrag + 8, 4);
  e.Load(4, R1, R9, kScrFrag + 4);
  e.Load(4, R2, R9, kScrFrag + 8);
  e.StoreImm(4, R9, kScrFrag + 28, 1);
  e.JmpIf(BPF_JNE, R1, R2, thread);
  e.StoreImm(4, R9, kScrFrag + 28, 0);
  e.StoreImm(8, R10, kFpTmp, 0);
  e.Store(4, R10, kFpTmp, R2);
  e.StoreImm(8, R10, kFpVal, 1);
  e.LdMap(R1, kMapTraced);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpTmp);
  e.Mov(R3, R10);
  e.AluImm(BPF_ADD, R3, kFpVal);
  e.MovImm(R4, BPF_ANY);
  e.Call(BPF_FUNC_map_update_elem);
  e.Comment("the child is traced from birth");
  e.Load(8, R1, R10, kFpTgid);
  e.Store(8, R10, kFpVal, R1);
  e.Load(8, R1, R10, kFpTmp);
  e.Store(8, R10, kFpTgid, R1);
  GenChangeState(g, BPF_OR, kActive);
  e.Load(8, R1, R10, kFpVal);
  e.Store(8, R10, kFpTgid, R1);
  e.Bind(thread);
  g.Output(kScrFrag, 32);
  g.CountIfFailed(kStatLostRecords);
}

// sched_process_exec: a held command starts being recorded; a traced one reports its exec.
// `parent` carries the exec's old_pid: a thread that execs takes over the leader's id.
void GenExec(Gen& g) {
  Emitter& e = g.e;
  Label go = e.NewLabel();
  GenIds(g);
  GenLoadState(g);
  e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
  e.JmpIfImm(BPF_JSET, R1, kActive, go);
  GenChangeState(g, BPF_OR, kActive);
  e.Bind(go);
  g.Scratch(g.exit_label);
  e.Load(4, R1, R10, kFpNr);  // the current thread's ring
  g.SetRing(R1);
  GenProcHeader(g, kRecExec);
  e.Comment("raw sched_process_exec(task, old_pid, bprm)");
  e.Load(8, R1, R6, 8);
  e.Store(4, R9, kScrFrag + 12, R1);
  GenReadArgField(g, 16, g.o.binprm_filename, kScrFrag + 32, 8);
  e.Load(8, R3, R9, kScrFrag + 32);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrFrag + 32);
  e.MovImm(R2, 256);
  e.Call(BPF_FUNC_probe_read_kernel_str);
  g.Output(kScrFrag, sizeof(WireProc));
  g.CountIfFailed(kStatLostRecords);
}

// sched_process_exit: the thread's exit (which ends a call it never returns from), and with
// the last thread, the process's.
void GenExit(Gen& g) {
  Emitter& e = g.e;
  Label keep = e.NewLabel();
  GenIds(g);
  GenLoadState(g);
  e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
  g.Scratch(g.exit_label);
  e.Load(4, R1, R10, kFpNr);  // the current thread's ring
  g.SetRing(R1);
  e.Call(BPF_FUNC_get_current_task_btf);
  e.Mov(R7, R0);
  {
    Label no_call = e.NewLabel(), lost = e.NewLabel();
    e.Comment("a call the thread never returns from (exit, exit_group) waits in its slot");
    e.Load(4, R1, R10, kFpNr);
    e.Store(4, R9, kScrFrag + 4, R1);
    GenSlot(g);
    e.Load(4, R1, R0, 0);
    e.Load(4, R2, R9, kScrFrag + 4);
    e.JmpIf(BPF_JNE, R1, R2, no_call);
    e.Load(8, R1, R0, 8);
    e.Store(8, R9, kVEntryNs, R1);
    e.Load(4, R2, R0, 4);
    e.StoreImm(4, R0, 0, 0);
    e.Store(8, R10, kFpCtx, R6);
    e.Load(8, R1, R10, kFpNr);
    e.Store(8, R10, kFpTmp, R1);
    e.StoreImm(8, R10, kFpNr, 0);
    e.Store(4, R10, kFpNr, R2);
    g.CopyRegs();
    g.ArgsToEntry();
    e.StoreImm(8, R9, kVRet, 0);
    e.StoreImm(8, R9, kScrEntry + 0, 0);
    g.Reserve(sizeof(WireCall), kStatLostRecords, lost);
    e.Mov(R6, R0);
    GenIdentity(g, kRecCall, kEventNoExit);
    e.MovImm(R8, BPF_RB_NO_WAKEUP);
    GenCallBody(g);
    e.Bind(lost);
    e.Load(8, R6, R10, kFpCtx);
    e.Load(8, R1, R10, kFpTmp);
    e.Store(8, R10, kFpNr, R1);
    e.Bind(no_call);
  }
  GenProcHeader(g, kRecProcExit);
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_exit_code));
  e.Store(4, R9, kScrFrag + 24, R1);
  if (g.o.exit_has_group_dead) {
    e.Comment("raw sched_process_exit(task, group_dead)");
    e.Load(8, R1, R6, 8);
    e.AluImm(BPF_AND, R1, 0xff);
  } else {
    Label leader = e.NewLabel();
    e.Load(4, R2, R10, kFpNr);
    e.Load(4, R3, R10, kFpTgid);
    e.MovImm(R1, 0);
    e.JmpIf(BPF_JNE, R2, R3, leader);
    e.MovImm(R1, 1);
    e.Bind(leader);
  }
  e.Store(4, R9, kScrFrag + 28, R1);
  e.Mov(R7, R1);
  g.Output(kScrFrag, 32);
  g.CountIfFailed(kStatLostRecords);
  e.JmpIfImm(BPF_JEQ, R7, 0, keep);
  GenChangeState(g, BPF_AND, kActive | kPendingExec);
  g.Delete(kMapTraced, kFpTgid);
  e.Bind(keep);
}

// raw sched_switch: the task leaving this CPU takes nothing staged with it (see WireBatch).
// It runs at every task switch of the machine: nothing staged, nothing more than a load.
void GenSwitch(Gen& g) {
  g.ZeroKey();
  g.Scratch(g.exit_label);
  g.e.Load(4, R1, R9, kVStaged);
  g.e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
  g.FlushStaged();
}

// raw signal_deliver(sig, info, ka): a traced thread takes a signal, where ptrace would stop it
// (strace's "--- SIGxxx {...} ---"). SIGKILL is left out, as ptrace never shows it: the thread
// just dies ("+++ killed by SIGKILL +++" comes from the exit). So is the SIGKILL the kernel
// makes of a fatal signal (GenSignalGenerate records that one as itself).
void GenSignalDeliver(Gen& g) {
  Emitter& e = g.e;
  GenIds(g);
  GenExitUnlessActive(g);
  e.Load(8, R1, R6, 0);
  e.JmpIfImm(BPF_JEQ, R1, SIGKILL, g.exit_label);
  g.Scratch(g.exit_label);
  e.Load(4, R1, R10, kFpNr);  // the current thread's ring
  g.SetRing(R1);
  GenProcHeader(g, kRecSignal);
  e.Load(8, R1, R6, 0);
  e.Store(4, R9, kScrFrag + 12, R1);
  e.Comment("its kernel_siginfo (always a real one here: the markers come only with SIGKILL)");
  e.Load(8, R3, R6, 8);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrFrag + 32);
  e.MovImm(R2, kSiginfoBytes);
  e.Call(BPF_FUNC_probe_read_kernel);  // zero-fills on failure
  g.Output(kScrFrag, 32 + static_cast<int32_t>(kSiginfoBytes));
  g.CountIfFailed(kStatLostRecords);
}

// raw signal_generate(sig, info, task, group, result), in the sender, after the kernel has
// queued or dropped the signal: the ids are the target's. Two signals strace sees delivered
// that never reach signal_deliver when nobody ptraces the target:
//  - one the kernel drops because it is ignored (SIGCHLD, SIGWINCH, SIGURG by default; the
//    kernel queues even ignored signals for a ptraced task);
//  - a fatal one, which the kernel turns into SIGKILL for every thread (a ptraced task takes it
//    as itself): the process's group exit then keeps its number.
// A timer sends signals from a hard interrupt, which may land inside another of these programs
// on the same CPU: this one keeps everything on its stack, touches no scratch but the counters
// (atomic adds), and writes its record straight to the target's ring without flushing what the
// CPU staged (SignalPlacer orders it among the target's calls by time).
void GenSignalGenerate(Gen& g) {
  Emitter& e = g.e;
  const ProbeOptions& o = g.o;
  constexpr int16_t kRec = -176;  // the WireProc head and the siginfo: 80 bytes
  constexpr int16_t kSigPtr = -184, kFlags = -188, kCode = -192;
  const bool group_known = o.task_signal >= 0 && o.signal_flags >= 0 && o.group_exit_code >= 0;
  Label go = e.NewLabel(), ignored = e.NewLabel(), record = e.NewLabel();
  e.Mov(R6, R1);
  e.Load(8, R1, R6, 0);
  e.JmpIfImm(BPF_JEQ, R1, SIGKILL, g.exit_label);
  e.Load(8, R1, R6, 32);
  // TRACE_SIGNAL_*: 0 delivered, 1 ignored, 2 already pending, 3 lost, 4 queued without info.
  e.JmpIfImm(BPF_JEQ, R1, 1, go);
  if (!group_known) e.Jmp(g.exit_label);
  e.JmpIfImm(BPF_JEQ, R1, 0, go);
  e.JmpIfImm(BPF_JNE, R1, 4, g.exit_label);
  e.Bind(go);
  g.ZeroKey();
  e.StoreImm(8, R10, kFpTgid, 0);
  e.StoreImm(8, R10, kFpNr, 0);
  auto read_task = [&](int32_t member, int16_t dst, int32_t size) {
    e.Load(8, R3, R6, 16);
    e.AluImm(BPF_ADD, R3, member);
    e.Mov(R1, R10);
    e.AluImm(BPF_ADD, R1, dst);
    e.MovImm(R2, size);
    e.Call(BPF_FUNC_probe_read_kernel);
    e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
  };
  read_task(o.task_tgid, kFpTgid, 4);
  read_task(o.task_pid, kFpNr, 4);
  GenExitUnlessActive(g);
  if (group_known) {
    constexpr int32_t kSignalGroupExit = 0x4;  // SIGNAL_GROUP_EXIT, include/linux/sched/signal.h
    read_task(o.task_signal, kSigPtr, 8);
    for (auto [member, dst] : {std::pair{o.signal_flags, kFlags}, {o.group_exit_code, kCode}}) {
      e.Load(8, R3, R10, kSigPtr);
      e.AluImm(BPF_ADD, R3, member);
      e.Mov(R1, R10);
      e.AluImm(BPF_ADD, R1, dst);
      e.MovImm(R2, 4);
      e.Call(BPF_FUNC_probe_read_kernel);
      e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
    }
    e.Load(4, R2, R10, kFlags);
    e.AluImm(BPF_AND, R2, kSignalGroupExit);
    e.Load(8, R1, R6, 32);
    e.JmpIfImm(BPF_JEQ, R1, 1, ignored);
    e.Comment("queued: recorded only when it ended the process as itself");
    e.JmpIfImm(BPF_JEQ, R2, 0, g.exit_label);
    e.Load(4, R2, R10, kCode);
    e.Load(8, R1, R6, 0);
    e.JmpIf(BPF_JNE, R1, R2, g.exit_label);
    e.Jmp(record);
    e.Bind(ignored);
    e.Comment("dropped: not when the process is exiting anyway");
    e.JmpIfImm(BPF_JNE, R2, 0, g.exit_label);
  }
  e.Bind(record);
  e.Comment("the record, on the stack");
  e.StoreImm(4, R10, kRec + 0, static_cast<int32_t>(kRecSignal));
  e.Load(4, R1, R10, kFpTgid);
  e.Store(4, R10, kRec + 4, R1);
  e.Load(4, R1, R10, kFpNr);
  e.Store(4, R10, kRec + 8, R1);
  e.Load(8, R1, R6, 0);
  e.Store(4, R10, kRec + 12, R1);
  e.StoreImm(4, R10, kRec + 24, 0);
  e.StoreImm(4, R10, kRec + 28, 1);  // noted when sent, not when taken (SignalPlacer)
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R10, kRec + 16, R0);
  {
    constexpr int16_t kInfo = kRec + 32;
    Label marker = e.NewLabel(), done = e.NewLabel(), kernel = e.NewLabel();
    e.Load(8, R3, R6, 8);
    e.JmpIfImm(BPF_JLT, R3, 4096, marker);
    e.Mov(R1, R10);
    e.AluImm(BPF_ADD, R1, kInfo);
    e.MovImm(R2, kSiginfoBytes);
    e.Call(BPF_FUNC_probe_read_kernel);  // zero-fills on failure
    e.Jmp(done);
    e.Bind(marker);
    e.Comment("SEND_SIG_NOINFO: from this process (SI_USER); SEND_SIG_PRIV: the kernel");
    for (int16_t off = 0; off < static_cast<int16_t>(kSiginfoBytes); off += 8)
      e.StoreImm(8, R10, static_cast<int16_t>(kInfo + off), 0);
    e.Load(8, R1, R6, 0);
    e.Store(4, R10, kInfo, R1);
    e.JmpIfImm(BPF_JNE, R3, 0, kernel);
    e.Call(BPF_FUNC_get_current_pid_tgid);
    e.AluImm(BPF_RSH, R0, 32);
    e.Store(4, R10, kInfo + 16, R0);
    e.Call(BPF_FUNC_get_current_uid_gid);
    e.Store(4, R10, kInfo + 20, R0);
    e.Jmp(done);
    e.Bind(kernel);
    e.StoreImm(4, R10, kInfo + 8, 0x80);
    e.Bind(done);
  }
  e.Comment("to the target thread's ring, without flushing what this CPU staged");
  g.ZeroKey();
  g.Scratch(g.exit_label);  // for the loss counter only
  e.Load(4, R2, R10, kFpNr);
  if (o.rings > 1) e.AluImm(BPF_MOD, R2, static_cast<int32_t>(o.rings));
  g.LdRingNumbered(R2);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kRec);
  e.MovImm(R3, 32 + static_cast<int32_t>(kSiginfoBytes));
  e.MovImm(R4, BPF_RB_NO_WAKEUP);
  e.Call(BPF_FUNC_ringbuf_output);
  g.CountIfFailed(kStatLostRecords);
}

}  // namespace fay::record::ebpf::gen
