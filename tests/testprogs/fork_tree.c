// fork_tree C N [D]: a tree of processes D levels deep below the root, each inner node forking C
// children. Every non-root process makes exactly N getppid calls and exits 0; the root makes
// none and waits for its children. Processes: C + C^2 + ... + C^D (D defaults to 1).
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static int spawn_level(long c, long n, long depth) {
  int bad = 0;
  for (long i = 0; i < c; i++) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      int child_bad = depth > 1 ? spawn_level(c, n, depth - 1) : 0;
      for (long j = 0; j < n; j++) syscall(SYS_getppid);
      _exit(child_bad);
    }
  }
  for (long i = 0; i < c; i++) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
  }
  return bad;
}

int main(int argc, char** argv) {
  const char* usage = "usage: fork_tree C N [D]   (C <= 64, D <= 4)\n";
  long c = testprog_arg(argc, argv, 1, usage);
  long n = testprog_arg(argc, argv, 2, usage);
  long d = argc > 3 ? testprog_arg(argc, argv, 3, usage) : 1;
  if (c > 64 || d < 1 || d > 4) {
    (void)!write(2, usage, __builtin_strlen(usage));
    return 2;
  }
  return spawn_level(c, n, d);
}
