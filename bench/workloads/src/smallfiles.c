// smallfiles: W3. In DIR (created if missing): for each of N files, create it, write 4 KiB,
// fsync every 100th file, close; then for each file, stat it, reopen it, read it back, compare,
// close and unlink it. DIR is left empty, which the harness checks.
//
//   smallfiles DIR N
//
// Prints one line: "files N written BYTES read BYTES fsyncs F bad B" and exits 1 if any call
// failed or any file read back differently (bad > 0). Nothing else is printed.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIZE 4096
#define FSYNC_EVERY 100

static void fill(unsigned char* buf, long i) {
  for (int j = 0; j < SIZE; j++) buf[j] = (unsigned char)(i * 131 + j * 7);
}

static int fail(const char* what, const char* path) {
  fprintf(stderr, "smallfiles: %s %s: %s\n", what, path, strerror(errno));
  return 1;
}

int main(int argc, char** argv) {
  char* end = NULL;
  long n = argc == 3 ? strtol(argv[2], &end, 10) : 0;
  if (argc != 3 || *end != '\0' || n < 1 || n > 10000000) {
    fprintf(stderr, "usage: smallfiles DIR N\n");
    return 2;
  }
  const char* dir = argv[1];
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return fail("mkdir", dir);
  unsigned char want[SIZE], got[SIZE];
  char path[4096];
  long written = 0, nread = 0, fsyncs = 0, bad = 0;

  for (long i = 0; i < n; i++) {
    snprintf(path, sizeof(path), "%s/f%07ld", dir, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fail("create", path);
    fill(want, i);
    if (write(fd, want, SIZE) != SIZE) return fail("write", path);
    written += SIZE;
    if ((i + 1) % FSYNC_EVERY == 0) {
      if (fsync(fd) != 0) return fail("fsync", path);
      fsyncs++;
    }
    if (close(fd) != 0) return fail("close", path);
  }
  for (long i = 0; i < n; i++) {
    snprintf(path, sizeof(path), "%s/f%07ld", dir, i);
    struct stat st;
    if (stat(path, &st) != 0) return fail("stat", path);
    if (st.st_size != SIZE) bad++;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail("reopen", path);
    ssize_t r = read(fd, got, SIZE);
    if (r < 0) return fail("read", path);
    nread += r;
    fill(want, i);
    if (r != SIZE || memcmp(want, got, SIZE) != 0) bad++;
    if (close(fd) != 0) return fail("close", path);
    if (unlink(path) != 0) return fail("unlink", path);
  }
  printf("files %ld written %ld read %ld fsyncs %ld bad %ld\n", n, written, nread, fsyncs, bad);
  return bad == 0 ? 0 : 1;
}
