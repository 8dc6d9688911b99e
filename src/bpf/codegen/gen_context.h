// State shared by the construct generators while one program is emitted.
//
// Register conventions (R0-R5 are clobbered by helper calls; R6-R9 survive them):
//   R6  the program context (tracepoint record or pt_regs)
//   R7  the result of the integer expression being generated
//   R8  the aggregate value / ring-buffer record being written
//   R9  the per-CPU scratch value: key at 0, entry copy, then string buffers
// Stack: fp-8 is a helper key slot, fp-16 holds the probe index, fp-24 the tgid during the scope
// check, fp-32 the current task (BTF pointer), fp-40 the raw tracepoint context, fp-56..-41 the
// entry map's key; temporaries grow below.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bpf/codegen/codegen.h"
#include "bpf/emitter.h"

namespace fay::bpf {

constexpr int16_t kFpKey = -8;
constexpr int16_t kFpProbe = -16;
constexpr int16_t kFpTgid = -24;
constexpr int16_t kFpTask = -32;
constexpr int16_t kFpCtx = -40;
constexpr int16_t kFpEntryKey = -56;  // 16 bytes: {thread id, a uprobe's stack pointer or 0}
constexpr int16_t kFpTempBase = -64;

// A str() read at entry (Plan::entry_strings): its bytes sit in the entry value at `off`.
struct EntryString {
  const Expr* expr = nullptr;
  int off = 0;  // from the start of the entry value
  int len = 0;  // bytes read, NUL included; the slot takes len rounded up to 8
};

// The entry value: u64 entry time, six u64 arguments, then the entry strings.
struct EntryLayout {
  std::vector<EntryString> strings;
  int size = kEntryValueSize;
};
EntryLayout LayOutEntry(const Plan& plan);

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
  EntryLayout entry;       // what the entry copy holds
  bool has_entry = false;  // fields come from the scratch entry copy (exit programs)
  bool use_cache = false;  // aggregate through the per-CPU direct-mapped cache
  bool task_ptr = false;   // kFpTask holds the current task_struct (BTF pointer)
  bool raw_ctx = false;    // R6 is the record built in scratch; the real context is at kFpCtx
  int raw_record_off = 0;  // that record, inside scratch
  Label exit_label;
  // The table being aggregated: the plan's own (0), or plan.tables[table - 1].
  int table = 0;
  std::vector<bool> table_caches;  // GeneratedQuery::table_caches
  const Plan& agg() const {
    return table > 0 ? *plan.tables[static_cast<size_t>(table - 1)] : plan;
  }
  int map(int base) const { return TableMap(base, table); }
  // Where each of plan.state_reads sits on the stack once GenStateReads has read it; a string
  // value is copied into scratch instead, at state_strs[read] (-1 for an int).
  std::vector<int16_t> state_slots;
  std::vector<int> state_strs;
  int state_str_base = 0;  // that copy's area in scratch, past the raw record

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

  // The entry string a str() call can use instead of reading user memory, if any.
  const EntryString* FindEntryString(const Expr& call) const {
    for (const EntryString& s : entry.strings)
      if (s.expr->text == call.text && s.expr->type == call.type) return &s;
    return nullptr;
  }

  void Fail(const std::string& msg) {
    if (status.ok()) status = Status(Code::kInvalidArgument, msg);
  }
  Status status;

  // Probe index known at compile time, or -1 when it is read from kFpProbe (raw syscalls).
  int static_probe() const { return attach.probe_index; }

 private:
  int temps_ = 0;
  int strs_ = 0;
  int str_base_ = 0;
};

// Construct generators (one file each).
void GenIntExpr(Gen& g, const Expr& expr);                       // result in R7
void GenStringExpr(Gen& g, const Expr& expr, int off, int cap);  // NUL-terminated into R9+off
void GenField(Gen& g, const Expr& expr);                         // int fields into R7
// The probes whose events this program sees: its own, those of a uprobe_multi program, or
// every syscall probe of a shared raw syscalls program.
std::vector<int> ProgramProbes(const Gen& g);
// Calls body(field, probe) once per distinct layout of the field `expr` among the program's
// probes, dispatching on the probe index at run time when the layouts differ.
void GenPerProbe(Gen& g, const Expr& expr, const std::function<void(const Field&, int)>& body);
void GenStringField(Gen& g, const Expr& expr, int off, int cap);
void GenStringCompare(Gen& g, const Expr& expr);  // ==, != (and globs) on strings; R7 = 0/1
void GenStringIn(Gen& g, const Expr& expr);       // string `in (...)`; R7 = 0/1
void GenBuildKey(Gen& g);                         // plan.keys into R9+0
void GenAggregate(Gen& g);                        // find/insert the key, update states
void GenSelect(Gen& g);                           // ring-buffer record of plan.keys
void GenBumpStat(Gen& g, StatIndex which);        // per-CPU counter += 1
void GenSample(Gen& g);                           // exit unless the event is sampled
void GenRemember(Gen& g);                         // a state pipeline's store (state_gen.cc)
void GenStateReads(Gen& g);                       // plan.state_reads onto the stack
// The tail of a test that jumps to `yes` when true: R7 = 0 where the code falls through to
// here, R7 = 1 at `yes`.
void GenBoolTail(Gen& g, Label yes);
void GenLog2(Gen& g, Reg v, Reg out);
// R0 = bpf_map_lookup_elem(map, fp-8): the key the caller stored in the helper key slot.
void GenLookupFpKey(Gen& g, int map);  // out = floor(log2(v)), v > 0; clobbers v, R5

}  // namespace fay::bpf
