// Entry probes patched into this test binary's functions: the handler sees every call with its
// arguments, from every thread, the function computes what it did, and removing the patch gives
// the original bytes back.
#include "inproc/patcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace fay::inproc {
namespace {

__attribute__((noinline)) long Mix(long a, long b) {
  asm volatile("");
  return a * 31 + b;
}

__attribute__((noinline)) double Half(double x) {
  asm volatile("");
  return x / 2;
}

long (*volatile mix)(long, long) = &Mix;
double (*volatile half)(double) = &Half;

struct Seen {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> sum_a{0};
};

void Count(void* context, const EntryRegs* regs) {
  auto* seen = static_cast<Seen*>(context);
  seen->calls.fetch_add(1, std::memory_order_relaxed);
  seen->sum_a.fetch_add(regs->Arg(0), std::memory_order_relaxed);
}

// Clobbers what a handler may: the floating-point registers too.
void Clobber(void* context, const EntryRegs*) {
  volatile double d = 1.0;
  for (int i = 0; i < 4; ++i) d = d * 3.0 + 1.0;
  static_cast<Seen*>(context)->calls.fetch_add(1);
}

TEST(EntryPatch, EveryCallFromEveryThreadWithItsArguments) {
  Seen seen;
  const uint64_t at = reinterpret_cast<uint64_t>(&Mix);
  std::vector<uint8_t> before(16);
  std::memcpy(before.data(), reinterpret_cast<const void*>(&Mix), before.size());
  {
    auto patch = EntryPatch::Install(at, 64, &Count, &seen);
    ASSERT_TRUE(patch.ok()) << patch.status().message();
    constexpr int kThreads = 4, kCalls = 100000;
    std::vector<std::thread> threads;
    std::atomic<long> wrong{0};
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (long i = 0; i < kCalls; ++i)
          if (mix(i, t) != i * 31 + t) wrong.fetch_add(1);
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(seen.calls.load(), uint64_t{kThreads} * kCalls);
    // sum over threads of sum(0..kCalls-1)
    EXPECT_EQ(seen.sum_a.load(), uint64_t{kThreads} * (uint64_t{kCalls} * (kCalls - 1) / 2));
    ASSERT_TRUE((*patch)->Remove().ok());
    EXPECT_EQ(std::memcmp(before.data(), reinterpret_cast<const void*>(at), before.size()), 0);
    EXPECT_EQ(mix(2, 3), 65);
    EXPECT_EQ(seen.calls.load(), uint64_t{kThreads} * kCalls);  // removed: not counted
  }
  EXPECT_EQ(std::memcmp(before.data(), reinterpret_cast<const void*>(at), before.size()), 0);
}

TEST(EntryPatch, FloatingPointArgumentsSurviveTheHandler) {
  Seen seen;
  auto patch = EntryPatch::Install(reinterpret_cast<uint64_t>(&Half), 64, &Clobber, &seen);
  ASSERT_TRUE(patch.ok()) << patch.status().message();
  EXPECT_EQ(half(5.0), 2.5);
  EXPECT_EQ(half(-1.0), -0.5);
  EXPECT_EQ(seen.calls.load(), 2u);
}

TEST(EntryPatch, CostOfAHit) {
  // Not a limit (the bench measures): printed for a first look at the order of magnitude.
  Seen seen;
  auto time_calls = [] {
    auto t0 = std::chrono::steady_clock::now();
    long s = 0;
    for (long i = 0; i < 2000000; ++i) s += mix(i, 1);
    auto t1 = std::chrono::steady_clock::now();
    EXPECT_NE(s, 0);
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / 2000000;
  };
  double plain = time_calls();
  auto patch = EntryPatch::Install(reinterpret_cast<uint64_t>(&Mix), 64, &Count, &seen);
  ASSERT_TRUE(patch.ok()) << patch.status().message();
  double patched = time_calls();
  std::printf("untraced %.1f ns a call, with an in-process entry probe %.1f ns\n", plain, patched);
  EXPECT_EQ(seen.calls.load(), 2000000u);
}

}  // namespace
}  // namespace fay::inproc
