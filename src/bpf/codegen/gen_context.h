// State shared by the construct generators while one program is emitted.
//
// Register conventions (R0-R5 are clobbered by helper calls; R6-R9 survive them):
//   R6  the program context (tracepoint record or pt_regs)
//   R7  the result of the integer expression being generated
//   R8  the aggregate value / ring-buffer record being written
//   R9  the per-CPU scratch value: key at 0, entry copy, then string buffers
// Stack: fp-8 is a helper key slot, fp-16 holds the probe index, fp-24 the tgid during the scope
// check, fp-32 the current task (BTF pointer), fp-40 the raw tracepoint context; temporaries
// grow below.
#pragma once

#include <string>

#include "bpf/codegen/codegen.h"
#include "bpf/emitter.h"

namespace fay::bpf {

constexpr int16_t kFpKey = -8;
constexpr int16_t kFpProbe = -16;
constexpr int16_t kFpTgid = -24;
constexpr int16_t kFpTask = -32;
constexpr int16_t kFpCtx = -40;
constexpr int16_t kFpTempBase = -48;

class Gen {
 public:
  Gen(const Plan& plan, const CodegenOptions& options, const Attachment& attach,
      int scratch_entry_off)
      : plan(plan), options(options), attach(attach), entry_off(scratch_entry_off) {}

  const Plan& plan;
  const CodegenOptions& options;
  const Attachment& attach;
  Emitter e;
  const int entry_off;     // entry copy inside scratch
  bool has_entry = false;  // fields come from the scratch entry copy (exit programs)
  bool use_cache = false;  // aggregate through the per-CPU direct-mapped cache
  bool task_ptr = false;   // kFpTask holds the current task_struct (BTF pointer)
  bool raw_ctx = false;    // R6 is the record built in scratch; the real context is at kFpCtx
  int raw_record_off = 0;  // that record, inside scratch
  Label exit_label;

  // 8-byte stack temporaries, allocated and released in LIFO order.
  int16_t AllocTemp() {
    int16_t off = static_cast<int16_t>(kFpTempBase - 8 * temps_);
    ++temps_;
    if (8 * temps_ - kFpTempBase > 512) Fail("expression too deep for the 512-byte eBPF stack");
    return off;
  }
  void FreeTemp() { --temps_; }

  // String buffers inside the scratch value, released in LIFO order.
  int AllocStr() {
    if (strs_ >= kStrBufs) Fail("too many strings in one expression");
    return str_base_ + kStrBufSize * (strs_++ % kStrBufs);
  }
  void FreeStr() { --strs_; }
  void set_str_base(int base) { str_base_ = base; }

  void Fail(const std::string& msg) {
    if (status.ok()) status = Status(Code::kInvalidArgument, msg);
  }
  Status status;

  // Probe index known at compile time, or -1 when it is read from kFpProbe (raw syscalls).
  int static_probe() const { return attach.probe_index; }
  // The probe whose field layout describes the record (any probe in raw mode: args and ret sit
  // at the same offsets in every syscall record).
  int layout_probe() const { return attach.probe_index >= 0 ? attach.probe_index : 0; }

 private:
  int temps_ = 0;
  int strs_ = 0;
  int str_base_ = 0;
};

// Construct generators (one file each).
void GenIntExpr(Gen& g, const Expr& expr);                       // result in R7
void GenStringExpr(Gen& g, const Expr& expr, int off, int cap);  // NUL-terminated into R9+off
void GenField(Gen& g, const Expr& expr);                         // int fields into R7
void GenStringField(Gen& g, const Expr& expr, int off, int cap);
void GenStringCompare(Gen& g, const Expr& expr);  // ==, != (and globs) on strings; R7 = 0/1
void GenStringIn(Gen& g, const Expr& expr);       // string `in (...)`; R7 = 0/1
void GenBuildKey(Gen& g);                         // plan.keys into R9+0
void GenAggregate(Gen& g);                        // find/insert the key, update states
void GenSelect(Gen& g);                           // ring-buffer record of plan.keys
void GenBumpStat(Gen& g, StatIndex which);        // per-CPU counter += 1
void GenLog2(Gen& g, Reg v, Reg out);
// R0 = bpf_map_lookup_elem(map, fp-8): the key the caller stored in the helper key slot.
void GenLookupFpKey(Gen& g, int map);  // out = floor(log2(v)), v > 0; clobbers v, R5

}  // namespace fay::bpf
