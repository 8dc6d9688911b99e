// Entry probes patched into this test binary's functions: the handler sees every call with its
// arguments, from every thread, the function computes what it did, and removing the patch gives
// the original bytes back.
#include "inproc/patcher.h"

#include <gtest/gtest.h>

#include <setjmp.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
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

namespace fay::inproc {
namespace {

__attribute__((noinline)) long Depth(long n) {
  asm volatile("");
  return n <= 0 ? 0 : 1 + Depth(n - 1);
}
long (*volatile depth)(long) = &Depth;

jmp_buf g_jump;
__attribute__((noinline)) long Jumper(long n) {
  asm volatile("");
  if (n < 0) return 0;
  if (n == 0) longjmp(g_jump, 1);
  return 1 + Jumper(n - 1);
}
long (*volatile jumper)(long) = &Jumper;

// Calls Jumper, which longjmps back here past its four frames; then returns normally.
__attribute__((noinline)) long Outer(long n) {
  asm volatile("");
  if (setjmp(g_jump) == 0) jumper(n);
  return 7;
}
long (*volatile outer)(long) = &Outer;

struct Returns {
  std::vector<uint64_t> values;
  std::vector<uint64_t> first_args;  // each return's entry record's first argument
  uint64_t entries = 0;
  uint64_t min_latency = UINT64_MAX;
};

void OnEntry(void* context, const EntryRegs*) {
  ++static_cast<Returns*>(context)->entries;
}

void OnReturn(void* context, uint64_t ret, const EntryRecord* entry, uint64_t) {
  auto* r = static_cast<Returns*>(context);
  r->values.push_back(ret);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + ts.tv_nsec;
  if (entry) {
    r->min_latency = std::min(r->min_latency, now - entry->ns);
    r->first_args.push_back(entry->args[0]);
  }
}

TEST(ReturnPatch, RecursionReturnsInOrderWithEveryValue) {
  Returns r;
  auto patch =
      EntryPatch::InstallReturn(reinterpret_cast<uint64_t>(&Depth), 64, &OnEntry, &OnReturn, &r);
  ASSERT_TRUE(patch.ok()) << patch.status().message();
  EXPECT_EQ(depth(5), 5);
  EXPECT_EQ(r.entries, 6u);
  // The innermost call returns first: 0, 1, ..., 5.
  EXPECT_EQ(r.values, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  // Each return gets its own entry's record: Depth(n) returns n.
  EXPECT_EQ(r.first_args, r.values);
  EXPECT_LT(r.min_latency, 1'000'000'000u);
}

TEST(ReturnPatch, ALongjmpOutOfProbedFramesIsCountedAndTheReturnBelowIsRight) {
  Returns jumps, outers;
  auto inner = EntryPatch::InstallReturn(reinterpret_cast<uint64_t>(&Jumper), 64, nullptr,
                                         &OnReturn, &jumps);
  ASSERT_TRUE(inner.ok()) << inner.status().message();
  auto patch = EntryPatch::InstallReturn(reinterpret_cast<uint64_t>(&Outer), 64, nullptr, &OnReturn,
                                         &outers);
  ASSERT_TRUE(patch.ok()) << patch.status().message();
  const uint64_t skipped = ReturnStats().skipped;
  EXPECT_EQ(outer(3), 7);  // four probed Jumper frames that never return, then Outer's return
  EXPECT_TRUE(jumps.values.empty());
  EXPECT_EQ(outers.values, std::vector<uint64_t>{7});
  EXPECT_EQ(ReturnStats().skipped - skipped, 4u);
  // Probes still work after it.
  Returns d;
  auto depth_patch =
      EntryPatch::InstallReturn(reinterpret_cast<uint64_t>(&Depth), 64, nullptr, &OnReturn, &d);
  ASSERT_TRUE(depth_patch.ok()) << depth_patch.status().message();
  EXPECT_EQ(depth(2), 2);
  EXPECT_EQ(d.values, (std::vector<uint64_t>{0, 1, 2}));
}

TEST(ReturnPatch, ThreadsKeepTheirOwnShadowStacks) {
  static std::atomic<uint64_t> returns{0}, sum{0};
  auto count = [](void*, uint64_t ret, const EntryRecord*, uint64_t) {
    returns.fetch_add(1);
    sum.fetch_add(ret);
  };
  auto patch =
      EntryPatch::InstallReturn(reinterpret_cast<uint64_t>(&Depth), 64, nullptr, count, nullptr);
  ASSERT_TRUE(patch.ok()) << patch.status().message();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) EXPECT_EQ(depth(3), 3);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(returns.load(), 4u * 1000 * 4);  // four returns a call
  EXPECT_EQ(sum.load(), 4u * 1000 * (0 + 1 + 2 + 3));
}

}  // namespace
}  // namespace fay::inproc

namespace fay::inproc {
namespace {

void (*volatile g_inside)() = nullptr;

__attribute__((noinline)) long CallsBack(long n) {
  asm volatile("");
  if (g_inside) g_inside();
  return n + 1;
}
long (*volatile calls_back)(long) = &CallsBack;

std::unique_ptr<EntryPatch> g_patch;

TEST(ReturnPatch, APatchRemovedWhileItsFunctionRunsStillReturnsRightAndSaysNothing) {
  Returns r;
  auto patch = EntryPatch::InstallReturn(reinterpret_cast<uint64_t>(&CallsBack), 64, &OnEntry,
                                         &OnReturn, &r);
  ASSERT_TRUE(patch.ok()) << patch.status().message();
  g_patch = std::move(patch).value();
  g_inside = [] { g_patch.reset(); };  // gone while the call is in flight
  EXPECT_EQ(calls_back(41), 42);
  g_inside = nullptr;
  EXPECT_EQ(r.entries, 1u);
  EXPECT_TRUE(r.values.empty());  // its return handler's context may be gone: not called
  EXPECT_EQ(calls_back(1), 2);    // and the function is as it was
}

}  // namespace
}  // namespace fay::inproc
