// hammer T N [F [DELAY_MS]]: after sleeping DELAY_MS or until SIGUSR1 (a time to attach with
// -p), T threads each call fay_hot(i % 4, t) for i in [0, N); then F forked children (one thread
// each, no exec) do the same N calls as thread 0. Linked dynamically (a preloaded library reaches
// it): the program for in-process probes under threads and forks. Exits 1 if a sum is wrong.
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"

FAY_PROBE_TARGET long fay_hot(long a, long b) {
  __asm__ volatile("" : "+r"(a), "+r"(b)::"memory");
  return a + b;
}

static long calls;

static long run(long t) {
  long sum = 0, want = 0;
  for (long i = 0; i < calls; i++) {
    sum += fay_hot(i % 4, t);
    want += i % 4 + t;
  }
  return sum == want;
}

static void* thread_main(void* arg) {
  return (void*)run((long)arg);
}

int main(int argc, char** argv) {
  const char* usage = "usage: hammer T N [F [DELAY_MS]]\n";
  long threads = testprog_arg(argc, argv, 1, usage);
  calls = testprog_arg(argc, argv, 2, usage);
  long forks = argc > 3 ? testprog_arg(argc, argv, 3, usage) : 0;
  long delay_ms = argc > 4 ? testprog_arg(argc, argv, 4, usage) : 0;
  if (threads < 1 || threads > 64 || forks > 64) {
    (void)!write(2, usage, __builtin_strlen(usage));
    return 2;
  }
  testprog_pause(delay_ms);
  pthread_t tid[64];
  for (long t = 0; t < threads; t++) pthread_create(&tid[t], 0, thread_main, (void*)t);
  int ok = 1;
  for (long t = 0; t < threads; t++) {
    void* r;
    pthread_join(tid[t], &r);
    ok &= r != 0;
  }
  for (long f = 0; f < forks; f++) {
    pid_t pid = fork();
    if (pid == 0) _exit(run(0) ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? 0 : 1;
}
