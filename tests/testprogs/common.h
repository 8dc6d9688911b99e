// Shared helpers for the test programs. Everything here stays out of the measured loops: the
// programs must make exactly the syscalls their README promises, nothing more.
#pragma once

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// Parses a non-negative decimal argument or exits with status 2. No stdio on the happy path so
// the only writes a traced run sees are the ones the program documents.
static inline long testprog_arg(int argc, char** argv, int i, const char* usage) {
  if (i >= argc) {
    (void)!write(2, usage, __builtin_strlen(usage));
    _exit(2);
  }
  char* end = 0;
  errno = 0;
  long v = strtol(argv[i], &end, 10);
  if (errno != 0 || end == argv[i] || *end != '\0' || v < 0) {
    (void)!write(2, usage, __builtin_strlen(usage));
    _exit(2);
  }
  return v;
}

static volatile sig_atomic_t testprog_go;
static inline void testprog_on_go(int sig) {
  (void)sig;
  testprog_go = 1;
}

// From here, SIGUSR1 ends testprog_pause early. A program whose threads pause calls it before
// it starts them: a signal sent as soon as they exist finds the handler in place.
static inline void testprog_go_on_sigusr1(void) {
  struct sigaction sa = {0};
  sa.sa_handler = testprog_on_go;
  sigaction(SIGUSR1, &sa, 0);
}

// Sleeps MS milliseconds, resumed across interruptions (a tracer's attach), or until SIGUSR1,
// whichever comes first. A test attaches with -p, waits until the tracer says it is attached,
// then sends SIGUSR1: the measured work starts after the attach however slow the machine is,
// and MS only bounds the wait should the test never send it.
static inline void testprog_pause(long ms) {
  testprog_go_on_sigusr1();
  struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
  while (!testprog_go && nanosleep(&left, &left) != 0) {
  }
}

// A function a probe targets: exported, never inlined or cloned, and really called.
#if defined(__clang__)
#define FAY_PROBE_TARGET __attribute__((noinline, used, visibility("default")))
#else
#define FAY_PROBE_TARGET __attribute__((noipa, used, visibility("default")))
#endif
