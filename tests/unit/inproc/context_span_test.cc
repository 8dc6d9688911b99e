// Which entry programs run on the trampoline's saved registers (context_span.h): real programs
// from fay's code generator, and hand-made ones that let the context escape or read past it.
#include "inproc/context_span.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "../bpf/query_test_util.h"
#include "bpf/codegen/codegen.h"
#include "bpf/emitter.h"
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

// A program that keeps its context in R6, then BODY, then exits.
bool Check(const std::function<void(bpf::Emitter&)>& body) {
  bpf::Emitter e;
  e.Mov(bpf::R6, bpf::R1);
  body(e);
  e.MovImm(bpf::R0, 0);
  e.Exit();
  auto insns = e.Finish();
  EXPECT_TRUE(insns.ok());
  return insns.ok() && ReadsContextOnlyIn(insns->data(), static_cast<uint32_t>(insns->size()),
                                          kPtRegsR11, kPtRegsDiEnd);
}

TEST(ContextSpan, AContextThatEscapesOrIsReadPastTheSpanIsNot) {
  using bpf::Emitter;
  using bpf::R1;
  using bpf::R10;
  using bpf::R2;
  using bpf::R6;
  EXPECT_TRUE(Check([](Emitter& e) { e.Load(8, R1, R6, 112); }));  // di
  // ip (+128) and a load that ends past di are outside; r11 (+48) is the first inside.
  EXPECT_FALSE(Check([](Emitter& e) { e.Load(8, R1, R6, 128); }));
  EXPECT_FALSE(Check([](Emitter& e) { e.Load(8, R1, R6, 116); }));
  EXPECT_TRUE(Check([](Emitter& e) { e.Load(8, R1, R6, 48); }));
  EXPECT_FALSE(Check([](Emitter& e) { e.Load(8, R1, R6, 40); }));
  // Copied elsewhere, moved, or stored: not followed.
  EXPECT_FALSE(Check([](Emitter& e) { e.Mov(R2, R6); }));
  EXPECT_FALSE(Check([](Emitter& e) { e.AluImm(BPF_ADD, R6, 8); }));
  EXPECT_FALSE(Check([](Emitter& e) { e.Store(8, R10, -8, R6); }));
  // Given to bpf_get_attach_cookie, which does not read it in the process: fine; to any other
  // helper, not.
  EXPECT_TRUE(Check([](Emitter& e) {
    e.Mov(R1, R6);
    e.Call(BPF_FUNC_get_attach_cookie);
  }));
  EXPECT_FALSE(Check([](Emitter& e) {
    e.Mov(R1, R6);
    e.Call(BPF_FUNC_get_stackid);
  }));
  // R1 still the context: read through, copied or given to a helper before it is overwritten.
  EXPECT_FALSE(Check([](Emitter& e) { e.Load(8, R2, R1, 200); }));
  EXPECT_FALSE(Check([](Emitter& e) { e.Mov(R2, R1); }));
  EXPECT_FALSE(Check([](Emitter& e) { e.Call(BPF_FUNC_get_stackid); }));
  EXPECT_TRUE(Check([](Emitter& e) {
    e.MovImm(R1, 0);
    e.Mov(R2, R1);
  }));
  // A program that does not start by keeping its context in R6.
  bpf::Emitter other;
  other.MovImm(bpf::R0, 0);
  other.Exit();
  auto insns = other.Finish();
  ASSERT_TRUE(insns.ok());
  EXPECT_FALSE(ReadsContextOnlyIn(insns->data(), static_cast<uint32_t>(insns->size()), kPtRegsR11,
                                  kPtRegsDiEnd));
}

}  // namespace
}  // namespace fay::inproc
