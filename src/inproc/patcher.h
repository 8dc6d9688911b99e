// Entry probes patched into functions of the calling process: the function's first bytes jump
// to a trampoline that saves the argument registers, calls the probe's handler with them, puts
// them back, runs the displaced instructions and returns into the function. This is the
// mechanism; what a handler runs (the query's compiled probe) is the runtime's business.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "inproc/code_block.h"

namespace fay::inproc {

// The argument registers as the function received them (System V AMD64), in the order the
// trampoline leaves them on the stack: x86-64 struct pt_regs's own order from r11 to di, so
// that `(const uint8_t*)regs - kPtRegsR11` reads as a pt_regs for those nine fields.
struct EntryRegs {
  uint64_t r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi;
  uint64_t Arg(int i) const {
    const uint64_t args[6] = {rdi, rsi, rdx, rcx, r8, r9};
    return i >= 0 && i < 6 ? args[i] : 0;
  }
};
static_assert(sizeof(EntryRegs) == 72);
// Where struct pt_regs keeps r11, and di past it: the span EntryRegs mirrors.
inline constexpr int kPtRegsR11 = 48;
inline constexpr int kPtRegsDiEnd = 120;

// Called on every entry to the function, on the thread that calls it. It must not unwind.
using EntryHandler = void (*)(void* context, const EntryRegs* regs);

// What a return probe's entry keeps for its return, in the layout of the entry record fay's
// programs keep under the thread's id (the time, then the six argument registers): the runtime
// serves it to them from here, with no map update at the entry and no lookup at the return.
struct EntryRecord {
  uint64_t ns;  // the entry's time, from the clock set by SetEntryClock
  uint64_t args[6];
};
static_assert(sizeof(EntryRecord) == 56);

// The clock an entry record's time is read from: CLOCK_MONOTONIC until set. The runtime sets
// the one its programs read, so that a latency is the difference of two readings of one clock.
void SetEntryClock(uint64_t (*now)());

// Called when the function returns, with what it returned (rax) and the record of the entry it
// returns from (null when the probe keeps none). Return probes keep the caller's return address on
// a per-thread shadow stack and make the function return to a landing stub first, so recursion is
// exact. A longjmp out of a probed function skips its return: the next return of a probed frame
// below it finds it on the way and drops it, unreported but counted (ReturnProbeStats::skipped);
// until then it takes a place on the shadow stack. An exception unwinding through a probed frame
// finds the landing stub as its return address, which has no unwind information: do not put return
// probes on functions an exception can pass through (the kernel's uretprobes share the limit). `sp`
// is the stack pointer after the return, as a kernel uretprobe's context has it: the entry's
// plus 8.
using ReturnHandler = void (*)(void* context, uint64_t ret, const EntryRecord* entry, uint64_t sp);

// Return probes a thread can have pending at once (nested and recursive calls); deeper calls
// run unprobed and are counted in ReturnProbeStats.
inline constexpr int kShadowDepth = 256;

struct ReturnProbeStats {
  uint64_t too_deep = 0;  // returns not probed: the shadow stack was full
  uint64_t skipped = 0;   // returns never seen: a longjmp passed them
};
// Totals over every thread since the process started.
ReturnProbeStats ReturnStats();

struct ReturnProbe;  // patcher.cc

// One patched function. Destroying it (or Remove) puts the original bytes back.
class EntryPatch {
 public:
  // Patches the function at `address`, whose first bytes are readable for `size` bytes (the
  // whole function when known: the branch check looks at all of it). No other thread may run
  // the first bytes of the function meanwhile (the caller stops them, or none runs yet).
  static Expected<std::unique_ptr<EntryPatch>> Install(uint64_t address, size_t size,
                                                       EntryHandler handler, void* context);
  // A return probe: `on_return` runs when the function returns (see ReturnHandler); `on_entry`
  // may be null.
  // `entry_record` false: on_return gets no EntryRecord, and the entry saves a clock read.
  static Expected<std::unique_ptr<EntryPatch>> InstallReturn(uint64_t address, size_t size,
                                                             EntryHandler on_entry,
                                                             ReturnHandler on_return, void* context,
                                                             bool entry_record = true);
  ~EntryPatch();
  EntryPatch(const EntryPatch&) = delete;
  EntryPatch& operator=(const EntryPatch&) = delete;

  // Puts the original bytes back. The trampoline stays mapped until destruction, for a thread
  // that may still be inside it.
  Status Remove();
  uint64_t address() const { return address_; }
  size_t displaced() const { return original_.size(); }

  // Only Install makes one (Key is its own).
  struct Key {
    explicit Key() = default;
  };
  EntryPatch(Key, uint64_t address, std::vector<uint8_t> original, CodeBlock block);

 private:
  uint64_t address_;
  std::vector<uint8_t> original_;
  CodeBlock block_;
  bool installed_ = true;
  // A return probe's handlers, which its trampoline points to.
  std::unique_ptr<ReturnProbe> return_probe_;
};

}  // namespace fay::inproc
