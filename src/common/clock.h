// A clock's reading in nanoseconds.
#pragma once

#include <time.h>

#include <cstdint>

namespace fay {

inline uint64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace fay
