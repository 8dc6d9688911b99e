#include "inproc/jit.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cstring>

namespace fay::inproc {
namespace {

#ifndef BPF_MEMSX
constexpr uint8_t BPF_MEMSX = 0x80;
#endif

enum X86 : uint8_t {
  kRax = 0,
  kRcx = 1,
  kRdx = 2,
  kRbx = 3,
  kRsp = 4,
  kRbp = 5,
  kRsi = 6,
  kRdi = 7,
  kR8 = 8,
  kR10 = 10,
  kR11 = 11,
  kR13 = 13,
  kR14 = 14,
  kR15 = 15,
};
// eBPF r0..r10 in x86 registers (see jit.h). r10 and r11 of x86 are scratch.
constexpr uint8_t kReg[11] = {kRax, kRdi, kRsi, kRdx, kRcx, kR8, kRbx, kR13, kR14, kR15, kRbp};
constexpr int32_t kLoop = 181;  // BPF_FUNC_loop: its callback is bytecode
// The frame below the saved registers: five helper arguments, padding, the 512-byte stack.
// kFrame is 8 off a multiple of 16: with the return address and six pushes, calls are aligned.
constexpr int32_t kArgs = 56, kStack = 512, kFrame = kArgs + kStack;

class Asm {
 public:
  std::vector<uint8_t> b;
  void U8(uint8_t v) { b.push_back(v); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Rex(bool w, uint8_t reg, uint8_t rm, bool force = false) {
    uint8_t r = 0x40 | (w ? 8 : 0) | ((reg >> 3) << 2) | (rm >> 3);
    if (r != 0x40 || force) U8(r);
  }
  void ModRM(uint8_t mod, uint8_t reg, uint8_t rm) {
    U8(static_cast<uint8_t>(mod << 6 | (reg & 7) << 3 | (rm & 7)));
  }
  // op r/m(dst), reg(src)
  void RegReg(uint8_t op, bool w, uint8_t dst, uint8_t src) {
    Rex(w, src, dst);
    U8(op);
    ModRM(3, src, dst);
  }
  // Memory operand [base + disp32]; base is never rsp or r12 (no BPF register lives there).
  void Mem(uint8_t reg, uint8_t base, int32_t disp) {
    ModRM(2, reg, base);
    U32(static_cast<uint32_t>(disp));
  }
  void MovImm64(uint8_t dst, uint64_t v) {
    Rex(true, 0, dst);
    U8(0xb8 + (dst & 7));
    U64(v);
  }
  size_t Jcc(uint8_t cc) {  // returns where the rel32 goes
    U8(0x0f);
    U8(0x80 + cc);
    U32(0);
    return b.size() - 4;
  }
  size_t Jmp() {
    U8(0xe9);
    U32(0);
    return b.size() - 4;
  }
};

// The x86 condition code of a BPF jump.
int CondCode(uint8_t op) {
  switch (op) {
    case BPF_JEQ:
      return 0x4;
    case BPF_JNE:
    case BPF_JSET:
      return 0x5;
    case BPF_JGT:
      return 0x7;
    case BPF_JGE:
      return 0x3;
    case BPF_JLT:
      return 0x2;
    case BPF_JLE:
      return 0x6;
    case BPF_JSGT:
      return 0xf;
    case BPF_JSGE:
      return 0xd;
    case BPF_JSLT:
      return 0xc;
    case BPF_JSLE:
      return 0xe;
    default:
      return -1;
  }
}

// Instructions some jump lands on: what a register held before them is not known there.
std::vector<bool> JumpTargets(const std::vector<bpf_insn>& insns) {
  std::vector<bool> t(insns.size() + 1, false);
  for (size_t pc = 0; pc < insns.size(); ++pc) {
    const bpf_insn& i = insns[pc];
    const uint8_t cls = BPF_CLASS(i.code), op = BPF_OP(i.code);
    if ((cls != BPF_JMP && cls != BPF_JMP32) || op == BPF_CALL || op == BPF_EXIT) continue;
    const int64_t off = cls == BPF_JMP32 && op == BPF_JA ? i.imm : i.off;
    const int64_t to = static_cast<int64_t>(pc) + 1 + off;
    if (to >= 0 && to <= static_cast<int64_t>(insns.size())) t[static_cast<size_t>(to)] = true;
  }
  return t;
}

// Whether the lookup at `call` is in an array map known here: r1 was last set by a map
// reference in the straight run of instructions just before it (fay's code sets it right
// before the key), and the map is an array whose offsets fit an imul's 32 bits.
bool InlinableArray(const std::vector<bpf_insn>& insns, const std::vector<uint64_t>& imm64,
                    const std::vector<bool>& targets, size_t call, const Helpers& helpers,
                    ArrayLayout* out) {
  constexpr uint8_t kLdImm64 = BPF_LD | BPF_DW | BPF_IMM;
  for (size_t back = 1; back <= 8 && back <= call; ++back) {
    const size_t pc = call - back;
    if (targets[pc + 1]) return false;  // control can reach the next one from elsewhere
    const bpf_insn& i = insns[pc];
    const uint8_t cls = BPF_CLASS(i.code);
    // The second half of an ld_imm64 (code 0): its first half is one further back.
    if (i.code == 0 && pc > 0 && insns[pc - 1].code == kLdImm64) continue;
    if (i.code == kLdImm64 && i.dst_reg == BPF_REG_1) {
      if (i.src_reg != BPF_PSEUDO_MAP_FD || !helpers.array_layout(imm64[pc], out)) return false;
      return out->max_entries > 0 && out->entry_bytes <= 0x7fffffff &&
             out->table_bytes <= 0x7fffffff && out->slots > 0;
    }
    // Anything that may change r1, and any jump or exit: not a straight run.
    if (cls == BPF_JMP || cls == BPF_JMP32) return false;
    if ((cls == BPF_ALU || cls == BPF_ALU64 || cls == BPF_LDX || cls == BPF_LD) &&
        i.dst_reg == BPF_REG_1)
      return false;
    if (cls == BPF_STX && BPF_MODE(i.code) == BPF_ATOMIC && i.src_reg == BPF_REG_1) return false;
  }
  return false;
}

// r0 = &value[key] in the calling thread's slot, or 0 past the end: what the helper answers,
// without the call. r2 (rsi) points at the 4-byte key; rax and rdx are free, as a call
// clobbers them.
void EmitArrayLookup(Asm& a, const ArrayLayout& m, int64_t slot_tls_offset) {
  std::vector<size_t> to_null;
  auto jae = [&] {
    a.U8(0x73), a.U8(0);  // jae rel8, set below
    to_null.push_back(a.b.size());
  };
  a.U8(0x8b), a.U8(0x06);            // mov eax, [rsi]
  a.U8(0x3d), a.U32(m.max_entries);  // cmp eax, max_entries
  jae();
  a.U8(0x48), a.U8(0x69), a.U8(0xc0);  // imul rax, rax, entry_bytes
  a.U32(static_cast<uint32_t>(m.entry_bytes));
  if (m.per_slot) {
    a.U8(0x64), a.U8(0x8b), a.U8(0x14), a.U8(0x25);  // mov edx, fs:[offset]
    a.U32(static_cast<uint32_t>(static_cast<int32_t>(slot_tls_offset)));
    a.U8(0x81), a.U8(0xfa), a.U32(m.slots);  // cmp edx, slots
    jae();
    a.U8(0x48), a.U8(0x69), a.U8(0xd2);  // imul rdx, rdx, table_bytes
    a.U32(static_cast<uint32_t>(m.table_bytes));
    a.U8(0x48), a.U8(0x01), a.U8(0xd0);  // add rax, rdx
  }
  a.MovImm64(kRdx, reinterpret_cast<uint64_t>(m.base));
  a.U8(0x48), a.U8(0x01), a.U8(0xd0);  // add rax, rdx
  a.U8(0xeb), a.U8(2);                 // jmp over the null
  for (size_t at : to_null) a.b[at - 1] = static_cast<uint8_t>(a.b.size() - at);
  a.U8(0x31), a.U8(0xc0);  // xor eax, eax
}

}  // namespace

JitCode::JitCode(Key, void* code, size_t size)
    : code_(code), size_(size), entry_(reinterpret_cast<uint64_t (*)(uint64_t)>(code)) {}

JitCode::~JitCode() {
  munmap(code_, size_);
}

Expected<std::unique_ptr<JitCode>> JitCode::Translate(const std::vector<bpf_insn>& insns,
                                                      const std::vector<uint64_t>& imm64,
                                                      const Helpers& helpers) {
  auto no = [](size_t pc, std::string_view why) {
    return Error(Code::kUnsupported, fmt::format("not translated: instruction {}: {}", pc, why));
  };
  Asm a;
  // Prologue: the callee-saved registers, the frame, r10 at the top of the stack.
  for (uint8_t r : {uint8_t{0x55}, uint8_t{0x53}}) a.U8(r);        // push rbp, rbx
  for (uint8_t r : {0x54, 0x55, 0x56, 0x57}) a.U8(0x41), a.U8(r);  // push r12-r15
  a.U8(0x48), a.U8(0x81), a.U8(0xec), a.U32(kFrame);               // sub rsp, frame
  a.U8(0x48), a.U8(0x8d), a.U8(0xac), a.U8(0x24), a.U32(kFrame);   // lea rbp, [rsp+frame]

  const size_t n = insns.size();
  const std::vector<bool> targets = JumpTargets(insns);
  std::vector<size_t> start(n + 1, 0);
  std::vector<std::pair<size_t, size_t>> fixups;  // rel32 position, target instruction
  std::vector<size_t> exits;                      // rel32 positions of jumps to the epilogue
  for (size_t pc = 0; pc < n; ++pc) {
    start[pc] = a.b.size();
    const bpf_insn& i = insns[pc];
    const uint8_t cls = BPF_CLASS(i.code);
    const uint8_t op = BPF_OP(i.code);
    const uint8_t dst = i.dst_reg <= 10 ? kReg[i.dst_reg] : 0;
    const uint8_t src = i.src_reg <= 10 ? kReg[i.src_reg] : 0;
    switch (cls) {
      case BPF_ALU:
      case BPF_ALU64: {
        const bool w = cls == BPF_ALU64;
        const bool x = BPF_SRC(i.code) == BPF_X;
        switch (op) {
          case BPF_MOV:
            if (i.off != 0) {
              if (!x || (i.off == 32 && !w)) return no(pc, "a sign-extending move of that size");
              a.Rex(w, dst, src, true);
              if (i.off == 8) {
                a.U8(0x0f), a.U8(0xbe);
              } else if (i.off == 16) {
                a.U8(0x0f), a.U8(0xbf);
              } else if (i.off == 32) {
                a.U8(0x63);
              } else {
                return no(pc, "a sign-extending move of that size");
              }
              a.ModRM(3, dst, src);
            } else if (x) {
              a.RegReg(0x89, w, dst, src);
            } else if (w) {
              a.Rex(true, 0, dst);
              a.U8(0xc7);
              a.ModRM(3, 0, dst);
              a.U32(static_cast<uint32_t>(i.imm));
            } else {
              a.Rex(false, 0, dst);
              a.U8(0xb8 + (dst & 7));
              a.U32(static_cast<uint32_t>(i.imm));
            }
            break;
          case BPF_ADD:
          case BPF_SUB:
          case BPF_AND:
          case BPF_OR:
          case BPF_XOR: {
            static constexpr struct {
              uint8_t bpf, rr, digit;
            } kOps[] = {{BPF_ADD, 0x01, 0},
                        {BPF_SUB, 0x29, 5},
                        {BPF_AND, 0x21, 4},
                        {BPF_OR, 0x09, 1},
                        {BPF_XOR, 0x31, 6}};
            for (const auto& o : kOps) {
              if (o.bpf != op) continue;
              if (x) {
                a.RegReg(o.rr, w, dst, src);
              } else {
                a.Rex(w, 0, dst);
                a.U8(0x81);
                a.ModRM(3, o.digit, dst);
                a.U32(static_cast<uint32_t>(i.imm));
              }
            }
            break;
          }
          case BPF_MUL:
            if (x) {
              a.Rex(w, dst, src);
              a.U8(0x0f), a.U8(0xaf);
              a.ModRM(3, dst, src);
            } else {
              a.Rex(w, dst, dst);
              a.U8(0x69);
              a.ModRM(3, dst, dst);
              a.U32(static_cast<uint32_t>(i.imm));
            }
            break;
          case BPF_NEG:
            a.Rex(w, 0, dst);
            a.U8(0xf7);
            a.ModRM(3, 3, dst);
            break;
          case BPF_LSH:
          case BPF_RSH:
          case BPF_ARSH: {
            const uint8_t digit = op == BPF_LSH ? 4 : op == BPF_RSH ? 5 : 7;
            if (!x) {
              a.Rex(w, 0, dst);
              a.U8(0xc1);
              a.ModRM(3, digit, dst);
              a.U8(static_cast<uint8_t>(i.imm & (w ? 63 : 31)));
              break;
            }
            // The count must be in cl, and rcx is BPF r4: kept in r10 meanwhile.
            a.RegReg(0x89, true, kR11, src);   // mov r11, src
            a.RegReg(0x89, true, kR10, kRcx);  // mov r10, rcx
            a.RegReg(0x89, true, kRcx, kR11);  // mov rcx, r11
            const uint8_t target = dst == kRcx ? kR10 : dst;
            a.Rex(w, 0, target);
            a.U8(0xd3);
            a.ModRM(3, digit, target);
            if (dst == kRcx && !w) a.RegReg(0x89, false, kR10, kR10);  // zero-extend
            a.RegReg(0x89, true, kRcx, kR10);                          // mov rcx, r10
            break;
          }
          default:
            return no(pc, "an ALU operation the translation leaves to the interpreter");
        }
        break;
      }
      case BPF_LDX: {
        const uint8_t size = BPF_SIZE(i.code);
        const bool sx = BPF_MODE(i.code) == BPF_MEMSX;
        if (BPF_MODE(i.code) != BPF_MEM && !sx) return no(pc, "a load mode");
        if (size == BPF_B) {
          a.Rex(true, dst, src), a.U8(0x0f), a.U8(sx ? 0xbe : 0xb6);
        } else if (size == BPF_H) {
          a.Rex(true, dst, src), a.U8(0x0f), a.U8(sx ? 0xbf : 0xb7);
        } else if (size == BPF_W) {
          if (sx)
            a.Rex(true, dst, src), a.U8(0x63);
          else
            a.Rex(false, dst, src), a.U8(0x8b);
        } else {
          if (sx) return no(pc, "a sign-extending 8-byte load");
          a.Rex(true, dst, src), a.U8(0x8b);
        }
        a.Mem(dst, src, i.off);
        break;
      }
      case BPF_ST:
      case BPF_STX: {
        const uint8_t size = BPF_SIZE(i.code);
        if (BPF_MODE(i.code) == BPF_ATOMIC) {
          if (cls != BPF_STX || (i.imm != BPF_ADD && i.imm != (BPF_ADD | BPF_FETCH)))
            return no(pc, "an atomic operation other than add");
          a.U8(0xf0);  // lock
          a.Rex(size == BPF_DW, src, dst);
          if (i.imm & BPF_FETCH)
            a.U8(0x0f), a.U8(0xc1);  // xadd: src gets the old value
          else
            a.U8(0x01);
          a.Mem(src, dst, i.off);
          break;
        }
        if (BPF_MODE(i.code) != BPF_MEM) return no(pc, "a store mode");
        if (cls == BPF_STX) {
          if (size == BPF_H) a.U8(0x66);
          a.Rex(size == BPF_DW, src, dst, size == BPF_B);
          a.U8(size == BPF_B ? 0x88 : 0x89);
          a.Mem(src, dst, i.off);
        } else {
          if (size == BPF_H) a.U8(0x66);
          a.Rex(size == BPF_DW, 0, dst);
          a.U8(size == BPF_B ? 0xc6 : 0xc7);
          a.Mem(0, dst, i.off);
          if (size == BPF_B)
            a.U8(static_cast<uint8_t>(i.imm));
          else if (size == BPF_H)
            a.U8(static_cast<uint8_t>(i.imm)), a.U8(static_cast<uint8_t>(i.imm >> 8));
          else
            a.U32(static_cast<uint32_t>(i.imm));
        }
        break;
      }
      case BPF_LD:
        if (i.src_reg == BPF_PSEUDO_FUNC) return no(pc, "a function reference");
        a.MovImm64(dst, imm64[pc]);
        start[++pc] = a.b.size();  // its second half
        break;
      case BPF_JMP:
      case BPF_JMP32: {
        const bool w = cls == BPF_JMP;
        if (op == BPF_EXIT) {
          exits.push_back(a.Jmp());
          break;
        }
        if (op == BPF_CALL) {
          if (i.src_reg != 0 || i.imm == kLoop) return no(pc, "a call of bytecode");
          ArrayLayout array;
          if (i.imm == BPF_FUNC_map_lookup_elem && helpers.array_layout &&
              helpers.slot_tls_offset &&
              InlinableArray(insns, imm64, targets, pc, helpers, &array)) {
            EmitArrayLookup(a, array, helpers.slot_tls_offset);
            break;
          }
          // The helper takes (env, args[5]): r1-r5 stored in the frame's argument area.
          static constexpr uint8_t kArgRegs[5] = {kRdi, kRsi, kRdx, kRcx, kR8};
          for (int k = 0; k < 5; ++k) {
            a.Rex(true, kArgRegs[k], 0);
            a.U8(0x89);
            a.ModRM(1, kArgRegs[k], kRsp);
            a.U8(0x24);
            a.U8(static_cast<uint8_t>(8 * k));
          }
          a.MovImm64(kRdi, reinterpret_cast<uint64_t>(helpers.env));
          a.U8(0x48), a.U8(0x8d), a.U8(0x34), a.U8(0x24);  // lea rsi, [rsp]
          a.MovImm64(kRax, reinterpret_cast<uint64_t>(helpers.fns[static_cast<size_t>(i.imm)]));
          a.U8(0xff), a.U8(0xd0);  // call rax
          break;
        }
        if (op == BPF_JA) {
          if (!w) return no(pc, "a long jump");
          fixups.emplace_back(a.Jmp(), pc + 1 + i.off);
          break;
        }
        const int cc = CondCode(op);
        if (cc < 0) return no(pc, "a jump");
        const bool x = BPF_SRC(i.code) == BPF_X;
        if (x) {
          a.RegReg(op == BPF_JSET ? 0x85 : 0x39, w, dst, src);  // test / cmp dst, src
        } else {
          a.Rex(w, 0, dst);
          a.U8(op == BPF_JSET ? 0xf7 : 0x81);
          a.ModRM(3, op == BPF_JSET ? 0 : 7, dst);
          a.U32(static_cast<uint32_t>(i.imm));
        }
        fixups.emplace_back(a.Jcc(static_cast<uint8_t>(cc)), pc + 1 + i.off);
        break;
      }
      default:
        return no(pc, "an instruction class");
    }
  }
  start[n] = a.b.size();
  // Epilogue.
  const size_t epilogue = a.b.size();
  a.U8(0x48), a.U8(0x81), a.U8(0xc4), a.U32(kFrame);               // add rsp, frame
  for (uint8_t r : {0x5f, 0x5e, 0x5d, 0x5c}) a.U8(0x41), a.U8(r);  // pop r15-r12
  a.U8(0x5b), a.U8(0x5d), a.U8(0xc3);                              // pop rbx, rbp; ret
  auto patch = [&](size_t at, size_t to) {
    const auto rel = static_cast<int32_t>(static_cast<int64_t>(to) - static_cast<int64_t>(at + 4));
    std::memcpy(&a.b[at], &rel, 4);
  };
  for (auto [at, target] : fixups) {
    if (target >= n) return no(target, "a jump out of the program");
    patch(at, start[target]);
  }
  for (size_t at : exits) patch(at, epilogue);

  const size_t bytes = (a.b.size() + 4095) & ~size_t{4095};
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return ErrnoError("mapping translated code");
  std::memcpy(mem, a.b.data(), a.b.size());
  if (mprotect(mem, bytes, PROT_READ | PROT_EXEC) != 0) {
    Status st = ErrnoError("sealing translated code");
    munmap(mem, bytes);
    return st;
  }
  return std::make_unique<JitCode>(Key(), mem, bytes);
}

}  // namespace fay::inproc
