#include "record/ebpf/probes.h"

#include <linux/bpf.h>
#include <signal.h>

#include <algorithm>

#include "bpf/emitter.h"
#include "record/ebpf/capture_spec.h"
#include "schema/syscall_capture.h"
#include "schema/syscall_event.h"
#include "schema/syscall_values.h"

namespace fay::record::ebpf {
namespace {

using bpf::Emitter;
using bpf::Label;
using namespace bpf;  // registers

// Stack slots.
constexpr int16_t kFpZero = -8, kFpTgid = -16, kFpNr = -24, kFpTmp = -40, kFpVal = -48,
                  kFpCtx = -56, kFpTask = -64, kFpStaged = -72, kFpOutLen = -80,
                  kFpStagedFrags = -88;

// Scratch value layout.
constexpr int16_t kScrEntry = 128;  // [8] nr, [16] args[6] (+16 spare: args[idx & 7] stays in)
constexpr int16_t kScrRegs = 208;   // pt_regs r10..orig_ax (72 bytes)
constexpr int16_t kVAddr = 288, kVWant = 296, kVOff = 304, kVRet = 312, kVCount = 320;
// A buffer going into the kernel may sit on a page not yet faulted in (a library's string
// constants), which a probe cannot read. The kernel faults it in when the call reads it, so
// the exit probe reads such buffers again: the thread and the rules (bits) that failed.
constexpr int16_t kVRetryTid = 328, kVRetryMask = 332, kVRule = 336;
// Non-zero once a buffer went to the ring in whole fragments: the exit probe then looks at the
// ring's fill (see GenSysExit), as it does every kWakeCheckEvery calls.
constexpr int16_t kVDirect = 340;
// Pointer arrays (argv, envp): the array's address, entries seen, the current entry.
constexpr int16_t kVArrAddr = 344, kVArrCount = 352, kVPtr = 360;
constexpr int16_t kVEntryNs = 368, kVSlot = 376;  // from the thread's CallSlot; 1: slot held
// iovec arrays: whether the return value limits the elements, the bytes it leaves, one iovec.
constexpr int16_t kVLimit = 384, kVLeft = 392, kVIov = 408;
// The rule callback's phase (0 enter, 1 exit) and whether it only re-reads failed rules.
constexpr int16_t kVPhase = 400, kVRetryOnly = 424;
// The sub number an iovec array takes (its elements follow), and a struct msghdr's copy.
constexpr int16_t kVSubBase = 432, kVMsg = 448;
// Calls staged on this CPU (see WireBatch), and whether the exit probe's call is staged.
constexpr int16_t kVStaged = kStagedBytesOffset, kVStagedCalls = kStagedCallsOffset,
                  kVStagedFrags = kStagedFragsOffset;
constexpr int16_t kStage = kStageOffset;
// The ring this CPU writes to: its current thread's (see ProbeOptions::rings). Set by every
// program before it writes, and left for sched_switch, which flushes what that thread staged.
constexpr int16_t kVRing = kStagedRingOffset;
// The exit probe's call flags: kEventNoExit when the thread has a SIGKILL pending (see GenSysExit).
constexpr int16_t kVCallFlags = kVRing + 4;
static_assert(kScrRegs + 72 <= kVRing && kVCallFlags + 4 <= kVAddr);
static_assert(kStage + sizeof(WireBatch) + kStageBytes <= kScratchSize);
// Room a staged short fragment may take (header, data, padding).
constexpr int32_t kStageFragRoom = sizeof(WireFragHeader) + kStageFragMax + 8;
constexpr int16_t kScrFrag = 512;  // WireFragHeader + data; also WireProc
constexpr int16_t kScrData = kScrFrag + 56;
static_assert(kScrData + kMaxCapturedString + 2 <= kScratchSize);
static_assert(kScrFrag + 288 <= kScratchSize);
// Where each argument register sits in the pt_regs copy (r10 r9 r8 ax cx dx si di orig_ax).
constexpr int16_t kArgInCopy[6] = {56, 48, 40, 0, 16, 8};
constexpr int16_t kOrigAxInCopy = 64;
// Return records between two looks at the ring's fill level.
constexpr int kWakeCheckEvery = 64;

struct Gen {
  Emitter e;
  const ProbeOptions& o;
  Label exit_label;
  Label frag_cb;  // bound when a rule first needs it
  Label frag_fn;  // the fragment callback's body (see GenFragCallback)
  Label array_cb;
  Label iovec_cb;
  Label rule_cb;
  Label rule_fn;
  bool uses_rule_cb = false;
  bool uses_frag_cb = false;
  bool uses_array_cb = false;
  bool uses_iovec_cb = false;
  Label flush_fn;
  bool uses_flush = false;
  // The program's ctx is a BTF-typed raw tracepoint's: ctx[0] is a struct pt_regs pointer the
  // program may load through (kept at fp + kFpCtx).
  bool typed_ctx = false;
  explicit Gen(const ProbeOptions& opt) : o(opt) {
    exit_label = e.NewLabel();
    frag_cb = e.NewLabel();
    frag_fn = e.NewLabel();
    array_cb = e.NewLabel();
    iovec_cb = e.NewLabel();
    rule_cb = e.NewLabel();
    rule_fn = e.NewLabel();
    flush_fn = e.NewLabel();
  }

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
  // fp-8 = 0 (the key of single-value maps).
  void ZeroKey() { e.StoreImm(8, R10, kFpZero, 0); }
  // R1 = the ring this CPU writes to now (scratch kVRing; R9 = scratch). With one ring, a
  // constant, as before rings could be several.
  void LdRing() {
    if (o.rings <= 1) {
      e.LdMap(R1, kMapRing);
      return;
    }
    Label done = e.NewLabel();
    e.Load(4, R1, R9, kVRing);
    for (uint32_t i = 1; i < o.rings; ++i) {
      Label next = e.NewLabel();
      e.JmpIfImm(BPF_JNE, R1, static_cast<int32_t>(i), next);
      e.LdMap(R1, RingSlot(i));
      e.Jmp(done);
      e.Bind(next);
    }
    e.LdMap(R1, kMapRing);
    e.Bind(done);
  }
  // kVRing = reg % rings (clobbers reg). Nothing with one ring.
  void SetRing(Reg reg) {
    if (o.rings <= 1) return;
    e.AluImm(BPF_MOD, reg, static_cast<int32_t>(o.rings));
    e.Store(4, R9, kVRing, reg);
  }
  // R9 = per-CPU scratch; fp-8 must hold 0.
  void Scratch(Label fail) {
    Lookup(kMapScratch, kFpZero);
    e.JmpIfImm(BPF_JEQ, R0, 0, fail);
    e.Mov(R9, R0);
  }
  // Adds one to per-CPU counter `slot`. R9 = scratch. Clobbers R1.
  void Count(int slot) {
    e.MovImm(R1, 1);
    e.AtomicAdd64(R9, static_cast<int16_t>(kStatsOffset + 8 * slot), R1);
  }
  // Adds the u32 at fp + fp_n to per-CPU counter `slot`. R9 = scratch. Clobbers R1.
  void CountN(int slot, int16_t fp_n) {
    e.Load(4, R1, R10, fp_n);
    e.AtomicAdd64(R9, static_cast<int16_t>(kStatsOffset + 8 * slot), R1);
  }
  // Writes the records staged on this CPU into the ring as one kRecBatch record (see
  // GenFlushFunc). `flags_in_r8`: the wakeup flags are in R8, else none. Clobbers R0-R5.
  void FlushStaged(bool flags_in_r8 = false) {
    if (flags_in_r8)
      e.Mov(R1, R8);
    else
      e.MovImm(R1, BPF_RB_NO_WAKEUP);
    e.CallFunc(flush_fn);
    uses_flush = true;
  }
  // R4 = where the next staged fragment goes (after writing what is staged, when a fragment of
  // kStageFragMax bytes would not fit). Clobbers R0-R5.
  void StagePlace() {
    Label room = e.NewLabel();
    e.Load(4, R4, R9, kVStaged);
    e.JmpIfImm(BPF_JLE, R4, kStageBytes - kStageFragRoom, room);
    FlushStaged();
    e.MovImm(R4, 0);
    e.Bind(room);
  }
  // Counts the fragment of R7 data bytes just written at the staging place as staged.
  void CommitStagedFragment() {
    e.Load(4, R1, R9, kVStaged);
    e.Mov(R2, R7);
    e.AluImm(BPF_ADD, R2, sizeof(WireFragHeader) + 7);
    e.AluImm(BPF_AND, R2, -8);
    e.Alu(BPF_ADD, R1, R2);
    e.Store(4, R9, kVStaged, R1);
    e.Load(2, R1, R9, kVStagedFrags);
    e.AluImm(BPF_ADD, R1, 1);
    e.Store(2, R9, kVStagedFrags, R1);
  }
  // dst = the staging place R4 (see StagePlace) as a pointer into the scratch.
  void StagingAt(Reg dst) {
    e.Mov(dst, R9);
    e.AluImm(BPF_ADD, dst, kStage + sizeof(WireBatch));
    e.Alu(BPF_ADD, dst, R4);
  }
  // The fragment header in the scratch, copied to dst. Clobbers R1.
  void CopyFragHeader(Reg dst) {
    for (int w = 0; w < 7; ++w) {
      e.Load(8, R1, R9, static_cast<int16_t>(kScrFrag + 8 * w));
      e.Store(8, dst, static_cast<int16_t>(8 * w), R1);
    }
  }
  // bpf_probe_read_user of R2 bytes at user address R3 into the data behind the fragment
  // header at dst; R0 is its result.
  void ReadUserBehindHeader(Reg dst) {
    e.Mov(R1, dst);
    e.AluImm(BPF_ADD, R1, sizeof(WireFragHeader));
    e.Call(BPF_FUNC_probe_read_user);
  }
  // Counts a failed ring-buffer output (R0 < 0).
  void CountIfFailed(int slot) {
    Label ok = e.NewLabel();
    e.JmpIfImm(BPF_JSGE, R0, 0, ok);
    Count(slot);
    e.Bind(ok);
  }
  // ringbuf_output(scratch + off, size in R3 already set), never waking the consumer: it
  // polls, and return records wake it when the ring fills (see GenSysExit). `flags_in_r8`:
  // the wakeup flags are in R8 instead.
  void OutputR3(int16_t off, bool flags_in_r8 = false) {
    e.StoreImm(4, R9, kVDirect, 1);  // the exit probe then looks at the ring's fill
    e.Store(8, R10, kFpOutLen, R3);
    FlushStaged();  // what this CPU staged goes first
    e.Load(8, R3, R10, kFpOutLen);
    LdRing();
    e.Mov(R2, R9);
    e.AluImm(BPF_ADD, R2, off);
    if (flags_in_r8)
      e.Mov(R4, R8);
    else
      e.MovImm(R4, BPF_RB_NO_WAKEUP);
    e.Call(BPF_FUNC_ringbuf_output);
  }
  void Output(int16_t off, int32_t size) {
    e.MovImm(R3, size);
    OutputR3(off);
  }
  // The ring's consumer was woken by the record just written: its flag (kMapWake) is cleared,
  // so that the calls after this one do not wake it again. R9 = scratch. Clobbers R0-R5.
  void ClearConsumerWake() {
    Label done = e.NewLabel();
    e.StoreImm(8, R10, kFpTmp, 0);
    if (o.rings > 1) {
      e.Load(4, R1, R9, kVRing);
      e.Store(4, R10, kFpTmp, R1);
    }
    Lookup(kMapWake, kFpTmp);
    e.JmpIfImm(BPF_JEQ, R0, 0, done);
    e.StoreImm(8, R0, 0, 0);
    e.Bind(done);
  }
  // Submits the record at R1 with the wakeup flags in R8, and clears the consumer's flag when
  // they force a wakeup. Clobbers R0-R5.
  void SubmitR8() {
    Label sent = e.NewLabel();
    e.Mov(R2, R8);
    e.Call(BPF_FUNC_ringbuf_submit);
    e.JmpIfImm(BPF_JNE, R8, BPF_RB_FORCE_WAKEUP, sent);
    ClearConsumerWake();
    e.Bind(sent);
  }
  // R0 = ringbuf_reserve(size); jumps to `fail` (after counting the loss) when full.
  void Reserve(int32_t size, int stat, Label fail) {
    Label ok = e.NewLabel();
    FlushStaged();  // what this CPU staged goes first
    LdRing();
    e.MovImm(R2, size);
    e.MovImm(R3, 0);
    e.Call(BPF_FUNC_ringbuf_reserve);
    e.JmpIfImm(BPF_JNE, R0, 0, ok);
    Count(stat);
    e.Jmp(fail);
    e.Bind(ok);
  }
  // The R7 bytes at R3 (fewer than kFragBytes; the fragment header set) read into the scratch
  // and written to the ring, after what is staged, behind their header. `unreadable` when the
  // read fails.
  void DirectFragment(Label unreadable) {
    e.Mov(R1, R9);
    e.AluImm(BPF_ADD, R1, kScrData);
    e.Mov(R2, R7);
    e.Call(BPF_FUNC_probe_read_user);
    e.JmpIfImm(BPF_JNE, R0, 0, unreadable);
    e.Mov(R3, R7);
    e.AluImm(BPF_ADD, R3, sizeof(WireFragHeader));
    OutputR3(kScrFrag);
    CountIfFailed(kStatLostFragments);
  }
  // A whole fragment at `src`, read straight into a record reserved for it (at `rec`) behind
  // its header (set). `full` when the ring has no room (counted); `unreadable` when the read
  // fails (the record discarded). Both registers are callee-saved ones.
  void WholeFragment(Reg src, Reg rec, Label full, Label unreadable) {
    Label read = e.NewLabel();
    Reserve(sizeof(WireFragHeader) + kFragBytes, kStatLostFragments, full);
    e.Mov(rec, R0);
    CopyFragHeader(rec);
    e.MovImm(R2, kFragBytes);
    e.Mov(R3, src);
    ReadUserBehindHeader(rec);
    e.JmpIfImm(BPF_JEQ, R0, 0, read);
    e.Mov(R1, rec);
    e.MovImm(R2, BPF_RB_NO_WAKEUP);
    e.Call(BPF_FUNC_ringbuf_discard);
    e.Jmp(unreadable);
    e.Bind(read);
    e.Mov(R1, rec);
    e.MovImm(R2, BPF_RB_NO_WAKEUP);
    e.Call(BPF_FUNC_ringbuf_submit);
    e.StoreImm(4, R9, kVDirect, 1);
  }
  // Copies the user registers r10..orig_ax of the current task (R7) into the scratch. The
  // typed pointer bpf_task_pt_regs returns is read with plain loads, which costs less than a
  // probe_read of the raw tracepoint's untyped one.
  void CopyRegs() {
    if (typed_ctx) {
      e.Load(8, R1, R10, kFpCtx);
      e.Load(8, R0, R1, 0);
    } else {
      e.Mov(R1, R7);
      e.Call(BPF_FUNC_task_pt_regs);
    }
    for (int w = 0; w < 9; ++w) {
      e.Load(8, R1, R0, static_cast<int16_t>(56 + 8 * w));
      e.Store(8, R9, static_cast<int16_t>(kScrRegs + 8 * w), R1);
    }
  }
  // The arguments, in order, where the capture rules read them.
  void ArgsToEntry() {
    for (int i = 0; i < 6; ++i) {
      e.Load(8, R1, R9, static_cast<int16_t>(kScrRegs + kArgInCopy[i]));
      e.Store(8, R9, static_cast<int16_t>(kScrEntry + 16 + 8 * i), R1);
    }
  }
  // Remembers that the current rule (kVRule) could not read its memory. Clobbers R1, R2.
  void MarkRetry() {
    e.Load(4, R1, R9, kVRetryMask);
    e.Load(4, R2, R9, kVRule);
    e.Alu(BPF_OR, R1, R2);
    e.Store(4, R9, kVRetryMask, R1);
  }
  void Finish(ProgramSpec* spec, bpf_prog_type type, const char* name, Status* st);
};

uint64_t Cap(const ProbeOptions& o) {
  return o.max_buffer;
}

// bpf_loop callback: emits the next fragment of the buffer described in the scratch (kVAddr,
// kVWant, kVOff and the fragment header). A whole fragment is read straight into the ring; the
// last, shorter one goes through the scratch. Returns 1 to stop.
void GenString(Gen& g, Label done);
void GenShortBuffer(Gen& g, Label done);
void GenIovecs(Gen& g);
void GenAnyBuffer(Gen& g, Label done);
void GenMsghdr(Gen& g, Label done);
void GenIovecCallback(Gen& g);
void GenRuleCallback(Gen& g);
void GenRuleFunc(Gen& g);

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
  e.LdFunc(R2, g.frag_cb);
  g.uses_frag_cb = true;
  e.MovImm(R3, 0);
  e.MovImm(R4, 0);
  e.Call(BPF_FUNC_loop);
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
  e.LdFunc(R2, g.iovec_cb);
  g.uses_iovec_cb = true;
  e.MovImm(R3, 0);
  e.MovImm(R4, 0);
  e.Call(BPF_FUNC_loop);
  e.Load(2, R1, R9, kVSubBase);
  e.Store(2, R9, kScrFrag + 18, R1);
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  e.Load(8, R3, R9, kVArrAddr);
  e.Store(8, R9, kVAddr, R3);
  e.Store(8, R9, kScrFrag + 40, R3);
  e.Load(8, R4, R9, kVArrCount);
  e.AluImm(BPF_LSH, R4, 4);
  e.Store(8, R9, kScrFrag + 24, R4);
}

// A byte range of any length R4 at R3 (header's arg, dir and sub set): capped, then inline when
// short, else through the fragment callback. Ends at `done`.
void GenAnyBuffer(Gen& g, Label done) {
  Emitter& e = g.e;
  Label capped = e.NewLabel(), long_buffer = e.NewLabel();
  e.Store(8, R9, kVAddr, R3);
  e.Store(8, R9, kScrFrag + 40, R3);
  e.Store(8, R9, kScrFrag + 24, R4);
  e.StoreImm(4, R9, kScrFrag + 20, 0);
  e.LdImm64(R1, Cap(g.o));
  e.JmpIf(BPF_JLE, R4, R1, capped);
  e.Mov(R4, R1);
  e.Bind(capped);
  e.Store(8, R9, kVWant, R4);
  e.StoreImm(8, R9, kVOff, 0);
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
  e.Bind(next);
  e.MovImm(R0, 0);
  e.Exit();
  e.Bind(stop);
  e.MovImm(R0, 1);
  e.Exit();
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
  {
    Label capped = e.NewLabel();
    e.LdImm64(R1, Cap(g.o));
    e.JmpIf(BPF_JLE, R4, R1, capped);
    e.Mov(R4, R1);
    e.Bind(capped);
  }
  e.Store(8, R9, kVWant, R4);
  e.StoreImm(8, R9, kVOff, 0);
  {
    Label long_element = e.NewLabel();
    e.JmpIfImm(BPF_JGE, R4, kFragBytes, long_element);
    GenShortBuffer(g, skip);
    e.Bind(long_element);
  }
  GenFragmentLoop(g);
  e.Bind(skip);
  e.MovImm(R0, 0);
  e.Exit();
  e.Bind(stop);
  e.MovImm(R0, 1);
  e.Exit();
}

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

// One capture rule (slot `i` of the phase at spec offset `base`). R8 = spec, R9 = scratch; the
// fragment header's type, tid, seq and dir are already set.
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
    e.LdFunc(R2, g.array_cb);
    g.uses_array_cb = true;
    e.MovImm(R3, 0);
    e.MovImm(R4, 0);
    e.Call(BPF_FUNC_loop);
    e.StoreImm(2, R9, kScrFrag + 18, 0);
    e.Load(8, R3, R9, kVArrAddr);
    e.Store(8, R9, kVAddr, R3);
    e.Store(8, R9, kScrFrag + 40, R3);
    e.Load(8, R4, R9, kVArrCount);
    e.AluImm(BPF_LSH, R4, 3);
    e.Store(8, R9, kScrFrag + 24, R4);
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
  e.Bind(next);
  e.MovImm(R0, 0);
  e.Exit();
  e.Bind(stop);
  e.MovImm(R0, 1);
  e.Exit();
}

enum class Phase { kEnter, kExit, kEnterRetry };

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
    e.Load(4, R1, R8, 4);
  else
    e.MovImm(R1, kRulesPerPhase);
  e.LdFunc(R2, g.rule_cb);
  g.uses_rule_cb = true;
  e.MovImm(R3, 0);
  e.MovImm(R4, 0);
  e.Call(BPF_FUNC_loop);
  if (phase == Phase::kEnterRetry) e.StoreImm(4, R9, kVRetryMask, 0);
  e.Bind(done);
}

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

// Sets (op BPF_OR) or clears (BPF_AND) state bits `bits` of the tgid at fp-16.
void GenChangeState(Gen& g, uint8_t op, int32_t bits) {
  Emitter& e = g.e;
  GenStateWord(g);
  e.MovImm(R1, bits);
  e.Alu(BPF_LSH, R1, R2);
  if (op == BPF_AND) e.AluImm(BPF_XOR, R1, -1);
  e.Atomic64(op, R0, 0, R1);
}

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
  e.AluImm(BPF_LSH, R1, 4);
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

// The rest of the WireCall at R6 (identity written): times (scratch kVEntryNs, kVExitNs),
// number (fp-24), arguments (kScrEntry), return value (kVRet), comm from R7; then submits it
// with the wakeup flags in R8. kStageOnly: R6 is a staging place (see WireBatch), and nothing is
// written to the ring.
enum class CallOut { kSubmit, kStageOnly };

void GenCallBody(Gen& g, CallOut how = CallOut::kSubmit) {
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
  e.Load(8, R1, R9, kVRet);
  e.JmpIfImm(BPF_JSLT, R1, 0, record);
  e.Load(4, R1, R8, 4);
  e.JmpIfImm(BPF_JEQ, R1, 0, record);
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
  Label thread = e.NewLabel(), go = e.NewLabel();
  GenIds(g);
  GenLoadState(g);
  e.JmpIfImm(BPF_JSET, R1, kActive, go);
  e.Jmp(g.exit_label);
  e.Bind(go);
  g.Scratch(g.exit_label);
  e.Load(4, R1, R10, kFpNr);  // the current thread's ring
  g.SetRing(R1);
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
  e.Load(8, R3, R6, 16);
  e.AluImm(BPF_ADD, R3, g.o.binprm_filename);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, kScrFrag + 32);
  e.MovImm(R2, 8);
  e.Call(BPF_FUNC_probe_read_kernel);
  e.JmpIfImm(BPF_JNE, R0, 0, g.exit_label);
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

}  // namespace

Expected<ProbeSet> GenerateProbes(const ProbeOptions& o) {
  if (o.task_comm < 0 || o.task_pid < 0 || o.task_tgid < 0 || o.task_real_parent < 0 ||
      o.task_exit_code < 0 || o.binprm_filename < 0 || o.task_cred < 0 || o.cred_uid < 0)
    return Error(Code::kUnsupported, "the eBPF recorder needs task_struct offsets from BTF");
  ProbeSet set;
  Status st;
  struct Role {
    void (*gen)(Gen&);
    ProgramSpec* out;
    const char* name;
    int btf_id;  // typed raw tracepoint, or 0
  };
  const Role roles[] = {
      {GenSysEnter, &set.sys_enter, "fay_rec_enter", o.sys_enter_btf_id},
      {GenSysExit, &set.sys_exit, "fay_rec_exit", o.sys_exit_btf_id},
      {GenFork, &set.fork, "fay_rec_fork", 0},
      {GenExec, &set.exec, "fay_rec_exec", 0},
      {GenExit, &set.exit, "fay_rec_pexit", 0},
      {GenSwitch, &set.sched_switch, "fay_rec_switch", 0},
  };
  for (const Role& r : roles) {
    Gen g(o);
    g.typed_ctx = r.btf_id > 0;
    r.gen(g);
    g.Finish(r.out, g.typed_ctx ? BPF_PROG_TYPE_TRACING : BPF_PROG_TYPE_RAW_TRACEPOINT, r.name,
             &st);
    if (g.typed_ctx) {
      r.out->attach_btf_id = static_cast<uint32_t>(r.btf_id);
      r.out->expected_attach_type = BPF_TRACE_RAW_TP;
    }
  }
  if (!st.ok()) return st;
  return set;
}

}  // namespace fay::record::ebpf
