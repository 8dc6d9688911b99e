// Shared helpers for the test programs. Everything here stays out of the measured loops: the
// programs must make exactly the syscalls their README promises, nothing more.
#pragma once

#include <errno.h>
#include <stdlib.h>
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

// A function a probe targets: exported, never inlined or cloned, and really called.
#if defined(__clang__)
#define FAY_PROBE_TARGET __attribute__((noinline, used, visibility("default")))
#else
#define FAY_PROBE_TARGET __attribute__((noipa, used, visibility("default")))
#endif
