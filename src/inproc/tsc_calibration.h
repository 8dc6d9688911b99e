// fay's half of the in-process TSC clock (tsc_clock.h): whether the TSC can stand in for
// CLOCK_MONOTONIC on this machine, and the rate that maps one to the other, measured at the
// start and measured again, over a longer and longer span, at every heartbeat.
#pragma once

#include <cstdint>

#include "inproc/tsc_clock.h"

namespace fay::inproc {

class TscCalibration {
 public:
  // kTsc: the kernel's clocksource is the TSC and the CPU says it is constant and non-stop,
  // so the kernel itself trusts it for CLOCK_MONOTONIC. kCheckedTsc: a constant, non-stop TSC
  // under kvm-clock (which the host computes from that TSC), trusted once every CPU's counter
  // is seen to agree with the mapping.
  enum class Source { kNone, kTsc, kCheckedTsc };
  static Source Kind();

  // Measures the rate over `span_us` (a first mapping) and publishes it; leaves `clock`
  // unusable when the TSC is not.
  void Start(TscClock* clock, uint32_t span_us = 2000);
  // A fresh base, and the rate over everything since Start.
  void Refresh(TscClock* clock) const;
  bool usable() const { return usable_; }

 private:
  struct Pair {
    uint64_t tsc = 0, ns = 0;
  };
  static Pair Read();
  static bool SyncedAcrossCpus(const TscClock& clock);
  void Publish(TscClock* clock, Pair now) const;

  Pair first_;
  bool usable_ = false;
};

}  // namespace fay::inproc
