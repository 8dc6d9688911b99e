// Moving a function's first instructions to a trampoline: exact bytes out for each kind of
// instruction, and the refusals with their reasons.
#include "inproc/relocate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace fay::inproc {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kFunc = 0x401000;
constexpr uint64_t kTramp = 0x402000;  // 0x1000 above: within every reach

Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Bytes U32(uint32_t v) {
  Bytes b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}
Bytes U64(uint64_t v) {
  Bytes b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}
// jmp rel32 from `at` to `to`.
Bytes Jmp(uint64_t at, uint64_t to) {
  return Cat({{0xe9}, U32(static_cast<uint32_t>(to - (at + 5)))});
}

TEST(RelocatePrologue, PlainInstructionsMoveAsTheyAreAndJumpBack) {
  // push rbp; mov rbp, rsp; sub rsp, 0x10; ... : the first three cover the jump.
  Bytes f = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0x89, 0x7d, 0xfc, 0xc9, 0xc3};
  auto p = RelocatePrologue(f, kFunc, kTramp);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->length, 8u);
  EXPECT_EQ(p->starts, (std::vector<size_t>{0, 1, 4}));
  EXPECT_EQ(p->trampoline, Cat({Bytes(f.begin(), f.begin() + 8), Jmp(kTramp + 8, kFunc + 8)}));
}

TEST(RelocatePrologue, ARipRelativeFirstInstructionKeepsItsOperand) {
  // mov rax, [rip+0x100]; ret: the operand is at kFunc + 7 + 0x100 wherever the code runs.
  Bytes f = {0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3};
  auto p = RelocatePrologue(f, kFunc, kTramp);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->length, 7u);
  uint32_t disp = static_cast<uint32_t>((kFunc + 7 + 0x100) - (kTramp + 7));
  EXPECT_EQ(p->trampoline, Cat({{0x48, 0x8b, 0x05}, U32(disp), Jmp(kTramp + 7, kFunc + 7)}));
  // A trampoline 3 GiB away cannot reach it.
  auto far = RelocatePrologue(f, kFunc, kFunc + (3ull << 30));
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().message(),
            "the RIP-relative operand of the instruction at +0x0 is out of the trampoline's "
            "reach");
}

TEST(RelocatePrologue, BranchesAndCallsBecomeAbsolute) {
  // test edi, edi; je +0x10; mov rax, rdi
  Bytes f = {0x85, 0xff, 0x74, 0x10, 0x48, 0x89, 0xf8, 0xc3};
  auto p = RelocatePrologue(f, kFunc, kTramp);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->length, 7u);
  // jne over an absolute jump to the je's target (kFunc + 4 + 0x10).
  Bytes want =
      Cat({{0x85, 0xff, 0x75, 14, 0xff, 0x25, 0, 0, 0, 0}, U64(kFunc + 0x14), {0x48, 0x89, 0xf8}});
  want = Cat({want, Jmp(kTramp + want.size(), kFunc + 7)});
  EXPECT_EQ(p->trampoline, want);

  // call rel32 to kFunc + 0x100: a call through an address that returns past it.
  Bytes c = Cat({{0xe8}, U32(0x100 - 5), {0xc3}});
  auto q = RelocatePrologue(c, kFunc, kTramp);
  ASSERT_TRUE(q.ok()) << q.status().message();
  Bytes call = Cat({{0xff, 0x15, 0x02, 0, 0, 0, 0xeb, 0x08}, U64(kFunc + 0x100)});
  EXPECT_EQ(q->trampoline, Cat({call, Jmp(kTramp + call.size(), kFunc + 5)}));

  // A function that is one jmp rel32 (a thunk) moves as an absolute jump.
  Bytes t = Cat({{0xe9}, U32(0x2000 - 5)});
  auto r = RelocatePrologue(t, kFunc, kTramp);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Bytes(r->trampoline.begin(), r->trampoline.begin() + 14),
            Cat({{0xff, 0x25, 0, 0, 0, 0}, U64(kFunc + 0x2000)}));
}

TEST(RelocatePrologue, RefusesWhatCannotBePatchedAndSaysWhy) {
  auto too_short = RelocatePrologue(Bytes{0x31, 0xc0, 0xc3}, kFunc, kTramp);
  ASSERT_FALSE(too_short.ok());
  EXPECT_EQ(too_short.status().message(), "the function is 3 bytes, shorter than the 5-byte jump");

  // xor eax, eax; ret; then the next function's bytes.
  auto leaves = RelocatePrologue(Bytes{0x31, 0xc0, 0xc3, 0x55, 0x48, 0x89, 0xe5}, kFunc, kTramp);
  ASSERT_FALSE(leaves.ok());
  EXPECT_EQ(leaves.status().message(),
            "the function leaves at +0x2 (ret), before the 5-byte jump ends: it is too short to "
            "patch");

  // xor eax, eax; inc eax; inc edi; jne -6 (to +2, inside the displaced 6 bytes)
  auto into =
      RelocatePrologue(Bytes{0x31, 0xc0, 0xff, 0xc0, 0xff, 0xc7, 0x75, 0xfa, 0xc3}, kFunc, kTramp);
  ASSERT_FALSE(into.ok());
  EXPECT_EQ(into.status().message(),
            "the branch at +0x6 jumps to +0x2, inside the 6 bytes the jump replaces");

  // jrcxz +8 cannot run elsewhere (it has no 32-bit form to aim at a far target).
  auto jrcxz = RelocatePrologue(Bytes{0xe3, 0x08, 0x48, 0x89, 0xf8, 0xc3}, kFunc, kTramp);
  ASSERT_FALSE(jrcxz.ok());
  EXPECT_EQ(jrcxz.status().message(), "the jrcxz at +0x0 cannot run elsewhere");

  // loop -2 neither: it decrements rcx, which no jcc does.
  auto loop = RelocatePrologue(Bytes{0x90, 0x90, 0x90, 0xe2, 0xfe, 0xc3}, kFunc, kTramp);
  ASSERT_FALSE(loop.ok());
  EXPECT_EQ(loop.status().message(), "the loop at +0x3 cannot run elsewhere");

  auto undecodable = RelocatePrologue(Bytes{0x06, 0x90, 0x90, 0x90, 0x90}, kFunc, kTramp);
  ASSERT_FALSE(undecodable.ok());  // push es: not an x86-64 instruction
  EXPECT_EQ(undecodable.status().message(), "the instruction at +0x0 cannot be decoded");
}

TEST(RelocatePrologue, ABranchToTheFirstByteIsFine) {
  // push rbx; mov ebx, edi; dec ebx; jne -7 (back to +0: the jump's start, where it is whole)
  Bytes f = {0x53, 0x89, 0xfb, 0xff, 0xcb, 0x75, 0xf9, 0x5b, 0xc3};
  auto p = RelocatePrologue(f, kFunc, kTramp);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->length, 5u);
}

TEST(JumpTo, ReachesWithinTwoGigabytesOnly) {
  auto j = JumpTo(kFunc, kTramp);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(*j, Jmp(kFunc, kTramp));
  EXPECT_FALSE(JumpTo(kFunc, kFunc + (3ull << 30)).ok());
}

}  // namespace
}  // namespace fay::inproc
