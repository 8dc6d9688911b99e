// CLOCK_MONOTONIC for in-process probes from one rdtsc: the vDSO's clock_gettime costs 32 ns a
// read on this VM against 12 ns for rdtsc, and a return probe's latency reads the clock twice.
// fay, a long-lived process, measures the TSC's rate against CLOCK_MONOTONIC and publishes a
// mapping in the shared region (a seqlock); the runtimes only read it. It is used only where
// the TSC is constant and non-stop and either the kernel's own clocksource or, under
// kvm-clock, seen to agree on every CPU (TscCalibration::Kind); elsewhere `usable` stays 0 and
// the probes call clock_gettime.
#pragma once

#include <x86intrin.h>

#include <atomic>
#include <cstdint>

namespace fay::inproc {

struct TscClock {
  std::atomic<uint32_t> seq;     // odd while fay rewrites the mapping
  std::atomic<uint32_t> usable;  // 0: read clock_gettime instead
  // ns = base_ns + ((tsc - base_tsc) * mult) >> 32
  std::atomic<uint64_t> base_tsc, base_ns, mult;
};

// The mapped time, or 0 when the clock is not usable or fay is rewriting it at this moment.
inline uint64_t ReadTscClock(const TscClock& c) {
  const uint32_t s = c.seq.load(std::memory_order_acquire);
  if ((s & 1) || !c.usable.load(std::memory_order_relaxed)) return 0;
  const uint64_t base_tsc = c.base_tsc.load(std::memory_order_relaxed);
  const uint64_t base_ns = c.base_ns.load(std::memory_order_relaxed);
  const uint64_t mult = c.mult.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (c.seq.load(std::memory_order_relaxed) != s) return 0;
  const uint64_t tsc = __rdtsc();
  // A TSC read just before the base (another CPU's counter a few cycles behind) maps to it.
  if (tsc <= base_tsc) return base_ns;
  // 128 bits: a mapping fay stopped refreshing (fay killed) still converts for years.
  return base_ns +
         static_cast<uint64_t>((static_cast<unsigned __int128>(tsc - base_tsc) * mult) >> 32);
}

}  // namespace fay::inproc
