#include "inproc/tsc_calibration.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cstdlib>

#include "common/clock.h"

namespace fay::inproc {
namespace {

// Where the TSC can stand in for CLOCK_MONOTONIC, the published mapping reads what the kernel's
// clock reads, on this thread and 20 ms on.
TEST(TscCalibration, MappingTracksTheMonotonicClock) {
  TscClock clock{};
  TscCalibration tsc;
  tsc.Start(&clock);
  // Not usable (or a kvm-clock guest whose CPUs' counters disagree): the probes read
  // clock_gettime, told so by a 0.
  if (!tsc.usable()) {
    EXPECT_NE(TscCalibration::Kind(), TscCalibration::Source::kTsc);
    EXPECT_EQ(ReadTscClock(clock), 0u);
    return;
  }
  for (int i = 0; i < 2; ++i) {
    const uint64_t before = ClockNs(CLOCK_MONOTONIC);
    const uint64_t mapped = ReadTscClock(clock);
    const uint64_t after = ClockNs(CLOCK_MONOTONIC);
    ASSERT_NE(mapped, 0u);
    EXPECT_GE(mapped + 20000, before);
    EXPECT_LE(mapped, after + 20000);
    timespec wait{0, 20'000'000};
    nanosleep(&wait, nullptr);
    tsc.Refresh(&clock);
  }
}

}  // namespace
}  // namespace fay::inproc
