// naps N US: N times, sleeps US microseconds (nanosleep), then exits 0. Each sleep blocks the
// thread until its timer wakes it: N wakeups of this thread, each followed by a switch back
// into it, and no other sleep in between.
#include <time.h>

#include "common.h"

int main(int argc, char** argv) {
  const char* usage = "usage: naps N US\n";
  long n = testprog_arg(argc, argv, 1, usage);
  long us = testprog_arg(argc, argv, 2, usage);
  for (long i = 0; i < n; i++) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return 0;
}
