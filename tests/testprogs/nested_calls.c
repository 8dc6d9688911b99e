// nested_calls N DEPTH US: N times, fay_outer(i), which spins US microseconds and calls
// fay_inner(i), which spins US microseconds too; then N times fay_recurse(DEPTH), which calls
// itself down to 0 and spins US microseconds at the bottom. So fay_outer and fay_inner are
// called N times each, fay_recurse N * (DEPTH + 1) times; every fay_outer call lasts at least
// 2 * US microseconds, every fay_inner call at least US, every fay_recurse call at least US.
// The functions are exported, never inlined or cloned, and really called (as in func_calls).
#include <time.h>

#include "common.h"

static long spin_us;

static long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void spin(void) {
  long deadline = now_ns() + spin_us * 1000;
  while (now_ns() < deadline) __asm__ volatile("" ::: "memory");
}

FAY_PROBE_TARGET long fay_inner(long a) {
  __asm__ volatile("" : "+r"(a)::"memory");
  spin();
  return a + 1;
}

FAY_PROBE_TARGET long fay_outer(long a) {
  __asm__ volatile("" : "+r"(a)::"memory");
  spin();
  return fay_inner(a) + 1;
}

FAY_PROBE_TARGET long fay_recurse(long depth);
// Through a volatile pointer, so the compiler cannot turn the recursion into a loop.
static long (*volatile recurse)(long) = fay_recurse;

FAY_PROBE_TARGET long fay_recurse(long depth) {
  __asm__ volatile("" : "+r"(depth)::"memory");
  if (depth == 0) {
    spin();
    return 0;
  }
  return recurse(depth - 1) + 1;
}

int main(int argc, char** argv) {
  const char* usage = "usage: nested_calls N DEPTH US\n";
  long n = testprog_arg(argc, argv, 1, usage);
  long depth = testprog_arg(argc, argv, 2, usage);
  spin_us = testprog_arg(argc, argv, 3, usage);
  long sum = 0;
  for (long i = 0; i < n; i++) sum += fay_outer(i);
  for (long i = 0; i < n; i++) sum += fay_recurse(depth);
  long want = 0;
  for (long i = 0; i < n; i++) want += i + 2 + depth;
  return sum == want ? 0 : 1;
}
