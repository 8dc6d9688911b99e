// An x86-64 translation of the probe programs the interpreter runs (interpreter.h), for the
// common case: straight eBPF with helper calls. Each eBPF register lives in an x86 register, as
// in the kernel's JIT (r0 rax, r1-r5 rdi rsi rdx rcx r8 — the C calling convention's, so a
// helper's arguments are already in place — r6-r9 rbx r13 r14 r15, r10 rbp over a 512-byte
// stack). A program with anything else (BPF-to-BPF calls, bpf_loop, division, byte swaps, the
// rarer atomics) is not translated and runs in the interpreter; Translate says why.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "inproc/interpreter.h"

namespace fay::inproc {

class JitCode {
 public:
  // `imm64` holds each ld_imm64's value by the index of its first half, as Interpreter
  // resolved them; the program has passed Interpreter::Prepare.
  static Expected<std::unique_ptr<JitCode>> Translate(const std::vector<bpf_insn>& insns,
                                                      const std::vector<uint64_t>& imm64,
                                                      const Helpers& helpers);
  ~JitCode();
  JitCode(const JitCode&) = delete;
  JitCode& operator=(const JitCode&) = delete;

  uint64_t Run(uint64_t ctx) const { return entry_(ctx); }
  uint64_t (*entry() const)(uint64_t) { return entry_; }
  size_t size() const { return size_; }

  struct Key {
    explicit Key() = default;
  };
  JitCode(Key, void* code, size_t size);

 private:
  void* code_;
  size_t size_;
  uint64_t (*entry_)(uint64_t);
};

}  // namespace fay::inproc
