#include "inproc/tsc_calibration.h"

#include <time.h>
#include <x86intrin.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/clock.h"

namespace fay::inproc {

bool TscCalibration::Usable() {
  std::ifstream cs("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  if (!(cs >> source) || source != "tsc") return false;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    bool constant = false, nonstop = false;
    for (std::string w; words >> w;) {
      constant |= w == "constant_tsc";
      nonstop |= w == "nonstop_tsc";
    }
    return constant && nonstop;
  }
  return false;
}

// The clock read between two TSC reads; of five tries, the one with the two reads closest
// together, its TSC taken at their middle.
TscCalibration::Pair TscCalibration::Read() {
  Pair best;
  uint64_t best_gap = ~uint64_t{0};
  for (int i = 0; i < 5; ++i) {
    const uint64_t t0 = __rdtsc();
    const uint64_t ns = ClockNs(CLOCK_MONOTONIC);
    const uint64_t t1 = __rdtsc();
    if (t1 > t0 && t1 - t0 < best_gap) {
      best_gap = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

void TscCalibration::Start(TscClock* clock, uint32_t span_us) {
  usable_ = Usable();
  if (!usable_) return;
  first_ = Read();
  timespec wait{0, static_cast<long>(span_us) * 1000};
  nanosleep(&wait, nullptr);
  Publish(clock, Read());
}

void TscCalibration::Refresh(TscClock* clock) const {
  if (usable_) Publish(clock, Read());
}

void TscCalibration::Publish(TscClock* clock, Pair now) const {
  if (now.tsc <= first_.tsc || now.ns <= first_.ns) return;  // no span yet: keep what is there
  const uint64_t mult = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(now.ns - first_.ns) << 32) / (now.tsc - first_.tsc));
  const uint32_t s = clock->seq.load(std::memory_order_relaxed);
  clock->seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  clock->base_tsc.store(now.tsc, std::memory_order_relaxed);
  clock->base_ns.store(now.ns, std::memory_order_relaxed);
  clock->mult.store(mult, std::memory_order_relaxed);
  clock->usable.store(1, std::memory_order_relaxed);
  clock->seq.store(s + 2, std::memory_order_release);
}

}  // namespace fay::inproc
