// A small eBPF assembler: typed helpers for each instruction class, forward labels, map-fd
// relocations and per-instruction comments for `fay explain`. The code generator builds on it.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace fay::bpf {

enum Reg : uint8_t { R0 = 0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 };

struct Label {
  int id = -1;
};

// A ld_imm64 that must receive the fd of map `map_index` before loading.
struct MapReloc {
  size_t insn = 0;
  int map_index = 0;
};

class Emitter {
 public:
  // ALU64 (op is BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_MOD, BPF_AND, BPF_OR, BPF_XOR,
  // BPF_LSH, BPF_RSH, BPF_ARSH, BPF_NEG). `sdiv` selects signed div/mod (off = 1, cpu v4).
  void Alu(uint8_t op, Reg dst, Reg src, bool sdiv = false) {
    Raw(BPF_ALU64 | BPF_X | op, dst, src, sdiv ? 1 : 0, 0);
  }
  void AluImm(uint8_t op, Reg dst, int32_t imm) { Raw(BPF_ALU64 | BPF_K | op, dst, 0, 0, imm); }
  void Mov(Reg dst, Reg src) { Raw(BPF_ALU64 | BPF_X | BPF_MOV, dst, src, 0, 0); }
  void MovImm(Reg dst, int32_t imm) { Raw(BPF_ALU64 | BPF_K | BPF_MOV, dst, 0, 0, imm); }
  // Sign-extends the low 32 bits of dst (cpu v4 movsx).
  void SignExtend32(Reg dst) { Raw(BPF_ALU64 | BPF_X | BPF_MOV, dst, dst, 32, 0); }
  void LdImm64(Reg dst, uint64_t v) {
    Raw(BPF_LD | BPF_DW | BPF_IMM, dst, 0, 0, static_cast<int32_t>(v & 0xffffffffu));
    Raw(0, 0, 0, 0, static_cast<int32_t>(v >> 32));
  }
  void LdMap(Reg dst, int map_index) {
    relocs_.push_back({insns_.size(), map_index});
    // The immediate names the map slot until the loader patches in the fd; explain shows it.
    Raw(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, map_index);
    Raw(0, 0, 0, 0, 0);
  }
  // size is 1, 2, 4 or 8 bytes.
  void Load(int size, Reg dst, Reg base, int16_t off) {
    Raw(BPF_LDX | BPF_MEM | SizeBits(size), dst, base, off, 0);
  }
  void Store(int size, Reg base, int16_t off, Reg src) {
    Raw(BPF_STX | BPF_MEM | SizeBits(size), base, src, off, 0);
  }
  void StoreImm(int size, Reg base, int16_t off, int32_t imm) {
    Raw(BPF_ST | BPF_MEM | SizeBits(size), base, 0, off, imm);
  }
  // *(u64 *)(base + off) += src, atomically (for shared counters).
  void AtomicAdd64(Reg base, int16_t off, Reg src) {
    Raw(BPF_STX | BPF_ATOMIC | BPF_DW, base, src, off, BPF_ADD);
  }
  // R0 = *(u32 *)(base + off); if it was R0's old value, *(u32 *)(base + off) = src. Atomic.
  void AtomicCmpXchg32(Reg base, int16_t off, Reg src) {
    Raw(BPF_STX | BPF_ATOMIC | BPF_W, base, src, off, BPF_CMPXCHG);
  }
  // *(u64 *)(base + off) op= src, atomically; op is BPF_ADD, BPF_AND, BPF_OR or BPF_XOR.
  void Atomic64(uint8_t op, Reg base, int16_t off, Reg src) {
    Raw(BPF_STX | BPF_ATOMIC | BPF_DW, base, src, off, op);
  }
  // src = *(u64 *)(base + off), and *(u64 *)(base + off) = the old src, atomically.
  void AtomicXchg64(Reg base, int16_t off, Reg src) {
    Raw(BPF_STX | BPF_ATOMIC | BPF_DW, base, src, off, BPF_XCHG);
  }
  void Call(int32_t helper) { Raw(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
  // A call of the kernel function whose vmlinux BTF id is `btf_id` (a kfunc).
  void CallKfunc(int32_t btf_id) { Raw(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_KFUNC_CALL, 0, btf_id); }
  // dst = address of the function starting at `fn` (a callback for bpf_loop and the like).
  void LdFunc(Reg dst, Label fn) {
    imm_fixups_.push_back({insns_.size(), fn.id});
    Raw(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_FUNC, 0, 0);
    Raw(0, 0, 0, 0, 0);
  }
  // Starts a subprogram at the current instruction and binds `fn` there. Everything emitted
  // before the first call belongs to the main program; each subprogram ends where the next
  // starts. The loader describes each start to the kernel (BTF func_info).
  // A `global` subprogram is `int f(u64)`, verified once on its own rather than at each call
  // (a callback is `int f(u64 index, void *ctx)`).
  void BeginFunc(Label fn, bool global = false) {
    Bind(fn);
    func_starts_.push_back(insns_.size());
    func_global_.push_back(global);
  }
  // A BPF-to-BPF call of the subprogram bound at `fn`; R1-R5 are its arguments.
  void CallFunc(Label fn) {
    imm_fixups_.push_back({insns_.size(), fn.id});
    Raw(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, 0);
  }
  void Exit() { Raw(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

  Label NewLabel() {
    label_pos_.push_back(-1);
    return Label{static_cast<int>(label_pos_.size()) - 1};
  }
  void Bind(Label l) { label_pos_[l.id] = static_cast<int>(insns_.size()); }
  void Jmp(Label l) { JumpTo(BPF_JMP | BPF_JA, 0, 0, 0, l); }
  // op: BPF_JEQ, BPF_JNE, BPF_JGT, BPF_JGE, BPF_JLT, BPF_JLE, BPF_JSGT, BPF_JSGE, BPF_JSLT,
  // BPF_JSLE, BPF_JSET.
  void JmpIf(uint8_t op, Reg a, Reg b, Label l) { JumpTo(BPF_JMP | BPF_X | op, a, b, 0, l); }
  void JmpIfImm(uint8_t op, Reg a, int32_t imm, Label l) {
    JumpTo(BPF_JMP | BPF_K | op, a, 0, imm, l);
  }

  // Attaches a note to the next instruction emitted; shown by `fay explain`.
  void Comment(std::string text) { comments_.push_back({insns_.size(), std::move(text)}); }

  size_t size() const { return insns_.size(); }

  // Resolves labels. Fails on an unbound label or a jump out of range.
  Expected<std::vector<bpf_insn>> Finish() const;

  const std::vector<MapReloc>& relocs() const { return relocs_; }
  const std::vector<size_t>& func_starts() const { return func_starts_; }
  const std::vector<bool>& func_global() const { return func_global_; }
  const std::vector<std::pair<size_t, std::string>>& comments() const { return comments_; }

 private:
  static uint8_t SizeBits(int size) {
    switch (size) {
      case 1:
        return BPF_B;
      case 2:
        return BPF_H;
      case 4:
        return BPF_W;
      default:
        return BPF_DW;
    }
  }
  void Raw(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst;
    i.src_reg = src;
    i.off = off;
    i.imm = imm;
    insns_.push_back(i);
  }
  void JumpTo(uint8_t code, uint8_t dst, uint8_t src, int32_t imm, Label l) {
    fixups_.push_back({insns_.size(), l.id});
    Raw(code, dst, src, 0, imm);
  }

  std::vector<bpf_insn> insns_;
  std::vector<int> label_pos_;
  std::vector<std::pair<size_t, int>> fixups_;
  std::vector<std::pair<size_t, int>> imm_fixups_;  // LdFunc: offset in imm, not off
  std::vector<size_t> func_starts_;
  std::vector<bool> func_global_;
  std::vector<MapReloc> relocs_;
  std::vector<std::pair<size_t, std::string>> comments_;
};

}  // namespace fay::bpf
