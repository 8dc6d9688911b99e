// Buffers and the capture rules that name them: fragments, short buffers, strings, pointer
// arrays, iovec arrays and struct msghdr, the rule loop and its one-plain-rule shortcut.
#include "record/ebpf/probe_gen.h"

namespace fay::record::ebpf::gen {

// bpf_loop callback: emits the next fragment of the buffer described in the scratch (kVAddr,
// kVWant, kVOff and the fragment header). A whole fragment is read straight into the ring; the
// last, shorter one goes through the scratch. Returns 1 to stop.

void GenFragCallback(Gen& g) {
  Emitter& e = g.e;
  // Only a call of the body, a global function: a callback is verified again at every bpf_loop
  // that names it (five here), a global function once.
  e.BeginFunc(g.frag_cb);
  e.CallFunc(g.frag_fn);
  e.AluImm(BPF_AND, R0, 1);
  e.Exit();

  Label stop = e.NewLabel(), tail = e.NewLabel(), tail_fail = e.NewLabel();
  e.BeginFunc(g.frag_fn, true);
  g.ZeroKey();
  g.Scratch(stop);
  e.Load(8, R1, R9, kVWant);
  e.Load(8, R2, R9, kVOff);
  e.Alu(BPF_SUB, R1, R2);
  e.Store(8, R9, kScrFrag + 32, R2);
  e.JmpIfImm(BPF_JLT, R1, kFragBytes, tail);
  e.Comment("a whole fragment, read into the ring");
  e.StoreImm(4, R9, kScrFrag + 48, kFragBytes);
  e.Load(8, R8, R9, kVAddr);
  e.Load(8, R1, R9, kVOff);
  e.Alu(BPF_ADD, R8, R1);
  g.WholeFragment(R8, R6, stop, tail_fail);
  e.Load(8, R1, R9, kVOff);
  e.AluImm(BPF_ADD, R1, kFragBytes);
  e.Store(8, R9, kVOff, R1);
  e.MovImm(R0, 0);
  e.Exit();

  e.Bind(tail);
  e.Comment("the last, shorter fragment (possibly empty)");
  e.Mov(R7, R1);
  e.Store(4, R9, kScrFrag + 48, R7);
  e.Load(8, R3, R9, kVAddr);
  e.Load(8, R4, R9, kVOff);
  e.Alu(BPF_ADD, R3, R4);
  g.DirectFragment(tail_fail);
  e.Jmp(stop);
  e.Bind(tail_fail);
  e.Comment("unreadable (not present): an empty piece says where it stopped");
  g.MarkRetry();
  e.StoreImm(4, R9, kScrFrag + 48, 0);
  g.Output(kScrFrag, 56);
  g.CountIfFailed(kStatLostFragments);
  e.Bind(stop);
  e.MovImm(R0, 1);
  e.Exit();
}

// Runs the fragment callback once per kFragBytes of the R4 bytes at kVAddr (at least once), the
// header set and kVWant/kVOff ready.
void GenFragmentLoop(Gen& g) {
  Emitter& e = g.e;
  Label some = e.NewLabel();
  static_assert(kFragBytes == 1 << 12);
  e.Mov(R1, R4);
  e.AluImm(BPF_ADD, R1, kFragBytes - 1);
  e.AluImm(BPF_RSH, R1, 12);
  e.JmpIfImm(BPF_JNE, R1, 0, some);
  e.MovImm(R1, 1);
  e.Bind(some);
  g.Loop(g.frag_cb, &g.uses_frag_cb);
}

// A buffer shorter than one fragment (length R4 < kFragBytes; address kVAddr; header set), read
// through the scratch and output in place: most buffers are, and a bpf_loop round costs more
// than the copy. Ends at `done`.
void GenShortBuffer(Gen& g, Label done) {
  Emitter& e = g.e;
  Label fail = e.NewLabel(), direct = e.NewLabel();
  e.JmpIfImm(BPF_JGE, R4, kFragBytes, done);  // for the verifier: the caller checked
  e.Mov(R7, R4);
  e.StoreImm(8, R9, kScrFrag + 32, 0);
  e.Store(4, R9, kScrFrag + 48, R7);
  e.JmpIfImm(BPF_JGT, R7, kStageFragMax, direct);
  e.Comment("staged, read straight into the staging area (see WireBatch)");
  g.StagePlace();
  g.StagingAt(R5);
  g.CopyFragHeader(R5);
  e.Mov(R2, R7);
  e.Load(8, R3, R9, kVAddr);
  g.ReadUserBehindHeader(R5);
  e.JmpIfImm(BPF_JNE, R0, 0, fail);
  g.CommitStagedFragment();
  e.Jmp(done);
  e.Bind(direct);
  e.Load(8, R3, R9, kVAddr);
  g.DirectFragment(fail);
  e.Jmp(done);
  e.Bind(fail);
  g.MarkRetry();
  e.StoreImm(4, R9, kScrFrag + 48, 0);
  g.Output(kScrFrag, 56);
  g.CountIfFailed(kStatLostFragments);
  e.Jmp(done);
}

// An iovec array at R3 of R4 entries (at most kMaxCapturedIovecs), limited by the return value
// when R5 is kSrcRet: each element (sub kVSubBase + 1 + i), then the array (sub kVSubBase). The
// array's length is left in R4 and its header fields set, for the caller's byte-range code.
void GenIovecs(Gen& g) {
  Emitter& e = g.e;
  Label few = e.NewLabel(), unlimited = e.NewLabel();
  e.Store(8, R9, kVArrAddr, R3);
  e.JmpIfImm(BPF_JLE, R4, static_cast<int32_t>(kMaxCapturedIovecs), few);
  e.MovImm(R4, static_cast<int32_t>(kMaxCapturedIovecs));
  e.Bind(few);
  e.Store(8, R9, kVArrCount, R4);
  e.StoreImm(8, R9, kVLimit, 0);
  e.JmpIfImm(BPF_JNE, R5, kSrcRet, unlimited);
  e.StoreImm(8, R9, kVLimit, 1);
  e.Load(8, R2, R9, kVRet);
  e.Store(8, R9, kVLeft, R2);
  e.Bind(unlimited);
  e.Mov(R1, R4);
  g.Loop(g.iovec_cb, &g.uses_iovec_cb);
  e.Load(2, R1, R9, kVSubBase);
  e.Store(2, R9, kScrFrag + 18, R1);
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  g.ArrayAsBytes(4);  // struct iovec: 16 bytes
}

// A byte range of any length R4 at R3 (header's arg, dir and sub set): capped, then inline when
// short, else through the fragment callback. Ends at `done`.
void GenAnyBuffer(Gen& g, Label done) {
  Emitter& e = g.e;
  Label long_buffer = e.NewLabel();
  e.Store(8, R9, kVAddr, R3);
  e.Store(8, R9, kScrFrag + 40, R3);
  e.Store(8, R9, kScrFrag + 24, R4);
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  g.CapWanted();
  e.JmpIfImm(BPF_JGE, R4, kFragBytes, long_buffer);
  GenShortBuffer(g, done);
  e.Bind(long_buffer);
  GenFragmentLoop(g);
  e.Jmp(done);
}

// struct msghdr at R3, as the ptrace backend captures it: the header (sub 0), the name (1), the
// control data (2), the iovec array (3) and its elements (4...). R5: the rule's length source
// (kSrcRet: what recvmsg returned limits the elements). Ends at `done`.
void GenMsghdr(Gen& g, Label done) {
  Emitter& e = g.e;
  Label hdr_done = e.NewLabel(), name_done = e.NewLabel(), ctl_done = e.NewLabel();
  e.Store(8, R9, kVArrCount, R5);  // kept across the buffers below
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kVMsg);
  e.MovImm(R2, 56);
  e.Call(BPF_FUNC_probe_read_user);
  e.Store(8, R9, kVArrAddr, R0);
  e.Load(8, R3, R9, kScrFrag + 40);
  e.MovImm(R4, 56);
  e.StoreImm(2, R9, kScrFrag + 18, 0);
  GenAnyBuffer(g, hdr_done);
  e.Bind(hdr_done);
  e.Load(8, R1, R9, kVArrAddr);
  e.JmpIfImm(BPF_JNE, R1, 0, done);
  {
    Label small = e.NewLabel();
    e.Load(8, R3, R9, kVMsg + 0);
    e.Load(4, R4, R9, kVMsg + 8);
    e.JmpIfImm(BPF_JEQ, R3, 0, name_done);
    e.JmpIfImm(BPF_JEQ, R4, 0, name_done);
    e.JmpIfImm(BPF_JLE, R4, 128, small);
    e.MovImm(R4, 128);
    e.Bind(small);
    e.StoreImm(2, R9, kScrFrag + 18, 1);
    GenAnyBuffer(g, name_done);
    e.Bind(name_done);
  }
  e.Load(8, R3, R9, kVMsg + 32);
  e.Load(8, R4, R9, kVMsg + 40);
  e.JmpIfImm(BPF_JEQ, R3, 0, ctl_done);
  e.JmpIfImm(BPF_JEQ, R4, 0, ctl_done);
  e.StoreImm(2, R9, kScrFrag + 18, 2);
  GenAnyBuffer(g, ctl_done);
  e.Bind(ctl_done);
  e.Load(8, R3, R9, kVMsg + 16);
  e.JmpIfImm(BPF_JEQ, R3, 0, done);
  e.Load(8, R4, R9, kVMsg + 24);
  e.Load(8, R5, R9, kVArrCount);
  e.StoreImm(8, R9, kVSubBase, 3);
  GenIovecs(g);
  e.Load(8, R3, R9, kVArrAddr);
  GenAnyBuffer(g, done);
}

// The start of a callback over an array at kVArrAddr: R6 = the loop index, R9 = scratch, and
// element R6 (`size` bytes, a power of two) copied to scratch + dst. Jumps to `fail` when the
// scratch or the element cannot be had.
void GenReadElement(Gen& g, int16_t dst, int size, Label fail) {
  Emitter& e = g.e;
  e.Mov(R6, R1);
  g.ZeroKey();
  g.Scratch(fail);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, dst);
  e.MovImm(R2, size);
  e.Load(8, R3, R9, kVArrAddr);
  e.Mov(R4, R6);
  e.AluImm(BPF_LSH, R4, size == 8 ? 3 : 4);
  e.Alu(BPF_ADD, R3, R4);
  e.Call(BPF_FUNC_probe_read_user);
  e.JmpIfImm(BPF_JNE, R0, 0, fail);
}

// bpf_loop callback over a pointer array (kVArrAddr): entry `index` is read and its string
// emitted as sub 1 + index. Stops at the NULL entry or an unreadable one.
void GenArrayCallback(Gen& g) {
  Emitter& e = g.e;
  Label stop = e.NewLabel(), next = e.NewLabel();
  e.BeginFunc(g.array_cb);
  GenReadElement(g, kVPtr, 8, stop);
  e.Load(8, R3, R9, kVPtr);
  e.JmpIfImm(BPF_JEQ, R3, 0, stop);
  e.Mov(R1, R6);
  e.AluImm(BPF_ADD, R1, 1);
  e.Store(8, R9, kVArrCount, R1);
  e.Store(2, R9, kScrFrag + 18, R1);
  e.Store(8, R9, kScrFrag + 40, R3);
  e.StoreImm(8, R9, kScrFrag + 32, 0);
  GenString(g, next);
  g.LoopEnd(next, stop);
}

// bpf_loop callback over an iovec array (kVArrAddr): element `index` (sub 1 + index) is captured
// through the fragment callback, as much of it as the return value leaves when kVLimit is set.
void GenIovecCallback(Gen& g) {
  Emitter& e = g.e;
  Label stop = e.NewLabel(), skip = e.NewLabel(), unlimited = e.NewLabel(), fits = e.NewLabel();
  e.BeginFunc(g.iovec_cb);
  GenReadElement(g, kVIov, 16, stop);
  e.Load(8, R4, R9, kVIov + 8);  // iov_len
  e.Load(8, R1, R9, kVLimit);
  e.JmpIfImm(BPF_JEQ, R1, 0, unlimited);
  e.Load(8, R1, R9, kVLeft);
  e.JmpIf(BPF_JLE, R4, R1, fits);
  e.Mov(R4, R1);
  e.Bind(fits);
  e.JmpIfImm(BPF_JEQ, R4, 0, stop);
  e.Bind(unlimited);
  e.Load(8, R3, R9, kVIov);  // iov_base
  e.JmpIfImm(BPF_JEQ, R3, 0, skip);
  {
    Label no_limit = e.NewLabel();
    e.Load(8, R1, R9, kVLimit);
    e.JmpIfImm(BPF_JEQ, R1, 0, no_limit);
    e.Load(8, R1, R9, kVLeft);
    e.Alu(BPF_SUB, R1, R4);
    e.Store(8, R9, kVLeft, R1);
    e.Bind(no_limit);
  }
  e.Mov(R1, R6);
  e.AluImm(BPF_ADD, R1, 1);
  e.Load(8, R2, R9, kVSubBase);
  e.Alu(BPF_ADD, R1, R2);
  e.Store(2, R9, kScrFrag + 18, R1);
  e.Store(8, R9, kScrFrag + 40, R3);
  e.Store(8, R9, kVAddr, R3);
  e.Store(8, R9, kScrFrag + 24, R4);
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  g.CapWanted();
  {
    Label long_element = e.NewLabel();
    e.JmpIfImm(BPF_JGE, R4, kFragBytes, long_element);
    GenShortBuffer(g, skip);
    e.Bind(long_element);
  }
  GenFragmentLoop(g);
  g.LoopEnd(skip, stop);
}

// One NUL-terminated string at R3 (up to 4096 bytes; 4098 read so "exactly 4096" and "longer"
// differ) as one fragment; the header's arg, dir, sub and addr are set. Ends at `done`.
void GenString(Gen& g, Label done) {
  Emitter& e = g.e;
  {
    Label ok = e.NewLabel(), s1 = e.NewLabel(), s2 = e.NewLabel();
    e.Mov(R1, R9);
    e.AluImm(BPF_ADD, R1, kScrData);
    e.MovImm(R2, kMaxCapturedString + 2);
    e.Call(BPF_FUNC_probe_read_user_str);
    e.JmpIfImm(BPF_JSGT, R0, 0, ok);
    g.MarkRetry();
    e.StoreImm(4, R9, kScrFrag + 20, kFragExplicit | kFragNotCaptured);
    e.StoreImm(8, R9, kScrFrag + 24, 0);
    e.StoreImm(4, R9, kScrFrag + 48, 0);
    g.Output(kScrFrag, 56);
    g.CountIfFailed(kStatLostFragments);
    e.Jmp(done);
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
    {
      // A path (nearly every string) is staged with its call (see WireBatch): header and
      // bytes copied from the scratch in one helper call, where a ring write costs more.
      Label direct = e.NewLabel();
      e.JmpIfImm(BPF_JGT, R7, kStageFragMax, direct);
      g.StagePlace();
      e.Mov(R1, R9);
      e.AluImm(BPF_ADD, R1, kStage + sizeof(WireBatch));
      e.Alu(BPF_ADD, R1, R4);
      e.Mov(R2, R7);
      e.AluImm(BPF_ADD, R2, sizeof(WireFragHeader));
      e.Mov(R3, R9);
      e.AluImm(BPF_ADD, R3, kScrFrag);
      e.Call(BPF_FUNC_probe_read_kernel);
      e.JmpIfImm(BPF_JNE, R0, 0, direct);
      g.CommitStagedFragment();
      e.Jmp(done);
      e.Bind(direct);
    }
    e.Mov(R3, R7);
    e.AluImm(BPF_ADD, R3, 56);
    g.OutputR3(kScrFrag);
    g.CountIfFailed(kStatLostFragments);
  }
  e.Jmp(done);
}

// The body of the rule callback: one capture rule at R8 (its 16 bytes), R9 = scratch. Ends at
// `next`.
void GenRule(Gen& g, Label next) {
  Emitter& e = g.e;
  const int16_t rb = 0;
  Label str = e.NewLabel(), have = e.NewLabel(), have_bytes = e.NewLabel();
  e.Load(1, R1, R8, rb + 0);
  e.JmpIfImm(BPF_JEQ, R1, kRuleNone, next);
  {
    Label any = e.NewLabel(), lock = e.NewLabel(), get = e.NewLabel();
    e.Load(1, R2, R8, rb + 4);
    e.JmpIfImm(BPF_JSET, R2, kRuleFcntlTakesLock, get);
    e.JmpIfImm(BPF_JSET, R2, kRuleFcntlReturnsLock, get);
    e.Jmp(any);
    e.Bind(get);
    e.Comment("fcntl: a struct flock only for the lock commands");
    e.Load(8, R3, R9, kScrEntry + 16 + 8);
    e.JmpIfImm(BPF_JEQ, R3, 5, lock);   // F_GETLK
    e.JmpIfImm(BPF_JEQ, R3, 36, lock);  // F_OFD_GETLK
    e.JmpIfImm(BPF_JSET, R2, kRuleFcntlReturnsLock, next);
    for (int cmd : {6, 7, 37, 38})  // F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW
      e.JmpIfImm(BPF_JEQ, R3, cmd, lock);
    e.Jmp(next);
    e.Bind(lock);
    e.Bind(any);
  }
  // addr = args[arg]
  e.Load(1, R2, R8, rb + 1);
  e.Store(1, R9, kScrFrag + 16, R2);
  e.AluImm(BPF_AND, R2, 7);
  e.AluImm(BPF_LSH, R2, 3);
  e.Mov(R3, R9);
  e.Alu(BPF_ADD, R3, R2);
  e.Load(8, R3, R3, kScrEntry + 16);
  e.JmpIfImm(BPF_JEQ, R3, 0, next);
  e.Load(2, R2, R8, rb + 6);  // addr_offset
  e.Alu(BPF_ADD, R3, R2);
  e.Store(8, R9, kVAddr, R3);
  e.Store(8, R9, kScrFrag + 40, R3);
  e.StoreImm(8, R9, kScrFrag + 32, 0);
  e.JmpIfImm(BPF_JEQ, R1, kRuleString, str);
  {
    Label bytes = e.NewLabel();
    e.JmpIfImm(BPF_JNE, R1, kRuleStrArray, bytes);
    e.Comment("a pointer array: each string, then the array itself");
    e.Store(8, R9, kVArrAddr, R3);
    e.StoreImm(8, R9, kVArrCount, 0);
    e.MovImm(R1, static_cast<int32_t>(kMaxCapturedArrayEntries));
    g.Loop(g.array_cb, &g.uses_array_cb);
    e.StoreImm(2, R9, kScrFrag + 18, 0);
    g.ArrayAsBytes(3);  // pointers: 8 bytes
    e.Jmp(have_bytes);
    e.Bind(bytes);
  }
  {
    Label bytes = e.NewLabel();
    e.JmpIfImm(BPF_JNE, R1, kRuleIovec, bytes);
    e.Comment("an iovec array: each element's bytes, then the array itself");
    e.Load(1, R1, R8, rb + 3);
    e.AluImm(BPF_AND, R1, 7);
    e.AluImm(BPF_LSH, R1, 3);
    e.Mov(R2, R9);
    e.Alu(BPF_ADD, R2, R1);
    e.Load(8, R4, R2, kScrEntry + 16);
    e.Load(1, R5, R8, rb + 2);
    e.StoreImm(8, R9, kVSubBase, 0);
    GenIovecs(g);
    e.Jmp(have_bytes);
    e.Bind(bytes);
    bytes = e.NewLabel();
    e.Load(1, R1, R8, rb + 0);
    e.JmpIfImm(BPF_JNE, R1, kRuleMsghdr, bytes);
    e.Comment("a struct msghdr and what it points to");
    e.Load(1, R5, R8, rb + 2);
    GenMsghdr(g, next);
    e.Bind(bytes);
  }

  {
    Label not_pointee = e.NewLabel();
    e.Load(1, R1, R8, rb + 0);
    e.JmpIfImm(BPF_JNE, R1, kRulePointee, not_pointee);
    e.Comment("what a pointer inside the struct points to");
    e.Load(8, R3, R9, kVAddr);
    e.Load(4, R1, R8, rb + 8);
    e.Alu(BPF_ADD, R3, R1);
    e.StoreImm(8, R10, kFpTmp, 0);
    e.Mov(R1, R10);
    e.AluImm(BPF_ADD, R1, kFpTmp);
    e.MovImm(R2, 8);
    e.Call(BPF_FUNC_probe_read_user);
    e.JmpIfImm(BPF_JNE, R0, 0, next);
    e.Load(8, R3, R10, kFpTmp);
    e.JmpIfImm(BPF_JEQ, R3, 0, next);
    e.Store(8, R9, kVAddr, R3);
    e.Store(8, R9, kScrFrag + 40, R3);
    e.Load(1, R1, R8, rb + 3);
    e.Store(2, R9, kScrFrag + 18, R1);
    e.Load(4, R4, R8, rb + 12);
    e.Store(8, R9, kScrFrag + 24, R4);
    e.Jmp(have_bytes);
    e.Bind(not_pointee);
  }
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
  e.Bind(have_bytes);
  g.CapWanted();
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  {
    Label long_buffer = e.NewLabel();
    e.JmpIfImm(BPF_JGE, R4, kFragBytes, long_buffer);
    GenShortBuffer(g, next);
    e.Bind(long_buffer);
  }
  e.Comment("one fragment per loop turn: ceil(length / kFragBytes)");
  GenFragmentLoop(g);
  e.Jmp(next);

  e.Bind(str);
  GenString(g, next);
}

// bpf_loop callback, once per rule slot (index 0..5) of the phase in kVPhase (0: enter, 1: exit).
// It only calls the rule function: a callback is verified again at every bpf_loop that names
// it, for each round until its states converge, where a global function is verified once.
// That halved the exit probe's load time, which every recording waits for.
void GenRuleCallback(Gen& g) {
  Emitter& e = g.e;
  e.BeginFunc(g.rule_cb);
  e.CallFunc(g.rule_fn);
  e.AluImm(BPF_AND, R0, 1);  // a callback returns 0 or 1, which the verifier must see
  e.Exit();
}

// The rule function: runs capture rule `index` (R1) of the phase in kVPhase; returns 1 to stop
// the loop. With kVRetryOnly, only the slots whose bit is in kVRetryMask run.
void GenRuleFunc(Gen& g) {
  Emitter& e = g.e;
  Label next = e.NewLabel(), stop = e.NewLabel(), go = e.NewLabel();
  e.BeginFunc(g.rule_fn, true);
  e.Mov(R6, R1);
  e.JmpIfImm(BPF_JGE, R6, kRulesPerPhase, stop);
  g.ZeroKey();
  g.Scratch(stop);
  e.StoreImm(8, R10, kFpTgid, 0);
  e.Load(4, R1, R9, kScrEntry + 8);
  e.Store(4, R10, kFpTgid, R1);
  g.Lookup(kMapSpec, kFpTgid);
  e.JmpIfImm(BPF_JEQ, R0, 0, stop);
  e.Mov(R8, R0);
  e.Load(8, R1, R9, kVPhase);
  e.AluImm(BPF_AND, R1, 1);
  e.AluImm(BPF_MUL, R1, kSpecExitOff - kSpecEnterOff);
  e.AluImm(BPF_ADD, R1, kSpecEnterOff);
  e.Alu(BPF_ADD, R8, R1);
  e.Mov(R1, R6);
  e.AluImm(BPF_LSH, R1, 4);
  e.Alu(BPF_ADD, R8, R1);
  e.MovImm(R2, 1);
  e.Alu(BPF_LSH, R2, R6);
  e.Store(4, R9, kVRule, R2);
  e.Load(8, R1, R9, kVRetryOnly);
  e.JmpIfImm(BPF_JEQ, R1, 0, go);
  e.Load(4, R1, R9, kVRetryMask);
  e.Alu(BPF_AND, R1, R2);
  e.JmpIfImm(BPF_JEQ, R1, 0, next);
  e.Bind(go);
  GenRule(g, next);
  g.LoopEnd(next, stop);
}

// The phase's one plain rule (SyscallSpec::enter_plain / exit_plain: a path, or a read's or a
// write's buffer), when what it names fits one fragment: written here as the rule function
// would write it, without the rule loop, its callback, the rule function's look-ups and its
// dispatch on the rule's kind (about 30 ns of the 90 that a 1-byte write's buffer cost), and a
// path without the copy through the scratch. Anything else (no such rule, a NULL or empty
// buffer, a longer or capped one, memory that cannot be read) goes to `general`, which does it
// all. R8 = spec, R9 = scratch; the fragment header's type, tid, dir and sub are set. Clobbers
// R0-R7.
void GenPlainRule(Gen& g, bool out, Label general, Label done) {
  Emitter& e = g.e;
  const int16_t rule = out ? kSpecExitOff : kSpecEnterOff;
  const int32_t most = static_cast<int32_t>(std::min<uint64_t>(kStageFragMax, Cap(g.o)));
  Label have_len = e.NewLabel(), string = e.NewLabel(), commit = e.NewLabel(),
        longer = e.NewLabel();
  e.Load(1, R1, R8, out ? kSpecExitPlainOff : kSpecEnterPlainOff);
  e.JmpIfImm(BPF_JEQ, R1, 0, general);
  e.Comment("one plain rule: staged here when what it names is short");
  e.Load(1, R3, R8, rule + 1);
  e.AluImm(BPF_AND, R3, 7);
  e.Mov(R2, R3);
  e.AluImm(BPF_LSH, R2, 3);
  e.Alu(BPF_ADD, R2, R9);
  e.Load(8, R6, R2, kScrEntry + 16);
  e.JmpIfImm(BPF_JEQ, R6, 0, general);
  e.Store(1, R9, kScrFrag + 16, R3);
  e.StoreImm(8, R9, kScrFrag + 32, 0);
  e.Store(8, R9, kScrFrag + 40, R6);
  e.Load(1, R1, R8, rule + 0);
  e.JmpIfImm(BPF_JEQ, R1, kRuleString, string);

  e.Load(8, R7, R9, kVRet);
  e.Load(1, R1, R8, rule + 2);
  e.JmpIfImm(BPF_JEQ, R1, kSrcRet, have_len);
  e.Load(1, R2, R8, rule + 3);
  e.AluImm(BPF_AND, R2, 7);
  e.AluImm(BPF_LSH, R2, 3);
  e.Alu(BPF_ADD, R2, R9);
  e.Load(8, R7, R2, kScrEntry + 16);
  e.Bind(have_len);
  e.JmpIfImm(BPF_JEQ, R7, 0, general);
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  e.Store(8, R9, kScrFrag + 24, R7);
  e.Store(4, R9, kScrFrag + 48, R7);
  e.JmpIfImm(BPF_JGT, R7, most, longer);
  g.StagePlace();
  g.StagingAt(R5);
  e.Mov(R2, R7);
  e.Mov(R3, R6);
  g.ReadUserBehindHeader(R5);
  e.JmpIfImm(BPF_JNE, R0, 0, general);
  e.Jmp(commit);

  e.Bind(longer);
  {
    // Up to one whole fragment, written as GenShortBuffer and the fragment callback write it:
    // through the scratch when shorter (after what is staged), into a reserved record when whole.
    Label whole = e.NewLabel();
    e.LdImm64(R1, Cap(g.o));
    e.JmpIf(BPF_JGT, R7, R1, general);
    e.JmpIfImm(BPF_JGT, R7, kFragBytes, general);
    e.JmpIfImm(BPF_JEQ, R7, kFragBytes, whole);
    e.Mov(R3, R6);
    g.DirectFragment(general);
    e.Jmp(done);
    e.Bind(whole);
    g.WholeFragment(R6, R7, done, general);
    e.Jmp(done);
  }

  e.Bind(string);
  e.Comment("a path: read straight into the staging area; a longer one takes the rule loop");
  g.StagePlace();
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kStage + sizeof(WireBatch) + sizeof(WireFragHeader));
  e.Alu(BPF_ADD, R1, R4);
  e.MovImm(R2, most + 1);
  e.Mov(R3, R6);
  e.Call(BPF_FUNC_probe_read_user_str);
  e.JmpIfImm(BPF_JSLE, R0, 0, general);
  e.JmpIfImm(BPF_JGT, R0, most, general);  // cut at the limit: perhaps longer
  e.Mov(R7, R0);
  e.AluImm(BPF_SUB, R7, 1);  // the NUL is not part of it
  e.StoreImm(4, R9, kScrFrag + 20, kFragExplicit);
  e.Store(8, R9, kScrFrag + 24, R7);
  e.Store(4, R9, kScrFrag + 48, R7);

  e.Bind(commit);
  e.Comment("the header, then the fragment counted as staged");
  e.Load(4, R4, R9, kVStaged);
  e.JmpIfImm(BPF_JGT, R4, kStageBytes - kStageFragRoom, general);  // never: for the verifier
  g.StagingAt(R5);
  g.CopyFragHeader(R5);
  g.CommitStagedFragment();
  e.Jmp(done);
}

void GenPhase(Gen& g, Phase phase) {
  Emitter& e = g.e;
  bool out = phase == Phase::kExit;
  e.StoreImm(4, R9, kScrFrag + 0, kRecFrag);
  e.StoreImm(8, R9, kScrFrag + 8, 0);
  e.StoreImm(1, R9, kScrFrag + 17, static_cast<int32_t>(out ? BufferDir::kOut : BufferDir::kIn));
  e.StoreImm(2, R9, kScrFrag + 18, 0);
  e.StoreImm(4, R9, kScrFrag + 52, 0);
  if (phase == Phase::kEnter) {
    e.Load(4, R1, R9, kScrFrag + 4);
    e.Store(4, R9, kVRetryTid, R1);
    e.StoreImm(4, R9, kVRetryMask, 0);
  }
  e.StoreImm(8, R9, kVPhase, out ? 1 : 0);
  e.StoreImm(8, R9, kVRetryOnly, phase == Phase::kEnterRetry ? 1 : 0);
  e.Load(4, R1, R10, kFpNr);
  e.Store(8, R9, kScrEntry + 8, R1);
  Label general = e.NewLabel(), done = e.NewLabel();
  if (phase != Phase::kEnterRetry) GenPlainRule(g, out, general, done);
  e.Bind(general);
  // Rules are packed from slot 0: loop over the ones set.
  if (phase == Phase::kEnter)
    e.Load(1, R1, R8, 1);
  else if (phase == Phase::kExit)
    e.Load(1, R1, R8, kSpecExitRulesOff);
  else
    e.MovImm(R1, kRulesPerPhase);
  g.Loop(g.rule_cb, &g.uses_rule_cb);
  if (phase == Phase::kEnterRetry) e.StoreImm(4, R9, kVRetryMask, 0);
  e.Bind(done);
}

}  // namespace fay::record::ebpf::gen
