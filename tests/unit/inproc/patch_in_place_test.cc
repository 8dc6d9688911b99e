// The relocation run for real: functions of this test binary are patched in place to jump to a
// trampoline holding their relocated first instructions, called, and given their bytes back.
// With nothing between the jump and the relocated code they must compute exactly what they did.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "inproc/code_block.h"
#include "inproc/relocate.h"

namespace fay::inproc {
namespace {

volatile int g_scale = 7;

// A RIP-relative load first (g_scale), at any optimisation level.
__attribute__((noinline)) int Scaled(int x) {
  return x * g_scale + 1;
}

// Calls itself: every recursive call goes through the patched entry again.
__attribute__((noinline)) long Fib(long n) {
  return n < 2 ? n : Fib(n - 1) + Fib(n - 2);
}

// Patches `fn`, runs `check`, and puts the bytes back; returns the bytes seen after restoring.
template <typename Check>
void PatchAround(const void* fn, Check check) {
  const uint64_t at = reinterpret_cast<uint64_t>(fn);
  // Enough of the function to decode its start and sweep for branches; the functions above are
  // far longer than the jump, and what follows them is code too.
  std::vector<uint8_t> original(64);
  std::memcpy(original.data(), fn, original.size());
  auto block = CodeBlock::MapNear(at, 4096);
  ASSERT_TRUE(block.ok()) << block.status().message();
  auto p = RelocatePrologue(original, at, block->address());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(block->Write(0, p->trampoline).ok());
  ASSERT_TRUE(block->Seal().ok());
  auto jump = JumpTo(at, block->address());
  ASSERT_TRUE(jump.ok()) << jump.status().message();
  ASSERT_TRUE(PokeCode(at, *jump).ok());
  EXPECT_EQ(std::memcmp(fn, jump->data(), jump->size()), 0);
  check();
  ASSERT_TRUE(PokeCode(at, std::span<const uint8_t>(original.data(), p->length)).ok());
  EXPECT_EQ(std::memcmp(fn, original.data(), original.size()), 0) << "bytes not restored";
}

// Called through these, so that every call goes to the patched entry (no clone, no inlining).
int (*volatile scaled)(int) = &Scaled;
long (*volatile fib)(long) = &Fib;

TEST(PatchInPlace, TheJumpIsTaken) {
  // A trampoline that returns 42 instead: the patched entry is what the calls reach.
  const uint64_t at = reinterpret_cast<uint64_t>(&Scaled);
  std::vector<uint8_t> original(kJumpBytes);
  std::memcpy(original.data(), reinterpret_cast<const void*>(at), original.size());
  auto block = CodeBlock::MapNear(at, 64);
  ASSERT_TRUE(block.ok()) << block.status().message();
  ASSERT_TRUE(block->Write(0, std::vector<uint8_t>{0xb8, 42, 0, 0, 0, 0xc3}).ok());
  ASSERT_TRUE(block->Seal().ok());
  ASSERT_TRUE(PokeCode(at, *JumpTo(at, block->address())).ok());
  EXPECT_EQ(scaled(5), 42);
  ASSERT_TRUE(PokeCode(at, original).ok());
  EXPECT_EQ(scaled(5), 36);
}

TEST(PatchInPlace, ARipRelativeFunctionComputesTheSame) {
  PatchAround(reinterpret_cast<const void*>(&Scaled), [] {
    for (int x = -3; x <= 3; ++x) EXPECT_EQ(scaled(x), x * 7 + 1);
  });
  EXPECT_EQ(scaled(5), 36);
}

TEST(PatchInPlace, ARecursiveFunctionComputesTheSame) {
  PatchAround(reinterpret_cast<const void*>(&Fib), [] { EXPECT_EQ(fib(20), 6765); });
  EXPECT_EQ(fib(10), 55);
}

TEST(CodeBlock, IsWithinAJumpOfItsAddress) {
  const uint64_t at = reinterpret_cast<uint64_t>(&Scaled);
  auto block = CodeBlock::MapNear(at, 100);
  ASSERT_TRUE(block.ok()) << block.status().message();
  EXPECT_EQ(block->size(), 4096u);
  EXPECT_TRUE(JumpTo(at, block->address()).ok());
  EXPECT_FALSE(block->Write(4000, std::vector<uint8_t>(200)).ok());
}

}  // namespace
}  // namespace fay::inproc
