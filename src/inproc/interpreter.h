// An eBPF interpreter, to run a query's uprobe program inside the traced process (the probe that
// the in-process runtime calls from a patched function, docs/INPROCESS.md). The program is the
// one fay compiles for the kernel and the kernel's verifier accepts, so the interpreter trusts
// it as the kernel's JIT does: Prepare checks only that every instruction is one it knows,
// every jump lands inside, and every helper and map it names is provided.
//
// Registers hold real addresses: the stack is an array of this process, a map value is where
// the map keeps it. Helpers, maps included, are the runtime's (Helpers below); bpf_loop is the
// interpreter's own, since its callback is bytecode.
#pragma once

#include <linux/bpf.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace fay::inproc {

// A helper: the five argument registers in, R0 out.
using HelperFn = uint64_t (*)(void* env, const uint64_t args[5]);

// An array map's layout, for the JIT to inline its lookups (as the kernel's JIT does): value i
// of slot s is at base + s * table_bytes (per-slot maps) + i * entry_bytes.
struct ArrayLayout {
  uint8_t* base = nullptr;
  uint64_t table_bytes = 0, entry_bytes = 0;
  uint32_t max_entries = 0, slots = 0;
  bool per_slot = false;
};

struct Helpers {
  std::array<HelperFn, 256> fns{};  // by BPF_FUNC_* id; null: not provided
  void* env = nullptr;
  // Optional: the layout of the array map whose address a map reference stands for (false for
  // any other map), and the calling thread's slot as an offset from the thread pointer (%fs:0)
  // to a uint32_t. With both, the JIT inlines lookups in those arrays.
  std::function<bool(uint64_t map_address, ArrayLayout* out)> array_layout;
  int64_t slot_tls_offset = 0;
};

class Interpreter {
 public:
  // `map_address(index)` gives what a map reference (ld_imm64 BPF_PSEUDO_MAP_FD, its immediate
  // the map's slot as fay's Emitter leaves it) stands for: the address the map's helpers take.
  // `translate`: run it as x86-64 code (jit.h) when the translation takes it; otherwise, or when
  // it does not, interpreted.
  static Expected<Interpreter> Prepare(std::vector<bpf_insn> insns,
                                       const std::function<uint64_t(int map_index)>& map_address,
                                       Helpers helpers, bool translate = false);

  // Runs the program with R1 = ctx; returns R0. Safe from many threads at once: each run has
  // its own registers and stack.
  uint64_t Run(uint64_t ctx) const { return jit_entry_ ? jit_entry_(ctx) : Interpret(ctx); }
  // Runs it interpreted even when translated (the tests compare the two).
  uint64_t Interpret(uint64_t ctx) const;

  size_t size() const { return insns_.size(); }
  bool translated() const { return jit_ != nullptr; }
  // Why it was not translated (empty when it was, or when not asked).
  const std::string& not_translated() const { return not_translated_; }

 private:
  Interpreter() = default;
  // Runs from instruction `pc` with R1..R5 given, until its frame exits; returns R0.
  uint64_t Exec(size_t pc, const uint64_t args[5], int depth) const;

  std::vector<bpf_insn> insns_;
  std::vector<uint64_t> imm64_;  // resolved ld_imm64 values, by the index of their first half
  Helpers helpers_;
  std::shared_ptr<const class JitCode> jit_;
  uint64_t (*jit_entry_)(uint64_t) = nullptr;  // jit_'s code, called inline by Run
  std::string not_translated_;
};

// What bpf_loop's callback argument holds in a register: the callback's first instruction,
// tagged so that nothing else can pass for it.
inline constexpr uint64_t kFuncTag = 0xfa7f'0000'0000'0000ull;

}  // namespace fay::inproc
