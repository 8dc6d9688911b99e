// thread_exec N M: a second thread makes N getppid and then execs this program again as
// `thread_exec after M`, which makes M getppid and exits 0. The exec comes from a thread that is
// not the leader: the kernel ends the leader (blocked in pthread_join, whose futex never returns)
// and the execing thread takes over the process's id.
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static long before;
static long after;
static char arg_after[24];
// Set by the leader just before pthread_join. The exec waits for it, then 200 ms more in user
// space (clock_gettime is the vDSO's: no syscall), so the leader is always blocked in its futex
// wait when the exec ends it, and makes the same calls in every run whatever the scheduler does
// (a busy machine may keep the leader off a CPU for tens of milliseconds).
static int joining;

static void* execer(void* unused) {
  (void)unused;
  while (!__atomic_load_n(&joining, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    __builtin_ia32_pause();
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 200000000L);
  for (long i = 0; i < before; i++) syscall(SYS_getppid);
  char* const argv[] = {"thread_exec", "after", arg_after, 0};
  syscall(SYS_execve, "/proc/self/exe", argv, (char* const[]){0});
  return (void*)1;  // only when the exec failed
}

int main(int argc, char** argv) {
  const char* usage = "usage: thread_exec N M | thread_exec after M\n";
  if (argc == 3 && strcmp(argv[1], "after") == 0) {
    after = testprog_arg(argc, argv, 2, usage);
    for (long i = 0; i < after; i++) syscall(SYS_getppid);
    return 0;
  }
  before = testprog_arg(argc, argv, 1, usage);
  after = testprog_arg(argc, argv, 2, usage);
  // argv[2] as given, so the exec'd program makes the same count.
  size_t n = strlen(argv[2]);
  if (n >= sizeof arg_after) return 2;
  memcpy(arg_after, argv[2], n + 1);
  pthread_t t;
  if (pthread_create(&t, 0, execer, 0) != 0) return 1;
  __atomic_store_n(&joining, 1, __ATOMIC_RELEASE);
  void* r;
  pthread_join(t, &r);
  return 1;  // the exec failed
}
