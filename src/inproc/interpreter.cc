#include "inproc/interpreter.h"

#include "inproc/jit.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>

namespace fay::inproc {
namespace {

// Sign-extending loads (cpu v4), newer than Debian 12's kernel headers.
#ifndef BPF_MEMSX
constexpr uint8_t BPF_MEMSX = 0x80;
#endif

constexpr int kMaxDepth = 8;             // the kernel's limit on nested BPF-to-BPF calls
constexpr size_t kStack = 512;           // bytes of stack a frame has
constexpr int32_t kLoop = 181;           // BPF_FUNC_loop
constexpr uint64_t kMaxLoops = 1 << 23;  // bpf_loop's own limit

template <typename T>
T Ld(uint64_t addr) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
  return v;
}
template <typename T>
void St(uint64_t addr, T v) {
  std::memcpy(reinterpret_cast<void*>(addr), &v, sizeof v);
}

uint64_t Alu(uint8_t op, uint64_t dst, uint64_t src, int16_t off, bool is64, bool* bad) {
  const uint32_t shift_mask = is64 ? 63 : 31;
  if (!is64) {
    dst = static_cast<uint32_t>(dst);
    src = static_cast<uint32_t>(src);
  }
  uint64_t r = 0;
  switch (op) {
    case BPF_ADD:
      r = dst + src;
      break;
    case BPF_SUB:
      r = dst - src;
      break;
    case BPF_MUL:
      r = dst * src;
      break;
    case BPF_OR:
      r = dst | src;
      break;
    case BPF_AND:
      r = dst & src;
      break;
    case BPF_XOR:
      r = dst ^ src;
      break;
    case BPF_LSH:
      r = dst << (src & shift_mask);
      break;
    case BPF_RSH:
      r = dst >> (src & shift_mask);
      break;
    case BPF_NEG:
      r = -dst;
      break;
    case BPF_ARSH:
      r = is64 ? static_cast<uint64_t>(static_cast<int64_t>(dst) >> (src & 63))
               : static_cast<uint32_t>(static_cast<int32_t>(dst) >> (src & 31));
      break;
    case BPF_MOV:
      if (off == 0) {
        r = src;
      } else {  // movsx (cpu v4): sign-extend the low `off` bits of src
        int64_t s = off == 8    ? static_cast<int8_t>(src)
                    : off == 16 ? static_cast<int16_t>(src)
                                : static_cast<int32_t>(src);
        r = static_cast<uint64_t>(s);
      }
      break;
    case BPF_DIV:
    case BPF_MOD: {
      const bool mod = op == BPF_MOD;
      if (off == 1) {  // signed (cpu v4)
        int64_t a = is64 ? static_cast<int64_t>(dst) : static_cast<int32_t>(dst);
        int64_t b = is64 ? static_cast<int64_t>(src) : static_cast<int32_t>(src);
        if (b == 0) {
          r = mod ? dst : 0;
        } else if (b == -1) {
          r = mod ? 0 : static_cast<uint64_t>(-a);  // no trap on the minimum: it wraps
        } else {
          r = static_cast<uint64_t>(mod ? a % b : a / b);
        }
      } else if (src == 0) {
        r = mod ? dst : 0;  // the kernel's rule: x / 0 = 0, x % 0 = x
      } else {
        r = mod ? dst % src : dst / src;
      }
      break;
    }
    default:
      *bad = true;
  }
  return is64 ? r : static_cast<uint32_t>(r);
}

bool Cond(uint8_t op, uint64_t a, uint64_t b, bool is64) {
  if (!is64) {
    a = static_cast<uint32_t>(a);
    b = static_cast<uint32_t>(b);
  }
  const int64_t sa = is64 ? static_cast<int64_t>(a) : static_cast<int32_t>(a);
  const int64_t sb = is64 ? static_cast<int64_t>(b) : static_cast<int32_t>(b);
  switch (op) {
    case BPF_JEQ:
      return a == b;
    case BPF_JNE:
      return a != b;
    case BPF_JGT:
      return a > b;
    case BPF_JGE:
      return a >= b;
    case BPF_JLT:
      return a < b;
    case BPF_JLE:
      return a <= b;
    case BPF_JSGT:
      return sa > sb;
    case BPF_JSGE:
      return sa >= sb;
    case BPF_JSLT:
      return sa < sb;
    case BPF_JSLE:
      return sa <= sb;
    case BPF_JSET:
      return (a & b) != 0;
    default:
      return false;
  }
}

uint64_t Swap(uint64_t v, int bits) {
  switch (bits) {
    case 16:
      return __builtin_bswap16(static_cast<uint16_t>(v));
    case 32:
      return __builtin_bswap32(static_cast<uint32_t>(v));
    default:
      return __builtin_bswap64(v);
  }
}

template <typename T>
uint64_t AtomicOp(uint64_t addr, int32_t imm, uint64_t src, uint64_t* r0) {
  auto* p = reinterpret_cast<std::atomic<T>*>(addr);
  const T s = static_cast<T>(src);
  T old = 0;
  switch (imm & ~BPF_FETCH) {
    case BPF_ADD:
      old = p->fetch_add(s);
      break;
    case BPF_OR:
      old = p->fetch_or(s);
      break;
    case BPF_AND:
      old = p->fetch_and(s);
      break;
    case BPF_XOR:
      old = p->fetch_xor(s);
      break;
    default:
      if (imm == BPF_XCHG) {
        old = p->exchange(s);
      } else if (imm == BPF_CMPXCHG) {
        T expected = static_cast<T>(*r0);
        p->compare_exchange_strong(expected, s);
        *r0 = expected;  // the old value, whether or not it matched
        return src;
      }
  }
  return (imm & BPF_FETCH) ? old : src;
}

bool KnownAtomic(int32_t imm) {
  switch (imm) {
    case BPF_ADD:
    case BPF_OR:
    case BPF_AND:
    case BPF_XOR:
    case BPF_ADD | BPF_FETCH:
    case BPF_OR | BPF_FETCH:
    case BPF_AND | BPF_FETCH:
    case BPF_XOR | BPF_FETCH:
    case BPF_XCHG:
    case BPF_CMPXCHG:
      return true;
    default:
      return false;
  }
}

}  // namespace

Expected<Interpreter> Interpreter::Prepare(std::vector<bpf_insn> insns,
                                           const std::function<uint64_t(int)>& map_address,
                                           Helpers helpers, bool translate) {
  Interpreter in;
  in.helpers_ = helpers;
  in.imm64_.assign(insns.size(), 0);
  const auto n = static_cast<int64_t>(insns.size());
  auto bad = [](size_t pc, std::string_view why) {
    return Error(Code::kUnsupported, fmt::format("instruction {}: {}", pc, why));
  };
  if (insns.empty()) return bad(0, "an empty program");
  for (int64_t pc = 0; pc < n; ++pc) {
    const bpf_insn& i = insns[pc];
    const uint8_t cls = BPF_CLASS(i.code);
    auto target_ok = [&](int64_t off) { return pc + 1 + off >= 0 && pc + 1 + off < n; };
    switch (cls) {
      case BPF_LD: {
        if (i.code != (BPF_LD | BPF_DW | BPF_IMM) || pc + 1 >= n)
          return bad(pc, "only ld_imm64 of the BPF_LD class");
        const uint64_t raw =
            static_cast<uint32_t>(i.imm) |
            (static_cast<uint64_t>(static_cast<uint32_t>(insns[pc + 1].imm)) << 32);
        switch (i.src_reg) {
          case 0:
            in.imm64_[pc] = raw;
            break;
          case BPF_PSEUDO_MAP_FD: {
            uint64_t m = map_address(i.imm);
            if (m == 0) return bad(pc, fmt::format("map {} is not provided", i.imm));
            in.imm64_[pc] = m;
            break;
          }
          case BPF_PSEUDO_FUNC:
            if (!target_ok(i.imm)) return bad(pc, "a function reference out of the program");
            in.imm64_[pc] = kFuncTag | static_cast<uint64_t>(pc + 1 + i.imm);
            break;
          default:
            return bad(pc, fmt::format("ld_imm64 of kind {}", i.src_reg));
        }
        ++pc;  // its second half
        break;
      }
      case BPF_LDX:
      case BPF_ST:
      case BPF_STX:
        if (BPF_MODE(i.code) == BPF_ATOMIC) {
          if (cls != BPF_STX || !KnownAtomic(i.imm) ||
              (BPF_SIZE(i.code) != BPF_W && BPF_SIZE(i.code) != BPF_DW))
            return bad(pc, "an atomic operation this interpreter does not know");
        } else if (BPF_MODE(i.code) != BPF_MEM &&
                   !(cls == BPF_LDX && BPF_MODE(i.code) == BPF_MEMSX)) {
          return bad(pc, "a memory access mode this interpreter does not know");
        }
        break;
      case BPF_ALU:
      case BPF_ALU64: {
        bool unknown = false;
        if (BPF_OP(i.code) != BPF_END) Alu(BPF_OP(i.code), 1, 1, i.off, cls == BPF_ALU64, &unknown);
        if (unknown) return bad(pc, "an ALU operation this interpreter does not know");
        break;
      }
      case BPF_JMP:
      case BPF_JMP32: {
        const uint8_t op = BPF_OP(i.code);
        if (op == BPF_EXIT) break;
        if (op == BPF_CALL) {
          if (i.src_reg == BPF_PSEUDO_CALL) {
            if (!target_ok(i.imm)) return bad(pc, "a call out of the program");
          } else if (i.src_reg != 0) {
            return bad(pc, "a kernel function call (kfunc), which runs only in the kernel");
          } else if (i.imm != kLoop && (i.imm < 0 || i.imm >= 256 ||
                                        helpers.fns[static_cast<size_t>(i.imm)] == nullptr)) {
            return bad(pc, fmt::format("helper {} is not provided in the process", i.imm));
          }
          break;
        }
        switch (op) {
          case BPF_JA:
          case BPF_JEQ:
          case BPF_JNE:
          case BPF_JGT:
          case BPF_JGE:
          case BPF_JLT:
          case BPF_JLE:
          case BPF_JSGT:
          case BPF_JSGE:
          case BPF_JSLT:
          case BPF_JSLE:
          case BPF_JSET:
            break;
          default:
            return bad(pc, "a jump this interpreter does not know");
        }
        const int64_t off = (cls == BPF_JMP32 && op == BPF_JA) ? i.imm : i.off;
        if (!target_ok(off)) return bad(pc, "a jump out of the program");
        break;
      }
      default:
        return bad(pc, "an instruction class this interpreter does not know");
    }
  }
  in.insns_ = std::move(insns);
  if (translate) {
    auto jit = JitCode::Translate(in.insns_, in.imm64_, in.helpers_);
    if (jit.ok()) {
      in.jit_ = std::move(jit).value();
      in.jit_entry_ = in.jit_->entry();
    } else {
      in.not_translated_ = jit.status().message();
    }
  }
  return in;
}

uint64_t Interpreter::Interpret(uint64_t ctx) const {
  const uint64_t args[5] = {ctx, 0, 0, 0, 0};
  return Exec(0, args, 0);
}

uint64_t Interpreter::Exec(size_t pc, const uint64_t args[5], int depth) const {
  alignas(16) uint8_t stack[kStack];
  uint64_t r[11] = {};
  for (int k = 0; k < 5; ++k) r[k + 1] = args[k];
  r[10] = reinterpret_cast<uint64_t>(stack + kStack);
  const bpf_insn* code = insns_.data();
  for (;;) {
    const bpf_insn& i = code[pc];
    const uint8_t cls = BPF_CLASS(i.code);
    uint64_t& dst = r[i.dst_reg];
    switch (cls) {
      case BPF_ALU:
      case BPF_ALU64: {
        const bool is64 = cls == BPF_ALU64;
        if (BPF_OP(i.code) == BPF_END) {
          const int bits = i.imm;
          if (is64 || BPF_SRC(i.code) == BPF_TO_BE) {
            dst = Swap(dst, bits);
          } else {  // to little endian on a little-endian machine: only the width
            dst = bits == 64 ? dst : (dst & ((1ull << bits) - 1));
          }
          break;
        }
        const uint64_t src = BPF_SRC(i.code) == BPF_X
                                 ? r[i.src_reg]
                                 : static_cast<uint64_t>(static_cast<int64_t>(i.imm));
        bool unused = false;
        dst = Alu(BPF_OP(i.code), dst, src, i.off, is64, &unused);
        break;
      }
      case BPF_LD:
        dst = imm64_[pc];
        ++pc;
        break;
      case BPF_LDX: {
        const uint64_t a = r[i.src_reg] + static_cast<int64_t>(i.off);
        const bool sx = BPF_MODE(i.code) == BPF_MEMSX;
        switch (BPF_SIZE(i.code)) {
          case BPF_B:
            dst = sx ? static_cast<uint64_t>(Ld<int8_t>(a)) : Ld<uint8_t>(a);
            break;
          case BPF_H:
            dst = sx ? static_cast<uint64_t>(Ld<int16_t>(a)) : Ld<uint16_t>(a);
            break;
          case BPF_W:
            dst = sx ? static_cast<uint64_t>(Ld<int32_t>(a)) : Ld<uint32_t>(a);
            break;
          default:
            dst = Ld<uint64_t>(a);
            break;
        }
        break;
      }
      case BPF_ST:
      case BPF_STX: {
        const uint64_t a = dst + static_cast<int64_t>(i.off);
        if (BPF_MODE(i.code) == BPF_ATOMIC) {
          uint64_t& src = r[i.src_reg];
          uint64_t out = BPF_SIZE(i.code) == BPF_DW ? AtomicOp<uint64_t>(a, i.imm, src, &r[0])
                                                    : AtomicOp<uint32_t>(a, i.imm, src, &r[0]);
          if ((i.imm & BPF_FETCH) && i.imm != BPF_CMPXCHG) src = out;
          break;
        }
        const uint64_t v =
            cls == BPF_STX ? r[i.src_reg] : static_cast<uint64_t>(static_cast<int64_t>(i.imm));
        switch (BPF_SIZE(i.code)) {
          case BPF_B:
            St<uint8_t>(a, static_cast<uint8_t>(v));
            break;
          case BPF_H:
            St<uint16_t>(a, static_cast<uint16_t>(v));
            break;
          case BPF_W:
            St<uint32_t>(a, static_cast<uint32_t>(v));
            break;
          default:
            St<uint64_t>(a, v);
            break;
        }
        break;
      }
      case BPF_JMP:
      case BPF_JMP32: {
        const uint8_t op = BPF_OP(i.code);
        if (op == BPF_EXIT) return r[0];
        if (op == BPF_CALL) {
          if (i.src_reg == BPF_PSEUDO_CALL) {
            if (depth + 1 >= kMaxDepth) return 0;  // the verifier forbids it; never reached
            r[0] = Exec(pc + 1 + i.imm, &r[1], depth + 1);
          } else if (i.imm == kLoop) {
            const uint64_t n = std::min<uint64_t>(r[1], kMaxLoops);
            const uint64_t fn = r[2];
            uint64_t k = 0;
            if ((fn & ~0xffffffffull) == kFuncTag && depth + 1 < kMaxDepth) {
              for (; k < n;) {
                const uint64_t cb[5] = {k, r[3], 0, 0, 0};
                ++k;
                if (Exec(fn & 0xffffffffull, cb, depth + 1) == 1) break;
              }
            }
            r[0] = k;
          } else {
            r[0] = helpers_.fns[static_cast<size_t>(i.imm)](helpers_.env, &r[1]);
          }
          // R1-R5 are clobbered by a call; a program never reads them after one.
          break;
        }
        const int64_t off = (cls == BPF_JMP32 && op == BPF_JA) ? i.imm : i.off;
        bool taken = op == BPF_JA;
        if (!taken) {
          const uint64_t b = BPF_SRC(i.code) == BPF_X
                                 ? r[i.src_reg]
                                 : static_cast<uint64_t>(static_cast<int64_t>(i.imm));
          taken = Cond(op, dst, b, cls == BPF_JMP);
        }
        if (taken) pc = static_cast<size_t>(static_cast<int64_t>(pc) + off);
        break;
      }
    }
    ++pc;
  }
}

}  // namespace fay::inproc
