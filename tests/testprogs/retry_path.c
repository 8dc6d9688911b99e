// retry_path: an openat whose path the enter probe cannot read, while another thread enters
// system calls on the same CPU before the openat returns. In the working directory it makes the
// FIFO "f" and the file "name" holding "f"; maps "name" without touching it (its page is in the
// page cache but not yet in this process's page tables, so a probe reading it at entry fails and
// must read it again at the exit); then, both threads pinned to one CPU, the main thread opens
// the FIFO by the mapped name for reading, which blocks, while a second thread writes 8 bytes
// to /dev/null 50 times and then opens the FIFO for writing, which lets the first open return.
// Exit status 0 when every call returned what it should.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void* writer(void* arg) {
  (void)arg;
  struct timespec t = {0, 100 * 1000 * 1000};
  nanosleep(&t, NULL);  // the reader is blocked in its open by now
  int null = open("/dev/null", O_WRONLY);
  for (int i = 0; i < 50; ++i)
    if (write(null, "12345678", 8) != 8) return (void*)1;
  close(null);
  int w = open("f", O_WRONLY);
  if (w < 0) return (void*)1;
  close(w);
  return NULL;
}

int main(void) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return perror("affinity"), 1;
  unlink("f");
  if (mkfifo("f", 0600) != 0) return perror("mkfifo"), 1;
  int fd = open("name", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "f", 2) != 2 || close(fd) != 0) return perror("name"), 1;
  fd = open("name", O_RDONLY);
  const char* path = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
  if (path == MAP_FAILED) return perror("mmap"), 1;
  pthread_t t;
  if (pthread_create(&t, NULL, writer, NULL) != 0) return 1;
  int r = open(path, O_RDONLY);  // blocks until the writer opens
  void* res;
  pthread_join(t, &res);
  if (r < 0 || res != NULL) return fprintf(stderr, "retry_path: open failed\n"), 1;
  close(r);
  return 0;
}
