// file_ops DIR T N: a workload for replay with every kind of replayed call and exactly known
// results. DIR must exist. The main thread makes DIR/sub, a pipe (writes and reads 4 bytes
// through it) and DIR/shared; then T threads (T <= 64) each, on its own file DIR/tK:
//   openat(O_RDWR|O_CREAT|O_TRUNC, 0640); N x write 512 bytes of (K + i); lseek to 0;
//   N x read 512; dup; fcntl F_SETFD FD_CLOEXEC on the dup; close the original; pwrite 1 byte
//   at 0; fstat; ftruncate to N*512 - 100; fsync; close; rename tK -> sub/rK; stat sub/rK;
//   pwrite 8 bytes into DIR/shared at offset 8*K (through a shared fd opened by main).
// After joining them the main thread lists DIR/sub (getdents64), unlinks sub/rK for odd K,
// makes the symlink DIR/link -> sub/r0, readlinks it, chmods sub/r0 to 0600 and makes DIR/gone
// then removes it (mkdir + rmdir). Exit status 0 when every call returned what it should; 1 and
// a message on stderr otherwise. Nothing is printed on success.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define BLOCK 512
static const char* dir;
static long n_blocks;
static int shared_fd;
static int failed;

static void fail(const char* what) {
  fprintf(stderr, "file_ops: %s failed\n", what);
  __atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);
}

static void* worker(void* arg) {
  long k = (long)arg;
  char path[4096], to[4096], buf[BLOCK], want[BLOCK];
  snprintf(path, sizeof(path), "%s/t%ld", dir, k);
  snprintf(to, sizeof(to), "%s/sub/r%ld", dir, k);
  int fd = openat(AT_FDCWD, path, O_RDWR | O_CREAT | O_TRUNC, 0640);
  if (fd < 0) return fail("open"), NULL;
  for (long i = 0; i < n_blocks; i++) {
    memset(buf, (int)(k + i), BLOCK);
    if (write(fd, buf, BLOCK) != BLOCK) fail("write");
  }
  if (lseek(fd, 0, SEEK_SET) != 0) fail("lseek");
  for (long i = 0; i < n_blocks; i++) {
    memset(want, (int)(k + i), BLOCK);
    if (read(fd, buf, BLOCK) != BLOCK || memcmp(buf, want, BLOCK) != 0) fail("read");
  }
  int fd2 = dup(fd);
  if (fd2 < 0 || fcntl(fd2, F_SETFD, FD_CLOEXEC) != 0 || close(fd) != 0) fail("dup");
  if (pwrite(fd2, "x", 1, 0) != 1) fail("pwrite");
  struct stat st;
  if (fstat(fd2, &st) != 0 || st.st_size != n_blocks * BLOCK) fail("fstat");
  if (ftruncate(fd2, n_blocks * BLOCK - 100) != 0 || fsync(fd2) != 0) fail("ftruncate");
  if (close(fd2) != 0) fail("close");
  if (rename(path, to) != 0 || stat(to, &st) != 0) fail("rename");
  char tag[8];
  memset(tag, 'A' + (int)k, sizeof(tag));
  if (pwrite(shared_fd, tag, sizeof(tag), 8 * k) != 8) fail("shared pwrite");
  return NULL;
}

int main(int argc, char** argv) {
  const char* usage = "usage: file_ops DIR T N\n";
  if (argc != 4) testprog_arg(0, argv, 1, usage);
  dir = argv[1];
  long t = testprog_arg(argc, argv, 2, usage);
  n_blocks = testprog_arg(argc, argv, 3, usage);
  if (t < 1 || t > 64 || n_blocks < 1) testprog_arg(0, argv, 1, usage);
  char path[4096];
  snprintf(path, sizeof(path), "%s/sub", dir);
  if (mkdir(path, 0755) != 0) fail("mkdir");
  int p[2];
  char ping[4];
  if (pipe2(p, O_CLOEXEC) != 0 || write(p[1], "ping", 4) != 4 || read(p[0], ping, 4) != 4 ||
      close(p[0]) != 0 || close(p[1]) != 0)
    fail("pipe");
  snprintf(path, sizeof(path), "%s/shared", dir);
  shared_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (shared_fd < 0) fail("shared");
  pthread_t th[64];
  for (long k = 0; k < t; k++) pthread_create(&th[k], NULL, worker, (void*)k);
  for (long k = 0; k < t; k++) pthread_join(th[k], NULL);
  close(shared_fd);
  snprintf(path, sizeof(path), "%s/sub", dir);
  DIR* d = opendir(path);
  long entries = 0;
  if (!d) fail("opendir");
  while (d && readdir(d)) entries++;
  if (d) closedir(d);
  if (entries != t + 2) fail("readdir");
  for (long k = 1; k < t; k += 2) {
    snprintf(path, sizeof(path), "%s/sub/r%ld", dir, k);
    if (unlink(path) != 0) fail("unlink");
  }
  snprintf(path, sizeof(path), "%s/link", dir);
  char target[64];
  if (symlink("sub/r0", path) != 0 || readlink(path, target, sizeof(target)) != 6) fail("link");
  snprintf(path, sizeof(path), "%s/sub/r0", dir);
  if (chmod(path, 0600) != 0) fail("chmod");
  snprintf(path, sizeof(path), "%s/gone", dir);
  if (mkdir(path, 0700) != 0 || rmdir(path) != 0) fail("rmdir");
  return failed;
}
