// threads_read T N: opens /dev/zero once, then T threads each make exactly N read(fd, buf, 1)
// calls. Threads keep the process comm ("threads_read"). Exits 1 if any read is short.
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

static int zero_fd;
static long per_thread;
static pthread_barrier_t start;
// Set by the main thread just before pthread_join. The readers wait for it in user space (no
// syscall), so that pthread_join always finds them still running and always makes its futex wait:
// the main thread's calls are then the same in every run, whatever the scheduler does.
static int joining;

static void* reader(void* arg) {
  char c;
  long bad = 0;
  // Start together so the reads really interleave across CPUs.
  pthread_barrier_wait(&start);
  while (!__atomic_load_n(&joining, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
  for (long i = 0; i < per_thread; i++) {
    if (syscall(SYS_read, zero_fd, &c, 1) != 1) bad = 1;
  }
  return (void*)bad;
}

int main(int argc, char** argv) {
  const char* usage = "usage: threads_read T N   (1 <= T <= 256)\n";
  long t = testprog_arg(argc, argv, 1, usage);
  per_thread = testprog_arg(argc, argv, 2, usage);
  if (t < 1 || t > 256) {
    (void)!write(2, usage, __builtin_strlen(usage));
    return 2;
  }
  zero_fd = (int)syscall(SYS_openat, AT_FDCWD, "/dev/zero", O_RDONLY);
  if (zero_fd < 0) return 1;
  pthread_t threads[256];
  pthread_barrier_init(&start, 0, (unsigned)t);
  for (long i = 0; i < t; i++) {
    if (pthread_create(&threads[i], 0, reader, 0) != 0) return 1;
  }
  int bad = 0;
  __atomic_store_n(&joining, 1, __ATOMIC_RELEASE);
  for (long i = 0; i < t; i++) {
    void* r;
    pthread_join(threads[i], &r);
    if (r) bad = 1;
  }
  return bad;
}
