// Which entry programs run on the trampoline's saved registers (context_span.h): real programs
// from fay's code generator, and hand-made ones that let the context escape or read past it.
#include "inproc/context_span.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../bpf/query_test_util.h"
#include "bpf/codegen/codegen.h"
#include "inproc/patcher.h"

extern "C" __attribute__((noinline, used)) long fay_context_span_target(long a, long b) {
  asm volatile("" : "+r"(a), "+r"(b));
  return a + b;
}

namespace fay::inproc {
namespace {

std::string Exe() {
  char exe[4096] = {};
  EXPECT_GT(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
  return exe;
}

// Whether each program fay generates for QUERY reads only the EntryRegs span, in order.
std::vector<bool> ArgsOnly(const std::string& probe, const std::string& stages) {
  auto plan =
      bpf::testing::CompileOrDie(probe + ":" + Exe() + ":fay_context_span_target | " + stages);
  EXPECT_TRUE(plan);
  std::vector<bool> out;
  if (!plan) return out;
  auto gen = bpf::Generate(*plan, bpf::CodegenOptions{});
  EXPECT_TRUE(gen.ok()) << gen.status().message();
  if (!gen.ok()) return out;
  for (const auto& p : gen->programs)
    out.push_back(ReadsContextOnlyIn(p.insns.data(), static_cast<uint32_t>(p.insns.size()),
                                     kPtRegsR11, kPtRegsDiEnd));
  return out;
}

TEST(ContextSpan, EntryProgramsOfArgumentsRunOnTheSavedRegisters) {
  EXPECT_EQ(ArgsOnly("uprobe", "count()"), std::vector<bool>{true});
  EXPECT_EQ(ArgsOnly("uprobe", "count() by arg0, arg5"), std::vector<bool>{true});
  EXPECT_EQ(ArgsOnly("uprobe", "where arg1 > 3 | hist(arg1)"), std::vector<bool>{true});
  // An entry kept for the return is keyed by the stack pointer (pt_regs.sp, past the span), and
  // so is the return's lookup of it.
  EXPECT_EQ(ArgsOnly("uretprobe", "count() by retval, arg0"), (std::vector<bool>{false, false}));
}

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst;
  i.src_reg = src;
  i.off = off;
  i.imm = imm;
  return i;
}

TEST(ContextSpan, AContextThatEscapesOrIsReadPastTheSpanIsNot) {
  const bpf_insn keep = Insn(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0);
  const bpf_insn exit_insn = Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  auto check = [&](std::vector<bpf_insn> body) {
    std::vector<bpf_insn> p{keep};
    p.insert(p.end(), body.begin(), body.end());
    p.push_back(exit_insn);
    return ReadsContextOnlyIn(p.data(), static_cast<uint32_t>(p.size()), kPtRegsR11, kPtRegsDiEnd);
  };
  const bpf_insn load_di = Insn(BPF_LDX | BPF_MEM | BPF_DW, 1, 6, 112, 0);
  EXPECT_TRUE(check({load_di}));
  // ip (+128) and the last byte past di are outside; r11 (+48) is the first inside.
  EXPECT_FALSE(check({Insn(BPF_LDX | BPF_MEM | BPF_DW, 1, 6, 128, 0)}));
  EXPECT_FALSE(check({Insn(BPF_LDX | BPF_MEM | BPF_DW, 1, 6, 116, 0)}));
  EXPECT_TRUE(check({Insn(BPF_LDX | BPF_MEM | BPF_DW, 1, 6, 48, 0)}));
  EXPECT_FALSE(check({Insn(BPF_LDX | BPF_MEM | BPF_DW, 1, 6, 40, 0)}));
  // Copied elsewhere, moved, or stored through: not followed.
  EXPECT_FALSE(check({Insn(BPF_ALU64 | BPF_MOV | BPF_X, 2, 6, 0, 0)}));
  EXPECT_FALSE(check({Insn(BPF_ALU64 | BPF_ADD | BPF_K, 6, 0, 0, 8)}));
  EXPECT_FALSE(check({Insn(BPF_STX | BPF_MEM | BPF_DW, 10, 6, -8, 0)}));
  // Given to bpf_get_attach_cookie, which does not read it in the process: fine.
  EXPECT_TRUE(check({Insn(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
                     Insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_attach_cookie)}));
  // ... but to any other helper, not.
  EXPECT_FALSE(check({Insn(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
                      Insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_stackid)}));
  // A program that does not start by keeping its context in R6.
  std::vector<bpf_insn> other{Insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0), exit_insn};
  EXPECT_FALSE(ReadsContextOnlyIn(other.data(), 2, kPtRegsR11, kPtRegsDiEnd));
}

}  // namespace
}  // namespace fay::inproc
