#include "bpf/disasm.h"

#include <gtest/gtest.h>

#include "bpf/emitter.h"

namespace fay::bpf {
namespace {

bpf_insn I(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst;
  i.src_reg = src;
  i.off = off;
  i.imm = imm;
  return i;
}

std::string One(const bpf_insn& i) {
  return DisassembleInsn(i, nullptr, 0);
}

TEST(Disasm, Alu) {
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_X | BPF_ADD, 1, 2, 0, 0)), "r1 += r2");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_K | BPF_ADD, 2, 0, 0, -8)), "r2 += -8");
  EXPECT_EQ(One(I(BPF_ALU | BPF_K | BPF_RSH, 3, 0, 0, 4)), "w3 >>= 4");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_K | BPF_ARSH, 3, 0, 0, 1)), "r3 s>>= 1");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_X | BPF_MOV, 6, 1, 0, 0)), "r6 = r1");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_K | BPF_MOV, 0, 0, 0, 0)), "r0 = 0");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_K | BPF_NEG, 4, 0, 0, 0)), "r4 = -r4");
  EXPECT_EQ(One(I(BPF_ALU | BPF_X | BPF_MOV, 1, 1, 0, 0)), "w1 = w1");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_X | BPF_DIV, 1, 2, 1, 0)), "r1 s/= r2");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_X | BPF_MOD, 1, 2, 1, 0)), "r1 s%= r2");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_X | BPF_DIV, 1, 2, 0, 0)), "r1 /= r2");
  EXPECT_EQ(One(I(BPF_ALU | BPF_END | BPF_X, 1, 0, 0, 16)), "r1 = be16 r1");
  EXPECT_EQ(One(I(BPF_ALU64 | BPF_END, 1, 0, 0, 32)), "r1 = bswap32 r1");
}

TEST(Disasm, MovsxFromTheEmitter) {
  Emitter e;
  e.SignExtend32(R5);
  e.Alu(BPF_DIV, R1, R2, /*sdiv=*/true);
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  EXPECT_EQ(One((*insns)[0]), "r5 = (s32)r5");
  EXPECT_EQ(One((*insns)[1]), "r1 s/= r2");
  EXPECT_EQ(One(I(BPF_ALU | BPF_X | BPF_MOV, 2, 3, 8, 0)), "w2 = (s8)w3");
}

TEST(Disasm, Memory) {
  EXPECT_EQ(One(I(BPF_LDX | BPF_MEM | BPF_DW, 1, 6, 16, 0)), "r1 = *(u64 *)(r6 +16)");
  EXPECT_EQ(One(I(BPF_LDX | BPF_MEM | BPF_B, 1, 10, -1, 0)), "r1 = *(u8 *)(r10 -1)");
  EXPECT_EQ(One(I(BPF_LDX | 0x80 | BPF_W, 2, 1, 8, 0)), "r2 = *(s32 *)(r1 +8)");
  EXPECT_EQ(One(I(BPF_STX | BPF_MEM | BPF_W, 10, 3, -4, 0)), "*(u32 *)(r10 -4) = r3");
  EXPECT_EQ(One(I(BPF_ST | BPF_MEM | BPF_DW, 10, 0, -8, 0)), "*(u64 *)(r10 -8) = 0");
  EXPECT_EQ(One(I(BPF_STX | BPF_ATOMIC | BPF_DW, 0, 1, 0, BPF_ADD)), "lock *(u64 *)(r0 +0) += r1");
  EXPECT_EQ(One(I(BPF_STX | BPF_ATOMIC | BPF_DW, 0, 1, 8, BPF_ADD | BPF_FETCH)),
            "r1 = atomic64_fetch_add((u64 *)(r0 +8), r1)");
  EXPECT_EQ(One(I(BPF_STX | BPF_ATOMIC | BPF_W, 0, 1, 0, BPF_CMPXCHG)),
            "w0 = atomic_cmpxchg((u32 *)(r0 +0), w0, w1)");
}

TEST(Disasm, LdImm64) {
  Emitter e;
  e.LdImm64(R1, 0x1122334455667788ULL);
  e.LdMap(R2, 2);
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  EXPECT_EQ(DisassembleInsn((*insns)[0], &(*insns)[1], 0), "r1 = 0x1122334455667788 ll");
  // After relocation imm holds the map fd; before, the index. Either is what we show.
  (*insns)[2].imm = 2;
  EXPECT_EQ(DisassembleInsn((*insns)[2], &(*insns)[3], 2), "r2 = map[2] ll");
}

TEST(Disasm, JumpsCallsExit) {
  EXPECT_EQ(DisassembleInsn(I(BPF_JMP | BPF_K | BPF_JNE, 0, 0, 5, 1234), nullptr, 3),
            "if r0 != 1234 goto +5");
  EXPECT_EQ(One(I(BPF_JMP32 | BPF_X | BPF_JSLT, 1, 2, -3, 0)), "if w1 s< w2 goto -3");
  EXPECT_EQ(One(I(BPF_JMP | BPF_JA, 0, 0, 2, 0)), "goto +2");
  EXPECT_EQ(One(I(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem)),
            "call map_lookup_elem#1");
  EXPECT_EQ(One(I(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_current_pid_tgid)),
            "call get_current_pid_tgid#14");
  EXPECT_EQ(One(I(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ringbuf_output)),
            "call ringbuf_output#130");
  EXPECT_EQ(One(I(BPF_JMP | BPF_CALL, 0, 0, 0, 99999)), "call helper#99999");
  EXPECT_EQ(One(I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)), "exit");
  EXPECT_EQ(HelperName(BPF_FUNC_probe_read_user_str), "probe_read_user_str");
  EXPECT_EQ(HelperName(BPF_FUNC_get_stackid), "get_stackid");
  EXPECT_EQ(HelperName(0), "");
}

TEST(Disasm, ListingWithLabelsAndComments) {
  Emitter e;
  Label out = e.NewLabel();
  e.Comment("pid filter");
  e.Call(BPF_FUNC_get_current_pid_tgid);
  e.AluImm(BPF_RSH, R0, 32);
  e.JmpIfImm(BPF_JNE, R0, 42, out);
  e.Comment("counter map");
  e.LdMap(R1, 0);
  e.Bind(out);
  e.MovImm(R0, 0);
  e.Comment("done");
  e.Exit();
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  std::string want =
      "   0: call get_current_pid_tgid#14   ; pid filter\n"
      "   1: r0 >>= 32\n"
      "   2: if r0 != 42 goto +2 <L0>\n"
      "   3: r1 = map[0] ll                 ; counter map\n"
      "L0:\n"
      "   5: r0 = 0\n"
      "   6: exit                           ; done\n";
  EXPECT_EQ(Disassemble(*insns, e.comments()), want);
}

TEST(Disasm, UnknownOpcodeIsShownNotHidden) {
  EXPECT_EQ(One(I(0xff, 0, 0, 0, 0)), "<unknown opcode 0xff>");
}

}  // namespace
}  // namespace fay::bpf
