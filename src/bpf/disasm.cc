#include "bpf/disasm.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace fay::bpf {

namespace {

// Opcodes newer than the installed uapi header; values are ABI and never change.
constexpr uint8_t kMemSx = 0x80;  // BPF_MEMSX: sign-extending load (cpu v4)
constexpr int32_t kFetch = 0x01;  // BPF_FETCH
constexpr int32_t kXchg = 0xe0 | kFetch;
constexpr int32_t kCmpXchg = 0xf0 | kFetch;

#define FAY_HELPER_NAME(x) #x
constexpr const char* kHelperNames[] = {__BPF_FUNC_MAPPER(FAY_HELPER_NAME)};
#undef FAY_HELPER_NAME
constexpr size_t kHelperCount = sizeof(kHelperNames) / sizeof(kHelperNames[0]);

const char* SizeName(uint8_t size_bits, bool is_signed) {
  switch (size_bits) {
    case BPF_B:
      return is_signed ? "s8" : "u8";
    case BPF_H:
      return is_signed ? "s16" : "u16";
    case BPF_W:
      return is_signed ? "s32" : "u32";
    default:
      return is_signed ? "s64" : "u64";
  }
}

const char* AluOp(uint8_t op, bool is_signed) {
  switch (op) {
    case BPF_ADD:
      return "+=";
    case BPF_SUB:
      return "-=";
    case BPF_MUL:
      return "*=";
    case BPF_DIV:
      return is_signed ? "s/=" : "/=";
    case BPF_OR:
      return "|=";
    case BPF_AND:
      return "&=";
    case BPF_LSH:
      return "<<=";
    case BPF_RSH:
      return ">>=";
    case BPF_MOD:
      return is_signed ? "s%=" : "%=";
    case BPF_XOR:
      return "^=";
    case BPF_MOV:
      return "=";
    case BPF_ARSH:
      return "s>>=";
    default:
      return nullptr;
  }
}

const char* JmpOp(uint8_t op) {
  switch (op) {
    case BPF_JEQ:
      return "==";
    case BPF_JGT:
      return ">";
    case BPF_JGE:
      return ">=";
    case BPF_JSET:
      return "&";
    case BPF_JNE:
      return "!=";
    case BPF_JSGT:
      return "s>";
    case BPF_JSGE:
      return "s>=";
    case BPF_JLT:
      return "<";
    case BPF_JLE:
      return "<=";
    case BPF_JSLT:
      return "s<";
    case BPF_JSLE:
      return "s<=";
    default:
      return nullptr;
  }
}

std::string Mem(uint8_t size_bits, bool is_signed, int reg, int16_t off) {
  return fmt::format("*({} *)(r{} {:+d})", SizeName(size_bits, is_signed), reg, off);
}

std::string Unknown(const bpf_insn& in) {
  return fmt::format("<unknown opcode {:#04x}>", in.code);
}

std::string Alu(const bpf_insn& in) {
  const bool is64 = BPF_CLASS(in.code) == BPF_ALU64;
  const char r = is64 ? 'r' : 'w';
  const uint8_t op = BPF_OP(in.code);
  const bool x = BPF_SRC(in.code) == BPF_X;
  if (op == BPF_NEG) return fmt::format("{0}{1} = -{0}{1}", r, in.dst_reg);
  if (op == BPF_END) {
    int bits = in.imm;
    if (is64) return fmt::format("r{0} = bswap{1} r{0}", in.dst_reg, bits);
    return fmt::format("r{0} = {1}{2} r{0}", in.dst_reg, x ? "be" : "le", bits);
  }
  if (op == BPF_MOV && x && in.off != 0)
    return fmt::format("{0}{1} = (s{2}){0}{3}", r, in.dst_reg, in.off, in.src_reg);
  const char* sym = AluOp(op, (op == BPF_DIV || op == BPF_MOD) && in.off == 1);
  if (sym == nullptr) return Unknown(in);
  if (x) return fmt::format("{0}{1} {2} {0}{3}", r, in.dst_reg, sym, in.src_reg);
  return fmt::format("{}{} {} {}", r, in.dst_reg, sym, in.imm);
}

std::string Atomic(const bpf_insn& in) {
  const uint8_t sz = BPF_SIZE(in.code);
  const bool dw = sz == BPF_DW;
  const std::string mem = fmt::format("({} *)(r{} {:+d})", SizeName(sz, false), in.dst_reg, in.off);
  const char* prefix = dw ? "atomic64" : "atomic";
  const char r = dw ? 'r' : 'w';
  if (in.imm == kXchg)
    return fmt::format("{0}{1} = {2}_xchg({3}, {0}{1})", r, in.src_reg, prefix, mem);
  if (in.imm == kCmpXchg)
    return fmt::format("{0}0 = {1}_cmpxchg({2}, {0}0, {0}{3})", r, prefix, mem, in.src_reg);
  const int32_t op = in.imm & ~kFetch;
  const char* name = op == BPF_ADD   ? "add"
                     : op == BPF_AND ? "and"
                     : op == BPF_OR  ? "or"
                     : op == BPF_XOR ? "xor"
                                     : nullptr;
  if (name == nullptr) return Unknown(in);
  if (in.imm & kFetch)
    return fmt::format("{0}{1} = {2}_fetch_{3}({4}, {0}{1})", r, in.src_reg, prefix, name, mem);
  return fmt::format("lock *{} {} {}{}", mem, AluOp(static_cast<uint8_t>(op), false), r,
                     in.src_reg);
}

// The instruction a jump or pseudo call lands on, or -1 for anything else.
long JumpTarget(const bpf_insn& in, size_t index) {
  const uint8_t cls = BPF_CLASS(in.code);
  if (cls != BPF_JMP && cls != BPF_JMP32) return -1;
  const uint8_t op = BPF_OP(in.code);
  if (op == BPF_EXIT) return -1;
  if (op == BPF_CALL)
    return in.src_reg == BPF_PSEUDO_CALL ? static_cast<long>(index) + 1 + in.imm : -1;
  if (op == BPF_JA && cls == BPF_JMP32) return static_cast<long>(index) + 1 + in.imm;
  return static_cast<long>(index) + 1 + in.off;
}

std::string Target(long delta, const std::map<long, int>* labels, long target) {
  std::string s = fmt::format("{:+d}", delta);
  if (labels != nullptr) {
    auto it = labels->find(target);
    if (it != labels->end()) s += fmt::format(" <L{}>", it->second);
  }
  return s;
}

std::string Jmp(const bpf_insn& in, size_t index, const std::map<long, int>* labels) {
  const uint8_t cls = BPF_CLASS(in.code);
  const uint8_t op = BPF_OP(in.code);
  const long target = JumpTarget(in, index);
  if (op == BPF_EXIT) return "exit";
  if (op == BPF_CALL) {
    if (in.src_reg == BPF_PSEUDO_CALL) return "call " + Target(in.imm, labels, target);
    if (in.src_reg == BPF_PSEUDO_KFUNC_CALL) return fmt::format("call kfunc#{}", in.imm);
    std::string name = HelperName(in.imm);
    return name.empty() ? fmt::format("call helper#{}", in.imm)
                        : fmt::format("call {}#{}", name, in.imm);
  }
  if (op == BPF_JA) {
    const long delta = cls == BPF_JMP32 ? in.imm : in.off;
    return fmt::format("goto{} {}", cls == BPF_JMP32 ? "l" : "", Target(delta, labels, target));
  }
  const char* sym = JmpOp(op);
  if (sym == nullptr) return Unknown(in);
  const char r = cls == BPF_JMP32 ? 'w' : 'r';
  std::string rhs =
      BPF_SRC(in.code) == BPF_X ? fmt::format("{}{}", r, in.src_reg) : fmt::format("{}", in.imm);
  return fmt::format("if {}{} {} {} goto {}", r, in.dst_reg, sym, rhs,
                     Target(in.off, labels, target));
}

std::string Insn(const bpf_insn& in, const bpf_insn* next, size_t index,
                 const std::map<long, int>* labels) {
  const uint8_t cls = BPF_CLASS(in.code);
  const uint8_t mode = BPF_MODE(in.code);
  const uint8_t sz = BPF_SIZE(in.code);
  switch (cls) {
    case BPF_ALU:
    case BPF_ALU64:
      return Alu(in);
    case BPF_LDX:
      if (mode == BPF_MEM || mode == kMemSx)
        return fmt::format("r{} = {}", in.dst_reg, Mem(sz, mode == kMemSx, in.src_reg, in.off));
      return Unknown(in);
    case BPF_STX:
      if (mode == BPF_MEM)
        return fmt::format("{} = r{}", Mem(sz, false, in.dst_reg, in.off), in.src_reg);
      if (mode == BPF_ATOMIC) return Atomic(in);
      return Unknown(in);
    case BPF_ST:
      if (mode == BPF_MEM)
        return fmt::format("{} = {}", Mem(sz, false, in.dst_reg, in.off), in.imm);
      return Unknown(in);
    case BPF_LD:
      if (mode == BPF_IMM && sz == BPF_DW) {
        const uint32_t hi = next != nullptr ? static_cast<uint32_t>(next->imm) : 0;
        if (in.src_reg == BPF_PSEUDO_MAP_FD)
          return fmt::format("r{} = map[{}] ll", in.dst_reg, in.imm);
        if (in.src_reg == BPF_PSEUDO_MAP_VALUE)
          return fmt::format("r{} = map[{}] + {} ll", in.dst_reg, in.imm, hi);
        const uint64_t v = (static_cast<uint64_t>(hi) << 32) | static_cast<uint32_t>(in.imm);
        if (in.src_reg != 0)
          return fmt::format("r{} = pseudo{}[{:#x}] ll", in.dst_reg, in.src_reg, v);
        return fmt::format("r{} = {:#x} ll", in.dst_reg, v);
      }
      if (mode == BPF_ABS) return fmt::format("r0 = *({} *)skb[{}]", SizeName(sz, false), in.imm);
      if (mode == BPF_IND)
        return fmt::format("r0 = *({} *)skb[r{} + {}]", SizeName(sz, false), in.src_reg, in.imm);
      return Unknown(in);
    case BPF_JMP:
    case BPF_JMP32:
      return Jmp(in, index, labels);
    default:
      return Unknown(in);
  }
}

bool IsLdImm64(const bpf_insn& in) {
  return in.code == (BPF_LD | BPF_DW | BPF_IMM);
}

}  // namespace

std::string HelperName(int32_t id) {
  if (id <= 0 || static_cast<size_t>(id) >= kHelperCount) return "";
  return kHelperNames[id];
}

std::string DisassembleInsn(const bpf_insn& insn, const bpf_insn* next, size_t index) {
  return Insn(insn, next, index, nullptr);
}

std::string Disassemble(const std::vector<bpf_insn>& insns,
                        const std::vector<std::pair<size_t, std::string>>& comments) {
  // Labels are numbered in address order so the listing reads top to bottom.
  std::set<long> targets;
  for (size_t i = 0; i < insns.size(); ++i) {
    long t = JumpTarget(insns[i], i);
    if (t >= 0) targets.insert(t);
    if (IsLdImm64(insns[i])) ++i;
  }
  std::map<long, int> labels;
  for (long t : targets) labels.emplace(t, static_cast<int>(labels.size()));

  // A comment on the second half of a ld_imm64 belongs to its first half.
  std::map<size_t, std::string> notes;
  for (const auto& [at, text] : comments) {
    size_t idx = at;
    if (idx > 0 && idx < insns.size() && IsLdImm64(insns[idx - 1])) --idx;
    std::string& n = notes[idx];
    if (!n.empty()) n += "; ";
    n += text;
  }

  constexpr size_t kCommentColumn = 30;
  std::string out;
  for (size_t i = 0; i < insns.size(); ++i) {
    if (auto it = labels.find(static_cast<long>(i)); it != labels.end())
      out += fmt::format("L{}:\n", it->second);
    const bool wide = IsLdImm64(insns[i]);
    const bpf_insn* next = wide && i + 1 < insns.size() ? &insns[i + 1] : nullptr;
    std::string text = Insn(insns[i], next, i, &labels);
    if (auto it = notes.find(i); it != notes.end()) {
      if (text.size() < kCommentColumn) text.resize(kCommentColumn, ' ');
      text += " ; " + it->second;
    }
    out += fmt::format("{:>4}: {}\n", i, text);
    if (wide) ++i;
  }
  // Notes past the last instruction (e.g. a trailing comment) are still worth showing.
  for (auto it = notes.lower_bound(insns.size()); it != notes.end(); ++it)
    out += fmt::format("{:>4}  {:{}} ; {}\n", "", "", kCommentColumn, it->second);
  return out;
}

}  // namespace fay::bpf
