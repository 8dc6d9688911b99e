// getppid_loop N: exactly N getppid system calls, then exit 0.
// syscall(SYS_getppid) rather than getppid() so no libc could ever cache the answer.
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char** argv) {
  long n = testprog_arg(argc, argv, 1, "usage: getppid_loop N\n");
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  return 0;
}
