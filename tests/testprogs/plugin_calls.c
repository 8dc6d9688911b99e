// plugin_calls N [THREADS [DELAY_MS]]: sleeps DELAY_MS or until SIGUSR1 (a time to attach with
// -p), dlopens libfay_plugin.so (beside it), then THREADS threads (default 1) each call its
// fay_plugin_target(i % 4, t) for i in [0, N). The library is
// not a dependency: a probe on it finds it mapped only after the dlopen, as with Python's
// extension modules. Exits 1 if a sum is wrong or the library does not load.
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common.h"

static long (*target)(long, long);
static long calls;

static void* run(void* arg) {
  long t = (long)arg, sum = 0, want = 0;
  for (long i = 0; i < calls; i++) {
    sum += target(i % 4, t);
    want += i % 4 + t;
  }
  return (void*)(long)(sum == want);
}

int main(int argc, char** argv) {
  const char* usage = "usage: plugin_calls N [THREADS [DELAY_MS]]\n";
  calls = testprog_arg(argc, argv, 1, usage);
  long threads = argc > 2 ? testprog_arg(argc, argv, 2, usage) : 1;
  long delay_ms = argc > 3 ? testprog_arg(argc, argv, 3, usage) : 0;
  if (threads < 1 || threads > 64) return 2;
  testprog_pause(delay_ms);
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
  if (n <= 0) return 1;
  path[n] = 0;
  strcpy(strrchr(path, '/') + 1, "libfay_plugin.so");
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "plugin_calls: %s\n", dlerror());
    return 1;
  }
  target = (long (*)(long, long))dlsym(lib, "fay_plugin_target");
  if (!target) return 1;
  pthread_t tid[64];
  for (long t = 1; t < threads; t++) pthread_create(&tid[t], 0, run, (void*)t);
  int ok = run(0) != 0;
  for (long t = 1; t < threads; t++) {
    void* r;
    pthread_join(tid[t], &r);
    ok &= r != 0;
  }
  return ok ? 0 : 1;
}
