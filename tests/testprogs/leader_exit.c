// leader_exit N: the main thread starts a worker and calls pthread_exit, so the process runs on
// with its leader a zombie (ps shows Zl); the worker waits up to 30 s or until SIGUSR1, makes N
// getppid and exits the process with status 0. A tracer told -p PID must still trace it.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

static long calls;

static void* worker(void* unused) {
  (void)unused;
  testprog_pause(30000);
  for (long i = 0; i < calls; i++) syscall(SYS_getppid);
  _exit(0);
}

int main(int argc, char** argv) {
  calls = testprog_arg(argc, argv, 1, "usage: leader_exit N\n");
  // SIGUSR1 is taken by whichever thread is alive: the worker, once the leader is gone. The
  // handler is in place before the worker exists, so a signal sent at once is not fatal.
  testprog_go_on_sigusr1();
  pthread_t t;
  if (pthread_create(&t, 0, worker, 0) != 0) return 1;
  pthread_exit(0);
}
