// flight_phases BEFORE K AFTER signal|marker: a long phase, one distinctive moment, a phase after.
// - BEFORE times write(fd of /dev/null, buf, K) with K fresh pseudorandom bytes each (K = 0:
//   getppid() instead), the history a flight recorder keeps the tail of;
// - the moment: openat(AT_FDCWD, "/fay-flight-marker", O_RDONLY), which fails with ENOENT; with
//   `signal`, first kill(getppid(), SIGUSR1) (the parent is the recorder);
// - a pause of 300 ms (one nanosleep), in which the dump is written;
// - AFTER times getpid(), which a dump taken at the moment does not hold.
// Exits 0.
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static unsigned char buf[1 << 16];

int main(int argc, char** argv) {
  const char* usage = "usage: flight_phases BEFORE K AFTER signal|marker   (K <= 65536)\n";
  long before = testprog_arg(argc, argv, 1, usage);
  long k = testprog_arg(argc, argv, 2, usage);
  long after = testprog_arg(argc, argv, 3, usage);
  if (argc < 5 || k > (long)sizeof(buf) ||
      (strcmp(argv[4], "signal") != 0 && strcmp(argv[4], "marker") != 0)) {
    (void)!write(2, usage, __builtin_strlen(usage));
    return 2;
  }
  int fd = k ? open("/dev/null", O_WRONLY) : -1;
  uint64_t x = 1;
  for (long i = 0; i < before; i++) {
    if (!k) {
      syscall(SYS_getppid);
      continue;
    }
    for (long j = 0; j < k; j++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      buf[j] = (unsigned char)(x >> 32);
    }
    (void)!write(fd, buf, (size_t)k);
  }
  if (strcmp(argv[4], "signal") == 0) kill(getppid(), SIGUSR1);
  syscall(SYS_openat, AT_FDCWD, "/fay-flight-marker", O_RDONLY);
  struct timespec ts = {0, 300 * 1000 * 1000};
  nanosleep(&ts, 0);
  for (long i = 0; i < after; i++) syscall(SYS_getpid);
  return 0;
}
