// seqread: W2 and W5. Reads files sequentially in 4 KiB blocks through a user buffer and prints a
// checksum of every byte read, so a tracer that broke or shortened a read shows up as a wrong sum.
//
//   seqread FILE...          one file: read in the main thread; several: one thread per file
//   seqread -w BYTES FILE    write BYTES of fixed pseudo-random data to FILE, fsync it, and print
//                            the checksum a reader must report
//
// Output, one line per file in argument order: "FILE bytes N sum 0xHEX". The data is the
// splitmix64 sequence of the word index, so the same size always gives the same file and sum.
// Nothing else is printed and no stdio happens while reading.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 4096
#define MAX_FILES 64

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct job {
  const char* path;
  uint64_t bytes;
  uint64_t sum;
  int err;  // errno of the first failure, 0 if none
};

// Folds a block into the sum word by word, weighted by the word's position, so a block read twice
// or out of order changes the result as well as a missing one.
static uint64_t fold(uint64_t sum, uint64_t first_word, const uint64_t* w, size_t n) {
  for (size_t i = 0; i < n; i++) sum += w[i] * ((first_word + i) | 1);
  return sum;
}

static void* read_file(void* arg) {
  struct job* j = arg;
  int fd = open(j->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    j->err = errno;
    return NULL;
  }
  uint64_t buf[BLOCK / 8];
  for (;;) {
    ssize_t n = read(fd, buf, BLOCK);
    if (n < 0) {
      if (errno == EINTR) continue;
      j->err = errno;
      break;
    }
    if (n == 0) break;
    if (n % 8 != 0 || j->bytes % 8 != 0) {  // the files are whole words; a torn read is an error
      j->err = EIO;
      break;
    }
    j->sum = fold(j->sum, j->bytes / 8, buf, (size_t)n / 8);
    j->bytes += (uint64_t)n;
  }
  close(fd);
  return NULL;
}

static int write_file(uint64_t bytes, const char* path) {
  if (bytes % BLOCK != 0) {
    fprintf(stderr, "seqread: -w BYTES must be a multiple of %d\n", BLOCK);
    return 2;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "seqread: %s: %s\n", path, strerror(errno));
    return 1;
  }
  static uint64_t buf[256 * 1024 / 8];
  uint64_t word = 0, sum = 0, left = bytes;
  while (left > 0) {
    size_t n = left < sizeof(buf) ? (size_t)left : sizeof(buf);
    for (size_t i = 0; i < n / 8; i++) buf[i] = splitmix64(word + i);
    sum = fold(sum, word, buf, n / 8);
    if (write(fd, buf, n) != (ssize_t)n) {
      fprintf(stderr, "seqread: writing %s: %s\n", path, strerror(errno));
      close(fd);
      return 1;
    }
    word += n / 8;
    left -= n;
  }
  // Flushed now, so that write-back does not run under the measurements that follow.
  if (fsync(fd) != 0 || close(fd) != 0) {
    fprintf(stderr, "seqread: fsync %s: %s\n", path, strerror(errno));
    return 1;
  }
  printf("%s bytes %" PRIu64 " sum 0x%016" PRIx64 "\n", path, bytes, sum);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "-w") == 0) {
    char* end;
    uint64_t bytes = strtoull(argv[2], &end, 10);
    if (*end != '\0' || bytes == 0) {
      fprintf(stderr, "usage: seqread -w BYTES FILE\n");
      return 2;
    }
    return write_file(bytes, argv[3]);
  }
  int n = argc - 1;
  if (n < 1 || n > MAX_FILES || argv[1][0] == '-') {
    fprintf(stderr, "usage: seqread FILE... (at most %d) | seqread -w BYTES FILE\n", MAX_FILES);
    return 2;
  }
  struct job jobs[MAX_FILES];
  pthread_t tids[MAX_FILES];
  memset(jobs, 0, sizeof(jobs));
  for (int i = 0; i < n; i++) jobs[i].path = argv[i + 1];
  if (n == 1) {
    read_file(&jobs[0]);
  } else {
    for (int i = 0; i < n; i++) {
      int e = pthread_create(&tids[i], NULL, read_file, &jobs[i]);
      if (e != 0) {
        fprintf(stderr, "seqread: pthread_create: %s\n", strerror(e));
        return 1;
      }
    }
    for (int i = 0; i < n; i++) pthread_join(tids[i], NULL);
  }
  int rc = 0;
  for (int i = 0; i < n; i++) {
    if (jobs[i].err) {
      fprintf(stderr, "seqread: %s: %s\n", jobs[i].path, strerror(jobs[i].err));
      rc = 1;
    }
    printf("%s bytes %" PRIu64 " sum 0x%016" PRIx64 "\n", jobs[i].path, jobs[i].bytes, jobs[i].sum);
  }
  return rc;
}
