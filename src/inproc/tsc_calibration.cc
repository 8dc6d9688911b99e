#include "inproc/tsc_calibration.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <x86intrin.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/clock.h"

namespace fay::inproc {

namespace {

std::string ClockSource() {
  std::ifstream cs("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  cs >> source;
  return source;
}

bool ConstantNonstop() {
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

// A mapping checked on a CPU may be this far from CLOCK_MONOTONIC: the two reads of a pair are
// tens of ns apart and the rate is measured over 2 ms, so only counters that really differ
// between CPUs come near it. A latency whose ends ran on two CPUs is off by at most this.
constexpr int64_t kSyncToleranceNs = 1000;

}  // namespace

TscCalibration::Source TscCalibration::Kind() {
  const std::string source = ClockSource();
  if (!ConstantNonstop()) return Source::kNone;
  if (source == "tsc") return Source::kTsc;
  // kvm-clock is the host's TSC scaled per vCPU, so a guest TSC that is constant and non-stop
  // runs at one rate; whether every vCPU's counter agrees is measured (SyncedAcrossCpus), as
  // a guest may have been told to distrust it (tsc=unstable) for reasons of its host.
  if (source == "kvm-clock") return Source::kCheckedTsc;
  return Source::kNone;
}

// On every CPU this process may run on, the published mapping against CLOCK_MONOTONIC read
// there, once at the start: a latency whose two ends ran on different CPUs is then within
// kSyncToleranceNs of the kernel's own clock.
bool TscCalibration::SyncedAcrossCpus(const TscClock& clock) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  bool synced = true;
  for (int cpu = 0; cpu < CPU_SETSIZE && synced; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    std::thread check([&] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      // A CPU that cannot be checked (gone offline meanwhile) is not trusted either.
      if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) {
        synced = false;
        return;
      }
      const Pair p = Read();
      const uint64_t mapped =
          clock.base_ns.load() +
          static_cast<uint64_t>(
              (static_cast<unsigned __int128>(p.tsc - clock.base_tsc.load()) * clock.mult.load()) >>
              32);
      if (p.tsc < clock.base_tsc.load() ||
          std::llabs(static_cast<int64_t>(mapped - p.ns)) > kSyncToleranceNs)
        synced = false;
    });
    check.join();
  }
  return synced;
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
  const Source source = Kind();
  usable_ = source != Source::kNone;
  if (!usable_) return;
  first_ = Read();
  timespec wait{0, static_cast<long>(span_us) * 1000};
  nanosleep(&wait, nullptr);
  Publish(clock, Read());
  if (source == Source::kCheckedTsc && !SyncedAcrossCpus(*clock)) {
    usable_ = false;
    clock->usable.store(0, std::memory_order_relaxed);
  }
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
