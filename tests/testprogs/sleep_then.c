// sleep_then MS [CMD ARGS...]: sleeps MS milliseconds, then execs CMD (or exits 0). Lets a test
// start a process, attach to it with -p, and only then let the measured work begin.
#include <time.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char** argv) {
  long ms = testprog_arg(argc, argv, 1, "usage: sleep_then MS [CMD ARGS...]\n");
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  if (argc <= 2) return 0;
  execvp(argv[2], argv + 2);
  return 127;
}
