#include "inproc/relocate.h"

#include <Zydis/Zydis.h>
#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace fay::inproc {
namespace {

bool FitsRel32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void PutU64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// jmp qword [rip+0]; dq to: reaches anywhere, 14 bytes.
void AbsoluteJump(std::vector<uint8_t>& out, uint64_t to) {
  out.insert(out.end(), {0xff, 0x25, 0, 0, 0, 0});
  PutU64(out, to);
}

// jmp rel32 when `to` is within reach of the jump's end at `at + 5`, else the absolute form.
void JumpBack(std::vector<uint8_t>& out, uint64_t at, uint64_t to) {
  int64_t rel = static_cast<int64_t>(to - (at + kJumpBytes));
  if (FitsRel32(rel)) {
    out.push_back(0xe9);
    PutU32(out, static_cast<uint32_t>(static_cast<int32_t>(rel)));
    return;
  }
  AbsoluteJump(out, to);
}

struct Decoded {
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

class Decoder {
 public:
  Decoder() { ZydisDecoderInit(&d_, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64); }
  bool At(std::span<const uint8_t> code, size_t off, Decoded* out) const {
    if (off >= code.size()) return false;
    return ZYAN_SUCCESS(
        ZydisDecoderDecodeFull(&d_, code.data() + off, code.size() - off, &out->insn, out->ops));
  }

 private:
  ZydisDecoder d_;
};

// The target of a relative branch or call, if the instruction is one.
bool BranchTarget(const Decoded& d, uint64_t runtime, uint64_t* target) {
  if (!(d.insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE)) return false;
  for (int i = 0; i < d.insn.operand_count_visible; ++i) {
    const ZydisDecodedOperand& op = d.ops[i];
    if (op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op.imm.is_relative)
      return ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.insn, &op, runtime, target));
  }
  return false;
}

bool IsRipRelativeMemory(const Decoded& d) {
  for (int i = 0; i < d.insn.operand_count_visible; ++i) {
    const ZydisDecodedOperand& op = d.ops[i];
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_RIP) return true;
  }
  return false;
}

}  // namespace

Expected<Prologue> RelocatePrologue(std::span<const uint8_t> function, uint64_t address,
                                    uint64_t trampoline) {
  if (function.size() < kJumpBytes)
    return Error(Code::kUnsupported,
                 fmt::format("the function is {} bytes, shorter than the {}-byte jump",
                             function.size(), kJumpBytes));
  Decoder dec;
  Prologue p;
  std::vector<uint8_t>& out = p.trampoline;
  while (p.length < kJumpBytes) {
    Decoded d;
    const size_t off = p.length;
    if (!dec.At(function, off, &d))
      return Error(Code::kUnsupported,
                   fmt::format("the instruction at +{:#x} cannot be decoded", off));
    const size_t len = d.insn.length;
    const uint64_t here = address + off;
    const uint64_t there = trampoline + out.size();
    const ZydisInstructionCategory cat = d.insn.meta.category;
    const bool leaves = cat == ZYDIS_CATEGORY_RET || cat == ZYDIS_CATEGORY_UNCOND_BR ||
                        cat == ZYDIS_CATEGORY_INTERRUPT;
    if (leaves && off + len < kJumpBytes)
      return Error(Code::kUnsupported,
                   fmt::format("the function leaves at +{:#x} ({}), before the {}-byte jump ends: "
                               "it is too short to patch",
                               off, ZydisMnemonicGetString(d.insn.mnemonic), kJumpBytes));
    p.starts.push_back(off);
    uint64_t target = 0;
    if (BranchTarget(d, here, &target)) {
      switch (d.insn.mnemonic) {
        case ZYDIS_MNEMONIC_JMP:
          AbsoluteJump(out, target);
          break;
        case ZYDIS_MNEMONIC_CALL:
          // call qword [rip+2]; jmp +8; dq target: returns to the jmp, which skips the address.
          out.insert(out.end(), {0xff, 0x15, 0x02, 0, 0, 0, 0xeb, 0x08});
          PutU64(out, target);
          break;
        default: {
          // jrcxz and loop have no 32-bit form, nor an inverse to skip a far jump with.
          const ZydisMnemonic mn = d.insn.mnemonic;
          if (cat != ZYDIS_CATEGORY_COND_BR || mn == ZYDIS_MNEMONIC_JRCXZ ||
              mn == ZYDIS_MNEMONIC_JECXZ || mn == ZYDIS_MNEMONIC_JCXZ ||
              mn == ZYDIS_MNEMONIC_LOOP || mn == ZYDIS_MNEMONIC_LOOPE ||
              mn == ZYDIS_MNEMONIC_LOOPNE)
            return Error(Code::kUnsupported,
                         fmt::format("the {} at +{:#x} cannot run elsewhere",
                                     ZydisMnemonicGetString(d.insn.mnemonic), off));
          // jcc: the inverse condition skips an absolute jump to the target.
          const uint8_t* raw = function.data() + off;
          size_t op = d.insn.raw.prefix_count;
          uint8_t cc = raw[op] == 0x0f ? raw[op + 1] & 0x0f : raw[op] & 0x0f;
          out.push_back(static_cast<uint8_t>(0x70 | (cc ^ 1)));
          out.push_back(14);
          AbsoluteJump(out, target);
          break;
        }
      }
    } else if (IsRipRelativeMemory(d)) {
      if (d.insn.raw.disp.size != 32)
        return Error(Code::kUnsupported,
                     fmt::format("the instruction at +{:#x} has a RIP-relative operand fay "
                                 "cannot move",
                                 off));
      const uint64_t operand = here + len + static_cast<uint64_t>(d.insn.raw.disp.value);
      const int64_t disp = static_cast<int64_t>(operand - (there + len));
      if (!FitsRel32(disp))
        return Error(Code::kUnsupported,
                     fmt::format("the RIP-relative operand of the instruction at +{:#x} is out "
                                 "of the trampoline's reach",
                                 off));
      size_t at = out.size();
      out.insert(out.end(), function.begin() + off, function.begin() + off + len);
      int32_t d32 = static_cast<int32_t>(disp);
      std::memcpy(out.data() + at + d.insn.raw.disp.offset, &d32, sizeof d32);
    } else {
      out.insert(out.end(), function.begin() + off, function.begin() + off + len);
    }
    p.length += len;
  }
  JumpBack(out, trampoline + out.size(), address + p.length);

  // No branch in the function may land inside the displaced bytes: it would find the jump's
  // middle there. A linear sweep sees every direct branch of ordinary compiled code.
  for (size_t off = 0; off < function.size();) {
    Decoded d;
    if (!dec.At(function, off, &d)) break;  // padding or data after the code: nothing to see
    uint64_t target = 0;
    if (BranchTarget(d, address + off, &target) && target > address && target < address + p.length)
      return Error(Code::kUnsupported,
                   fmt::format("the branch at +{:#x} jumps to +{:#x}, inside the {} bytes the "
                               "jump replaces",
                               off, target - address, p.length));
    off += d.insn.length;
  }
  return p;
}

Expected<std::vector<uint8_t>> JumpTo(uint64_t address, uint64_t to) {
  int64_t rel = static_cast<int64_t>(to - (address + kJumpBytes));
  if (!FitsRel32(rel))
    return Error(
        Code::kUnsupported,
        fmt::format("the trampoline at {:#x} is out of a jump's reach from {:#x}", to, address));
  std::vector<uint8_t> out = {0xe9};
  PutU32(out, static_cast<uint32_t>(static_cast<int32_t>(rel)));
  return out;
}

}  // namespace fay::inproc
