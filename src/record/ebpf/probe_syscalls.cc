// The sys_enter and sys_exit programs: whether the process is traced, the thread's call slot,
// the whole-call record and its identity, killed and restarted calls, and the wakeups.
#include "record/ebpf/probe_gen.h"

namespace fay::record::ebpf::gen {

// R6 = ctx, R7 = current task; fp-16 = tgid. Jumps out unless the process is traced, and
// leaves its state in R1.
void GenTraced(Gen& g) {
  Emitter& e = g.e;
  e.Mov(R6, R1);
  e.Store(8, R10, kFpCtx, R1);
  g.ZeroKey();
  e.Call(BPF_FUNC_get_current_task_btf);
  e.Mov(R7, R0);
  e.StoreImm(8, R10, kFpTgid, 0);
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_tgid));
  e.Store(4, R10, kFpTgid, R1);
  e.Comment("is this process traced?");
  GenLoadState(g);
  e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
}

// R2 = the syscall number; fp-24 = it. Jumps out unless it is in range, and unless a process
// held before its exec (state in R1) is making that exec.
void GenNrFilter(Gen& g) {
  Emitter& e = g.e;
  Label ok = e.NewLabel();
  e.JmpIfImm(BPF_JSLT, R2, 0, g.exit_label);
  e.JmpIfImm(BPF_JSGE, R2, kMaxNr, g.exit_label);
  e.StoreImm(8, R10, kFpNr, 0);
  e.Store(4, R10, kFpNr, R2);
  e.JmpIfImm(BPF_JSET, R1, kActive, ok);
  e.Comment("held before exec: only the exec itself counts");
  e.JmpIfImm(BPF_JEQ, R2, sysno::execve, ok);
  e.JmpIfImm(BPF_JNE, R2, sysno::execveat, g.exit_label);
  e.Bind(ok);
}

// R8 = the call's SyscallSpec; jumps out unless -e selects it.
void GenSpec(Gen& g) {
  Emitter& e = g.e;
  g.Lookup(kMapSpec, kFpNr);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Mov(R8, R0);
  e.Load(1, R1, R8, 0);
  e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
}

// R0 = the address of the current thread's CallSlot (tid at kScrFrag + 4); fp-8 must hold 0.
void GenSlot(Gen& g) {
  Emitter& e = g.e;
  g.Lookup(kMapSlots, kFpZero);
  e.JmpIfImm(BPF_JEQ, R0, 0, g.exit_label);
  e.Load(4, R1, R9, kScrFrag + 4);
  e.AluImm(BPF_AND, R1, static_cast<int32_t>(kSlots - 1));
  e.AluImm(BPF_LSH, R1, kCallSlotShift);
  e.Alu(BPF_ADD, R0, R1);
}

// Writes the identity fields every call record starts with (type, flags, tgid, tid, ppid,
// uid) at R6, from the task in R7.
void GenIdentity(Gen& g, RecType type, uint32_t flags) {
  Emitter& e = g.e;
  e.StoreImm(4, R6, 0, static_cast<int32_t>(type));
  e.StoreImm(2, R6, 4, static_cast<int32_t>(flags));
  if (g.o.task_cpu >= 0) {
    e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_cpu));
    e.Store(2, R6, 6, R1);
  } else {
    e.StoreImm(2, R6, 6, 0xffff);
  }
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_tgid));
  e.Store(4, R6, 8, R1);
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_pid));
  e.Store(4, R6, 12, R1);
  Reg task = R7;
  if (g.o.task_struct_btf_id > 0 && g.o.rdonly_cast_btf_id > 0) {
    // The verifier turns the cast into a move; the pointers walked from it are then untrusted,
    // which spares it a search of the kernel's BTF at every load (see bpf::TaskOffsets).
    e.Mov(R1, R7);
    e.MovImm(R2, g.o.task_struct_btf_id);
    e.CallKfunc(g.o.rdonly_cast_btf_id);
    task = R0;
  }
  e.Load(8, R1, task, static_cast<int16_t>(g.o.task_real_parent));
  e.Load(4, R1, R1, static_cast<int16_t>(g.o.task_tgid));
  e.Store(4, R6, 16, R1);
  e.Load(8, R1, task, static_cast<int16_t>(g.o.task_cred));
  e.Load(4, R1, R1, static_cast<int16_t>(g.o.cred_uid));
  e.Store(4, R6, 20, R1);
}

void GenCallBody(Gen& g, CallOut how) {
  Emitter& e = g.e;
  e.Load(8, R1, R9, kVEntryNs);
  e.Store(8, R6, 24, R1);
  e.Load(8, R1, R9, kScrEntry + 0);
  e.Store(8, R6, 32, R1);
  e.Load(4, R1, R10, kFpNr);
  e.Store(8, R6, 40, R1);
  for (int i = 0; i < 6; ++i) {
    e.Load(8, R1, R9, static_cast<int16_t>(kScrEntry + 16 + 8 * i));
    e.Store(8, R6, static_cast<int16_t>(48 + 8 * i), R1);
  }
  e.Load(8, R1, R9, kVRet);
  e.Store(8, R6, 96, R1);
  e.Load(8, R1, R7, static_cast<int16_t>(g.o.task_comm));
  e.Store(8, R6, 104, R1);
  e.Load(8, R1, R7, static_cast<int16_t>(g.o.task_comm + 8));
  e.Store(8, R6, 112, R1);
  if (how == CallOut::kStageOnly) return;
  e.Mov(R1, R6);
  g.SubmitR8();
}

// kVRing for a syscall probe (R7 = task, R9 = scratch, tid at kScrFrag + 4): the thread's ring,
// or for an exec its process's, the ring its return (with the leader's id) goes to. What the
// thread staged before the exec goes to its own ring first. Clobbers R0-R5.
void GenEnterRing(Gen& g) {
  if (g.o.rings <= 1) return;
  Emitter& e = g.e;
  Label exec = e.NewLabel(), done = e.NewLabel();
  e.Load(4, R2, R10, kFpNr);
  e.JmpIfImm(BPF_JEQ, R2, sysno::execve, exec);
  e.JmpIfImm(BPF_JEQ, R2, sysno::execveat, exec);
  e.Load(4, R1, R9, kScrFrag + 4);
  g.SetRing(R1);
  e.Jmp(done);
  e.Bind(exec);
  g.FlushStaged();
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_tgid));
  g.SetRing(R1);
  e.Bind(done);
}

// The same at exit, where the number is the saved orig_ax (after CopyRegs): a failed exec of a
// thread that is not the leader returns under its own id, to its process's ring.
void GenExitRing(Gen& g) {
  if (g.o.rings <= 1) return;
  Emitter& e = g.e;
  Label exec = e.NewLabel(), done = e.NewLabel();
  e.Load(8, R2, R9, kScrRegs + kOrigAxInCopy);
  e.Load(4, R1, R9, kScrFrag + 4);
  e.JmpIfImm(BPF_JEQ, R2, sysno::execve, exec);
  e.JmpIfImm(BPF_JNE, R2, sysno::execveat, done);
  e.Bind(exec);
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_tgid));
  e.Bind(done);
  g.SetRing(R1);
}

// kVCallFlags = kEventNoExit when the thread dies before the value it returns with reaches it:
// it has SIGKILL pending, from another thread's exec or exit_group, or a kill -9. ptrace and
// strace see such a call end without returning ("= ?"). Not when the SIGKILL stands for another
// fatal signal: the kernel makes that one a SIGKILL only for a process nobody ptraces, and under
// ptrace the call returns before the signal kills (kill(getpid(), SIGTERM) = 0). R9 = scratch.
void GenKilled(Gen& g) {
  const ProbeOptions& o = g.o;
  if (o.task_pending_signal < 0) return;
  Emitter& e = g.e;
  Label done = e.NewLabel(), killed = e.NewLabel();
  e.StoreImm(4, R9, kVCallFlags, 0);
  e.Load(8, R1, R10, kFpTask);
  e.Load(8, R2, R1, static_cast<int16_t>(o.task_pending_signal));
  e.AluImm(BPF_RSH, R2, SIGKILL - 1);
  e.AluImm(BPF_AND, R2, 1);
  e.JmpIfImm(BPF_JEQ, R2, 0, done);
  if (o.task_signal >= 0 && o.signal_flags >= 0 && o.group_exit_code >= 0 &&
      o.task_struct_btf_id > 0 && o.rdonly_cast_btf_id > 0) {
    e.MovImm(R2, o.task_struct_btf_id);
    e.CallKfunc(o.rdonly_cast_btf_id);
    e.Load(8, R1, R0, static_cast<int16_t>(o.task_signal));
    if (o.group_exec_task >= 0) {
      e.Load(8, R2, R1, static_cast<int16_t>(o.group_exec_task));
      e.JmpIfImm(BPF_JNE, R2, 0, killed);
    }
    constexpr int32_t kSignalGroupExit = 0x4;  // SIGNAL_GROUP_EXIT, include/linux/sched/signal.h
    e.Load(4, R2, R1, static_cast<int16_t>(o.signal_flags));
    e.AluImm(BPF_AND, R2, kSignalGroupExit);
    e.JmpIfImm(BPF_JEQ, R2, 0, done);
    e.Comment("exit_group's code has no signal; a signal's group exit keeps its number");
    e.Load(4, R2, R1, static_cast<int16_t>(o.group_exit_code));
    e.AluImm(BPF_AND, R2, 0x7f);
    e.JmpIfImm(BPF_JEQ, R2, 0, killed);
    e.JmpIfImm(BPF_JNE, R2, SIGKILL, done);
  }
  e.Bind(killed);
  static_assert(kEventNoExit == 1);
  e.StoreImm(4, R9, kVCallFlags, kEventNoExit);
  e.Bind(done);
}

// kVCallFlags |= kEventInterrupted when the call returns a restart code with no signal pending,
// to the thread or to its process: the kernel then makes the call again before the program
// runs, and the consumer folds this attempt into that one (RestartMerger). ret -515
// (ENOIOCTLCMD) lies in the range but is not one. R9 = scratch.
void GenRestarted(Gen& g) {
  const ProbeOptions& o = g.o;
  if (o.task_pending_signal < 0 || o.task_signal < 0 || o.signal_shared_pending < 0 ||
      o.task_struct_btf_id <= 0 || o.rdonly_cast_btf_id <= 0)
    return;
  Emitter& e = g.e;
  Label done = e.NewLabel();
  static_assert(kERestartNoIntr == kERestartSys + 1 && kERestartNoHand == kERestartSys + 2 &&
                kENoIoctlCmd == kERestartSys + 3 && kERestartRestartBlock == kERestartSys + 4);
  e.Load(8, R1, R9, kVRet);
  e.AluImm(BPF_ADD, R1, kERestartRestartBlock);
  e.JmpIfImm(BPF_JGT, R1, kERestartRestartBlock - kERestartSys, done);
  e.JmpIfImm(BPF_JEQ, R1, kERestartRestartBlock - kENoIoctlCmd, done);
  e.Load(8, R1, R10, kFpTask);
  e.Load(8, R2, R1, static_cast<int16_t>(o.task_pending_signal));
  e.JmpIfImm(BPF_JNE, R2, 0, done);
  e.MovImm(R2, o.task_struct_btf_id);
  e.CallKfunc(o.rdonly_cast_btf_id);
  e.Load(8, R1, R0, static_cast<int16_t>(o.task_signal));
  e.Load(8, R2, R1, static_cast<int16_t>(o.signal_shared_pending));
  e.JmpIfImm(BPF_JNE, R2, 0, done);
  e.Load(4, R1, R9, kVCallFlags);
  e.AluImm(BPF_OR, R1, kEventInterrupted);
  e.Store(4, R9, kVCallFlags, R1);
  e.Bind(done);
}

void GenSysEnter(Gen& g) {
  Emitter& e = g.e;
  Label two = e.NewLabel(), buffers = e.NewLabel();
  GenTraced(g);
  e.Load(8, R2, R6, 8);
  GenNrFilter(g);
  GenSpec(g);
  g.Scratch(g.exit_label);
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_pid));
  e.Store(4, R9, kScrFrag + 4, R1);
  GenEnterRing(g);
  e.Load(4, R2, R10, kFpNr);
  e.JmpIfImm(BPF_JEQ, R2, sysno::execve, two);
  e.JmpIfImm(BPF_JEQ, R2, sysno::execveat, two);
  e.Comment("claim the thread's slot: number and entry time wait there for the exit probe");
  GenSlot(g);
  e.Mov(R6, R0);
  e.Load(4, R1, R9, kScrFrag + 4);
  e.MovImm(R0, 0);
  e.AtomicCmpXchg32(R6, 0, R1);
  e.JmpIfImm(BPF_JNE, R0, 0, two);
  e.Load(4, R1, R10, kFpNr);
  e.Store(4, R6, 4, R1);
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R6, 8, R0);
  e.Load(1, R1, R8, 1);
  e.JmpIfImm(BPF_JEQ, R1, 0, g.exit_label);
  g.CopyRegs();
  g.ArgsToEntry();
  e.Jmp(buffers);

  e.Bind(two);
  e.Comment("an enter record, written in place");
  g.CopyRegs();
  g.ArgsToEntry();
  g.Reserve(sizeof(WireEnter), kStatLostRecords, g.exit_label);
  e.Mov(R6, R0);
  GenIdentity(g, kRecEnter, 0);
  e.Load(4, R1, R10, kFpNr);
  e.Store(8, R6, 32, R1);
  for (int i = 0; i < 6; ++i) {
    e.Load(8, R1, R9, static_cast<int16_t>(kScrEntry + 16 + 8 * i));
    e.Store(8, R6, static_cast<int16_t>(40 + 8 * i), R1);
  }
  e.Load(8, R1, R7, static_cast<int16_t>(g.o.task_comm));
  e.Store(8, R6, 88, R1);
  e.Load(8, R1, R7, static_cast<int16_t>(g.o.task_comm + 8));
  e.Store(8, R6, 96, R1);
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R6, 24, R0);
  e.Mov(R1, R6);
  e.MovImm(R2, BPF_RB_NO_WAKEUP);
  e.Call(BPF_FUNC_ringbuf_submit);
  e.Bind(buffers);
  e.Comment("buffers going into the kernel");
  GenPhase(g, Phase::kEnter);
  {
    // The buffers it could not read, kept in the thread's slot when it holds it (a thread on
    // an enter record keeps them in this CPU's scratch only, as before).
    Label not_held = e.NewLabel();
    e.Comment("what to read again at the exit, in the thread's slot");
    g.ZeroKey();
    GenSlot(g);
    e.Load(4, R1, R0, 0);
    e.Load(4, R2, R9, kScrFrag + 4);
    e.JmpIf(BPF_JNE, R1, R2, not_held);
    e.Load(4, R1, R9, kVRetryMask);
    e.Store(4, R0, kCallSlotRetry, R1);
    e.Bind(not_held);
  }
}

void GenSysExit(Gen& g) {
  Emitter& e = g.e;
  Label record = e.NewLabel(), quiet = e.NewLabel(), have_nr = e.NewLabel(), two = e.NewLabel();
  GenTraced(g);
  e.StoreImm(8, R10, kFpVal, 0);
  e.Store(1, R10, kFpVal, R1);
  e.Store(8, R10, kFpTask, R7);  // the capture rules use R7
  g.Scratch(g.exit_label);
  e.Load(4, R1, R7, static_cast<int16_t>(g.o.task_pid));
  e.Store(4, R9, kScrFrag + 4, R1);
  g.CopyRegs();
  GenExitRing(g);
  e.Comment("the thread's slot: a call its enter probe left there");
  GenSlot(g);
  e.Load(4, R1, R0, 0);
  e.Load(4, R2, R9, kScrFrag + 4);
  e.StoreImm(8, R9, kVSlot, 0);
  e.JmpIf(BPF_JNE, R1, R2, two);
  e.StoreImm(8, R9, kVSlot, 1);
  e.Load(8, R1, R0, 8);
  e.Store(8, R9, kVEntryNs, R1);
  e.Comment("the buffers the enter probe could not read, wherever it ran");
  e.Load(4, R1, R0, kCallSlotRetry);
  e.Store(4, R9, kVRetryMask, R1);
  e.Load(4, R1, R9, kScrFrag + 4);
  e.Store(4, R9, kVRetryTid, R1);
  e.StoreImm(4, R0, kCallSlotRetry, 0);
  e.Load(4, R2, R0, 4);
  e.StoreImm(4, R0, 0, 0);
  e.Jmp(have_nr);
  e.Bind(two);
  e.Load(8, R2, R9, kScrRegs + kOrigAxInCopy);
  {
    // rt_sigreturn restores the interrupted registers, orig_ax = -1 among them: the only call
    // that returns with it (fay's probes never cancel a call).
    Label real = e.NewLabel();
    e.JmpIfImm(BPF_JNE, R2, -1, real);
    e.MovImm(R2, sysno::rt_sigreturn);
    e.Bind(real);
  }
  e.Bind(have_nr);
  e.Load(1, R1, R10, kFpVal);
  GenNrFilter(g);
  GenSpec(g);
  e.Load(8, R1, R6, 8);
  e.Store(8, R9, kVRet, R1);
  GenKilled(g);
  GenRestarted(g);
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Store(8, R9, kScrEntry + 0, R0);
  g.ArgsToEntry();
  {
    Label no_retry = e.NewLabel();
    e.Load(4, R1, R9, kVRetryMask);
    e.JmpIfImm(BPF_JEQ, R1, 0, no_retry);
    e.Load(4, R1, R9, kVRetryTid);
    e.Load(4, R2, R9, kScrFrag + 4);
    e.JmpIf(BPF_JNE, R1, R2, no_retry);
    e.Comment("inbound buffers the enter probe could not read, now faulted in");
    GenPhase(g, Phase::kEnterRetry);
    e.Bind(no_retry);
  }
  {
    Label sleep = e.NewLabel(), out = e.NewLabel();
    e.Load(1, R1, R8, kSpecExitRulesOff);
    e.JmpIfImm(BPF_JEQ, R1, 0, record);
    e.Load(8, R1, R9, kVRet);
    e.Load(1, R2, R8, kSpecExitWhenInterruptedOff);
    e.JmpIfImm(BPF_JNE, R2, 0, sleep);
    e.JmpIfImm(BPF_JSLT, R1, 0, record);
    e.Jmp(out);
    e.Bind(sleep);
    e.Comment("a sleep writes its time left only when a signal cuts it short");
    e.JmpIfImm(BPF_JEQ, R1, -EINTR, out);
    e.JmpIfImm(BPF_JNE, R1, -kERestartRestartBlock, record);
    e.Bind(out);
  }
  e.Comment("buffers coming out of the kernel");
  GenPhase(g, Phase::kExit);
  e.Bind(record);
  // Wake the consumer or the governor when the ring fills: looked at every few calls, and after
  // anything went straight to the ring. The record that carries the wakeup clears the consumer's
  // flag once written (ClearConsumerWake), so the calls after it do not interrupt the program
  // again; a write that failed leaves the flag for the next call. The governor's flag is only
  // read: the consumer may empty the ring before the governor's wakeup is seen, and the wakeup is
  // then lost, so it is sent again until the governor says it is awake.
  e.Comment("wake the consumer or the governor when the ring fills");
  e.MovImm(R8, BPF_RB_NO_WAKEUP);
  {
    Label look = e.NewLabel();
    e.Load(8, R1, R9, kVCount);
    e.AluImm(BPF_ADD, R1, 1);
    e.Store(8, R9, kVCount, R1);
    e.AluImm(BPF_AND, R1, kWakeCheckEvery - 1);
    e.JmpIfImm(BPF_JEQ, R1, 0, look);
    e.Load(4, R1, R9, kVDirect);
    e.JmpIfImm(BPF_JEQ, R1, 0, quiet);
    e.Bind(look);
    e.StoreImm(4, R9, kVDirect, 0);
    e.StoreImm(8, R10, kFpTmp, 0);
    if (g.o.rings > 1) {
      e.Load(4, R1, R9, kVRing);
      e.Store(4, R10, kFpTmp, R1);
    }
    g.Lookup(kMapWake, kFpTmp);
    e.JmpIfImm(BPF_JEQ, R0, 0, quiet);
    e.Mov(R6, R0);
    e.StoreImm(8, R10, kFpTmp, kGovernorWakeSlot);
    g.Lookup(kMapWake, kFpTmp);
    e.JmpIfImm(BPF_JEQ, R0, 0, quiet);
    e.Mov(R7, R0);
    e.Load(8, R1, R6, 0);
    e.Load(8, R2, R7, 0);
    e.Alu(BPF_OR, R1, R2);
    e.JmpIfImm(BPF_JEQ, R1, 0, quiet);
    g.LdRing();
    e.MovImm(R2, BPF_RB_AVAIL_DATA);
    e.Call(BPF_FUNC_ringbuf_query);
    e.LdImm64(R1, g.o.wake_bytes);
    e.JmpIf(BPF_JLE, R0, R1, quiet);
  }
  e.MovImm(R8, BPF_RB_FORCE_WAKEUP);
  e.Bind(quiet);
  {
    Label not_staged = e.NewLabel();
    e.Load(8, R1, R9, kVSlot);
    e.JmpIfImm(BPF_JEQ, R1, 0, not_staged);
    e.Comment("the whole call, staged in the CPU's staging area, written when it fills");
    Label room = e.NewLabel();
    e.Load(4, R1, R9, kVStaged);
    e.JmpIfImm(BPF_JLE, R1, kStageBytes - sizeof(WireCall), room);
    g.FlushStaged(true);
    e.MovImm(R1, 0);
    e.Bind(room);
    e.Mov(R6, R9);
    e.AluImm(BPF_ADD, R6, kStage + sizeof(WireBatch));
    e.Alu(BPF_ADD, R6, R1);
    e.Load(8, R7, R10, kFpTask);
    GenIdentity(g, kRecCall, 0);
    if (g.o.task_pending_signal >= 0) {
      e.Load(4, R1, R9, kVCallFlags);
      e.Store(2, R6, 4, R1);
    }
    GenCallBody(g, CallOut::kStageOnly);
    e.Load(4, R1, R9, kVStaged);
    e.AluImm(BPF_ADD, R1, sizeof(WireCall));
    e.Store(4, R9, kVStaged, R1);
    e.Load(2, R2, R9, kVStagedCalls);
    e.AluImm(BPF_ADD, R2, 1);
    e.Store(2, R9, kVStagedCalls, R2);
    e.Comment("full (no room for another call), or the consumer is to be woken: written now");
    Label flush = e.NewLabel();
    e.JmpIfImm(BPF_JNE, R8, BPF_RB_NO_WAKEUP, flush);
    e.JmpIfImm(BPF_JLE, R1, kStageBytes - sizeof(WireCall), g.exit_label);
    e.Bind(flush);
    g.FlushStaged(true);
    e.Jmp(g.exit_label);
    e.Bind(not_staged);
  }
  g.Reserve(sizeof(WireReturn), kStatLostRecords, g.exit_label);
  e.StoreImm(4, R0, 0, kRecReturn);
  e.Load(4, R1, R9, kScrFrag + 4);
  e.Store(4, R0, 4, R1);
  e.Load(4, R1, R10, kFpNr);
  e.Store(8, R0, 8, R1);
  e.Load(8, R1, R9, kVRet);
  e.Store(8, R0, 16, R1);
  e.Load(8, R1, R9, kScrEntry + 0);
  e.Store(8, R0, 24, R1);
  e.Mov(R1, R0);
  g.SubmitR8();
}

}  // namespace fay::record::ebpf::gen
