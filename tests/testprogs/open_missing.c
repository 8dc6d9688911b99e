// open_missing N: exactly N openat(AT_FDCWD, "/nonexistent/fay-testprog", O_RDONLY) calls, each
// failing with ENOENT. Exits 1 if any call unexpectedly succeeds or fails differently.
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char** argv) {
  long n = testprog_arg(argc, argv, 1, "usage: open_missing N\n");
  int bad = 0;
  for (long i = 0; i < n; i++) {
    // The raw syscall pins the exact syscall (openat) whatever libc's open() maps to.
    long fd = syscall(SYS_openat, AT_FDCWD, "/nonexistent/fay-testprog", O_RDONLY);
    if (fd >= 0 || errno != ENOENT) bad = 1;
  }
  return bad;
}
