// write_n N K: opens /dev/null once, then exactly N write() calls of K bytes each.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

static char buf[1 << 20];

int main(int argc, char** argv) {
  const char* usage = "usage: write_n N K   (K <= 1048576)\n";
  long n = testprog_arg(argc, argv, 1, usage);
  long k = testprog_arg(argc, argv, 2, usage);
  if (k > (long)sizeof(buf)) {
    (void)!write(2, usage, sizeof("usage: write_n N K   (K <= 1048576)\n") - 1);
    return 2;
  }
  // Touch every page: a never-written page of .bss is not present, and an eBPF probe cannot
  // fault it in (/dev/null never reads it), so its bytes would be "not captured".
  for (long i = 0; i < k; ++i) ((volatile char*)buf)[i] = 0;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_WRONLY);
  if (fd < 0) return 1;
  int bad = 0;
  for (long i = 0; i < n; i++) {
    if (syscall(SYS_write, fd, buf, k) != k) bad = 1;
  }
  return bad;
}
