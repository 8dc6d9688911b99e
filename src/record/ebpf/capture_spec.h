// The eBPF recorder's capture rules, as data the probes read from a map. They are derived from the
// syscall table's argument specs by the same rules as schema/syscall_capture.cc (which the ptrace
// recorder runs), so both backends copy the same bytes. The probes hold no per-syscall code: at
// entry and at exit they walk the (at most six) rules of the call's map slot.
//
// Beyond flat buffers and strings, rules name the composite arguments the probes walk with
// bpf_loop: argv/envp pointer arrays, iovec arrays and struct msghdr; and fcntl's struct flock
// is captured only for the lock commands.
#pragma once

#include <cstdint>
#include <string_view>

namespace fay::record::ebpf {

// Map layout: one SyscallSpec per syscall number, kMaxNr slots.
inline constexpr int kMaxNr = 512;

enum RuleKind : uint8_t {
  kRuleNone = 0,
  kRuleString = 1,    // NUL-terminated, up to 4096 bytes (PATH_MAX)
  kRuleBytes = 2,     // a byte range whose length the rule computes
  kRuleStrArray = 3,  // a NULL-terminated array of string pointers (argv, envp)
  kRuleIovec = 4,     // an iovec array of args[len_arg] entries, then each element's bytes
  kRuleMsghdr = 5,    // a struct msghdr, its name, control data, iovec array and elements
  // What a pointer inside the struct at args[arg] points to (PointeeRules): the u64 at offset
  // `fixed`, then `max` bytes there, as element `len_arg` of the argument. Last in a phase.
  kRulePointee = 6,
};

enum RuleSource : uint8_t {
  kSrcFixed = 0,   // `fixed`
  kSrcArg = 1,     // args[len_arg]
  kSrcRet = 2,     // the return value
  kSrcArgPtr = 3,  // the u32 that args[len_arg] points to
};

enum RuleFlags : uint8_t {
  kRuleU32 = 1u << 0,        // the source is a 32-bit quantity: drop the high half
  kRuleFdSetBits = 1u << 1,  // the source counts bits: min(n, 1 << 20), rounded up to 64-bit words
  kRuleSkipZero = 1u << 2,   // a length of 0 captures nothing (no empty buffer)
  kRuleFcntlTakesLock = 1u << 3,    // only when fcntl's command passes a struct flock
  kRuleFcntlReturnsLock = 1u << 4,  // only when it returns one (F_GETLK, F_OFD_GETLK)
};

// 16 bytes; the probes read it field by field at these offsets.
struct Rule {
  uint8_t kind = kRuleNone;  // +0
  uint8_t arg = 0;           // +1: argument holding the address
  uint8_t src = kSrcFixed;   // +2
  uint8_t len_arg = 0;       // +3
  uint8_t flags = 0;         // +4
  uint8_t mul = 1;           // +5: bytes per element, applied last
  uint16_t addr_offset = 0;  // +6: added to the address (a StackRule's place above the stack)
  uint32_t fixed = 0;        // +8
  uint32_t max = 0;          // +12: 0 = no cap (applied before mul)
};
static_assert(sizeof(Rule) == 16);

inline constexpr int kRulesPerPhase = 6;

struct SyscallSpec {
  uint8_t record = 0;       // +0: 1 = record this syscall
  uint8_t enter_rules = 0;  // +1: how many `enter` rules are set (0: no work at entry)
  // +2, +3: 1 when the phase has one rule and it is plain (see IsPlainRule): the probes then
  // stage a short buffer themselves, without the rule loop.
  uint8_t enter_plain = 0;
  uint8_t exit_plain = 0;
  uint8_t exit_rules = 0;  // +4: how many `exit` rules are set (0: no work at exit)
  // +5: 1 when the exit rules run only for a call a signal cut short (-EINTR, or
  // -ERESTART_RESTARTBLOCK), not on success: the sleeps' time left (OutOnlyWhenInterrupted)
  uint8_t exit_when_interrupted = 0;
  uint16_t exit_pad = 0;
  Rule enter[kRulesPerPhase];  // +8: buffers going into the kernel (BufferDir::kIn)
  Rule exit[kRulesPerPhase];   // +104: buffers coming out, when ret >= 0 (BufferDir::kOut)
};
static_assert(sizeof(SyscallSpec) == 200);
inline constexpr int kSpecEnterOff = 8;
inline constexpr int kSpecExitOff = 8 + 16 * kRulesPerPhase;

inline constexpr int kSpecEnterPlainOff = 2;
inline constexpr int kSpecExitPlainOff = 3;
inline constexpr int kSpecExitRulesOff = 4;
inline constexpr int kSpecExitWhenInterruptedOff = 5;

// A string, or a byte range at an argument as long as another argument or the return value
// says, with no flag, cap or multiplier: paths, and read's and write's buffers, the commonest
// there are.
bool IsPlainRule(const Rule& r);

// The rules of syscall nr (record left 0; the caller sets it from -e).
SyscallSpec BuildSyscallSpec(int nr);

// Whether syscall nr has a memory argument this backend does not capture yet (see above).
bool HasUncapturedMemory(int nr);

// Reference evaluation of one rule's length, exactly as the probe computes it (before the
// --max-buffer cap). `argptr_value` stands for the u32 read at args[len_arg] for kSrcArgPtr.
// Returns false when the rule captures nothing.
bool RuleLength(const Rule& r, const uint64_t args[6], int64_t ret, uint32_t argptr_value,
                uint64_t* length);

}  // namespace fay::record::ebpf
