// func_calls N [SLOW_N SLOW_US]: calls fay_target(i % 8, i) for i in [0, N), then
// fay_target_slow(SLOW_US, i) for i in [0, SLOW_N); each slow call spins for at least SLOW_US
// microseconds. Both functions are exported, never inlined or cloned, and really called.
#include <time.h>

#include "common.h"

FAY_PROBE_TARGET long fay_target(long a, long b) {
  // The barrier keeps the compiler from proving anything about the call or its result.
  __asm__ volatile("" : "+r"(a), "+r"(b)::"memory");
  return a + b;
}

// Too short to patch in place (3 bytes: xor eax, eax; ret): fay explain says so. Never called.
FAY_PROBE_TARGET int fay_target_tiny(void) {
  return 0;
}

static long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

// Spins rather than sleeps: a spin's latency has a hard lower bound and barely any upper jitter.
FAY_PROBE_TARGET long fay_target_slow(long us, long b) {
  __asm__ volatile("" : "+r"(us), "+r"(b)::"memory");
  long deadline = now_ns() + us * 1000;
  while (now_ns() < deadline) __asm__ volatile("" ::: "memory");
  return us + b;
}

int main(int argc, char** argv) {
  const char* usage = "usage: func_calls N [SLOW_N SLOW_US]\n";
  long n = testprog_arg(argc, argv, 1, usage);
  long slow_n = argc > 2 ? testprog_arg(argc, argv, 2, usage) : 0;
  long slow_us = argc > 3 ? testprog_arg(argc, argv, 3, usage) : 1000;
  long sum = 0;
  for (long i = 0; i < n; i++) sum += fay_target(i % 8, i);
  for (long i = 0; i < slow_n; i++) sum += fay_target_slow(slow_us, i);
  // Sum of (i % 8 + i) is known; a wrong result means the calls were not what we think.
  long want = 0;
  for (long i = 0; i < n; i++) want += i % 8 + i;
  for (long i = 0; i < slow_n; i++) want += slow_us + i;
  return sum == want ? 0 : 1;
}
