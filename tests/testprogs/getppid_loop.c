// getppid_loop N [spin]: exactly N getppid system calls, then exit 0; with "spin", then loop in
// user space with no system call at all until killed (a recorder detaching then still owes the
// last calls, which nothing else made it write out).
// syscall(SYS_getppid) rather than getppid() so no libc could ever cache the answer.
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char** argv) {
  long n = testprog_arg(argc, argv, 1, "usage: getppid_loop N [spin]\n");
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  if (argc > 2 && strcmp(argv[2], "spin") == 0) {
    volatile unsigned long x = 0;
    for (;;) x++;
  }
  return 0;
}
