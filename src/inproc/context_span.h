// Which bytes of its context a program reads. fay's programs copy the context to R6 first
// (bpf/codegen) and read it through R6 only. An in-process entry program that reads pt_regs
// only where the trampoline's saved registers mirror it (EntryRegs) runs on them directly, with
// no pt_regs built for each call.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <optional>

namespace fay::inproc {

// The 8-byte fields of an x86-64 struct pt_regs (21 of them) the program loads, bit i for the
// field at 8 * i: when its first instruction is `r6 = r1`, R1 is overwritten before any use
// or branch, R6 is never written again, never
// escapes (but to bpf_get_attach_cookie, which does not read it in the process), and every load
// from it lies within pt_regs. Anything it cannot follow answers nullopt.
inline constexpr int kPtRegsFields = 21;
std::optional<uint32_t> ContextFieldsRead(const bpf_insn* insns, uint32_t n);
// The fields wholly within the byte range [lo, hi), as ContextFieldsRead numbers them.
constexpr uint32_t FieldsWithin(int lo, int hi) {
  return ((1u << (hi / 8)) - 1) & ~((1u << ((lo + 7) / 8)) - 1);
}
// Whether every field it loads lies within [lo, hi).
bool ReadsContextOnlyIn(const bpf_insn* insns, uint32_t n, int lo, int hi);

}  // namespace fay::inproc
