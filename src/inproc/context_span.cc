#include "inproc/context_span.h"

namespace fay::inproc {
namespace {

// After `r6 = r1`, R1 still holds the context until written. Whether the straight run of
// instructions from the second on writes R1 (a move of something else, a load, an ld_imm64)
// before anything reads it or control leaves the run: then only R6 carries the context on.
bool R1OverwrittenFirst(const bpf_insn* insns, uint32_t n) {
  for (uint32_t i = 1; i < n; ++i) {
    const bpf_insn& in = insns[i];
    const uint8_t cls = BPF_CLASS(in.code);
    const bool x = BPF_SRC(in.code) == BPF_X;
    if (cls == BPF_JMP || cls == BPF_JMP32) return false;  // a call, a branch or the exit
    if (cls == BPF_LD) {
      if (BPF_MODE(in.code) != BPF_IMM) return false;
      if (in.dst_reg == 1) return true;
      ++i;
      continue;
    }
    if (cls == BPF_LDX) {
      if (in.src_reg == 1) return false;
      if (in.dst_reg == 1) return true;
      continue;
    }
    if (cls == BPF_ST || cls == BPF_STX) {
      if (in.dst_reg == 1 || (cls == BPF_STX && in.src_reg == 1)) return false;
      continue;
    }
    if (cls == BPF_ALU || cls == BPF_ALU64) {
      if (x && in.src_reg == 1) return false;
      if (in.dst_reg == 1) return BPF_OP(in.code) == BPF_MOV;  // any other op reads it
      continue;
    }
    return false;
  }
  return false;
}

}  // namespace

std::optional<uint32_t> ContextFieldsRead(const bpf_insn* insns, uint32_t n) {
  constexpr uint8_t kCtx = 6;
  if (n == 0 || insns[0].code != (BPF_ALU64 | BPF_MOV | BPF_X) || insns[0].dst_reg != kCtx ||
      insns[0].src_reg != 1 || !R1OverwrittenFirst(insns, n))
    return std::nullopt;
  uint32_t fields = 0;
  for (uint32_t i = 1; i < n; ++i) {
    const bpf_insn& in = insns[i];
    const uint8_t cls = BPF_CLASS(in.code);
    if (cls == BPF_LD) {  // ld_imm64 (two slots); a legacy packet load reads R6 implicitly
      if (in.dst_reg == kCtx || BPF_MODE(in.code) != BPF_IMM) return std::nullopt;
      if (BPF_MODE(in.code) == BPF_IMM) ++i;
      continue;
    }
    if (cls == BPF_LDX) {
      if (in.dst_reg == kCtx) return std::nullopt;
      if (in.src_reg == kCtx) {
        const int size = BPF_SIZE(in.code) == BPF_DW  ? 8
                         : BPF_SIZE(in.code) == BPF_W ? 4
                         : BPF_SIZE(in.code) == BPF_H ? 2
                                                      : 1;
        if (in.off < 0 || in.off + size > 8 * kPtRegsFields) return std::nullopt;
        for (int f = in.off / 8; f <= (in.off + size - 1) / 8; ++f) fields |= 1u << f;
      }
      continue;
    }
    if (cls == BPF_ST || cls == BPF_STX) {
      if (in.dst_reg == kCtx || (cls == BPF_STX && in.src_reg == kCtx)) return std::nullopt;
      continue;
    }
    if (cls == BPF_ALU || cls == BPF_ALU64) {
      if (in.dst_reg == kCtx) return std::nullopt;
      if (BPF_SRC(in.code) == BPF_X && in.src_reg == kCtx) {
        // r1 = r6 for bpf_get_attach_cookie(ctx), which does not read it in the process.
        const bool cookie = cls == BPF_ALU64 && BPF_OP(in.code) == BPF_MOV && in.dst_reg == 1 &&
                            i + 1 < n && insns[i + 1].code == (BPF_JMP | BPF_CALL) &&
                            insns[i + 1].src_reg == 0 &&
                            insns[i + 1].imm == BPF_FUNC_get_attach_cookie;
        if (!cookie) return std::nullopt;
      }
      continue;
    }
    // Jumps: one comparing R6 would be a use we do not follow.
    if ((cls == BPF_JMP || cls == BPF_JMP32) && BPF_SRC(in.code) == BPF_X && in.src_reg == kCtx)
      return std::nullopt;
    if ((cls == BPF_JMP || cls == BPF_JMP32) && in.dst_reg == kCtx && BPF_OP(in.code) != BPF_CALL &&
        BPF_OP(in.code) != BPF_EXIT && BPF_OP(in.code) != BPF_JA)
      return std::nullopt;
  }
  return fields;
}

bool ReadsContextOnlyIn(const bpf_insn* insns, uint32_t n, int lo, int hi) {
  const std::optional<uint32_t> fields = ContextFieldsRead(insns, n);
  return fields && (*fields & ~FieldsWithin(lo, hi)) == 0;
}

}  // namespace fay::inproc
