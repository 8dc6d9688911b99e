// callbacks A B: calls fay_apply(fay_cb_even, i) A times, then fay_apply(fay_cb_odd, i) B times.
// fay_apply calls the function it is given, so its first argument is a real function pointer:
// usym(arg0) names fay_cb_even A times and fay_cb_odd B times. fay_cb_alias is a second name
// of fay_cb_even (one address, two symbols), so each is called A times. Exits 0.
#include "common.h"

FAY_PROBE_TARGET long fay_cb_even(long x) {
  __asm__ volatile("" : "+r"(x)::"memory");
  return x * 2;
}

long fay_cb_alias(long x) __attribute__((alias("fay_cb_even"), used, visibility("default")));

FAY_PROBE_TARGET long fay_cb_odd(long x) {
  __asm__ volatile("" : "+r"(x)::"memory");
  return x * 2 + 1;
}

FAY_PROBE_TARGET long fay_apply(long (*fn)(long), long x) {
  __asm__ volatile("" : "+r"(fn), "+r"(x)::"memory");
  return fn(x);
}

// Through volatile pointers, so the compiler cannot call the callbacks directly.
static long (*volatile even)(long) = fay_cb_even;
static long (*volatile odd)(long) = fay_cb_odd;

int main(int argc, char** argv) {
  const char* usage = "usage: callbacks A B\n";
  long a = testprog_arg(argc, argv, 1, usage);
  long b = testprog_arg(argc, argv, 2, usage);
  long sum = 0;
  for (long i = 0; i < a; ++i) sum += fay_apply(even, i);
  for (long i = 0; i < b; ++i) sum += fay_apply(odd, i);
  return sum < 0;
}
