// fs_calls MODE ARGS: file-system calls a replay must execute, not emulate, for the tree it
// leaves to be the recorded one (issue 25; what cp -a, tar and installers do).
//   fifo DIR       mkfifo DIR/p (mknodat), then a child opens it write-only and writes
//                  "through a fifo\n" while the parent opens it read-only and reads it whole;
//                  the open of each end blocks until the other's.
//   xattr DIR      mkdir DIR/d 0700 and gives it mode 0755 through the path-based
//                  setxattr("system.posix_acl_access"), as cp -a does; creates DIR/f, sets
//                  user.a on it by path, sets and removes user.b (lsetxattr, removexattr),
//                  fallocates 8192 bytes and advises POSIX_FADV_DONTNEED on it.
//   copy SRC DST   copies the existing SRC to a new DST with copy_file_range from the file
//                  offsets (as cp does), then appends SRC's first 100 bytes with sendfile from
//                  an explicit offset: the data never passes through the program's memory.
//   interrupted   blocks reading a pipe; a child signals it (SIGUSR1, handled with SA_RESTART)
//                  after 200 ms, then writes "late\n" 100 ms later and exits: the read returns
//                  ERESTARTSYS to the kernel, the handler runs, and the read made again gets
//                  the bytes.
// Exit status 0 when every call returned what it should; 1 and a message otherwise.
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static int fail(const char* what) {
  perror(what);
  return 1;
}

static int fifo(const char* dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s/p", dir);
  if (mkfifo(p, 0644) != 0) return fail("mkfifo");
  const char msg[] = "through a fifo\n";
  pid_t child = fork();
  if (child < 0) return fail("fork");
  if (child == 0) {
    int w = open(p, O_WRONLY);
    if (w < 0 || write(w, msg, sizeof msg - 1) != (ssize_t)(sizeof msg - 1)) _exit(1);
    _exit(close(w) == 0 ? 0 : 1);
  }
  int r = open(p, O_RDONLY);
  if (r < 0) return fail("open");
  char buf[64];
  size_t got = 0;
  for (ssize_t n; (n = read(r, buf + got, sizeof buf - got)) > 0;) got += (size_t)n;
  int status;
  if (waitpid(child, &status, 0) != child || status != 0) return fail("child");
  if (got != sizeof msg - 1 || memcmp(buf, msg, got) != 0) return fail("read");
  return close(r) == 0 ? 0 : fail("close");
}

static int xattr(const char* dir) {
  char d[4096], f[4096];
  snprintf(d, sizeof d, "%s/d", dir);
  snprintf(f, sizeof f, "%s/f", dir);
  if (mkdir(d, 0700) != 0) return fail("mkdir");
  // A minimal POSIX ACL (version 2): user::rwx, group::r-x, other::r-x, that is mode 0755.
  static const unsigned char acl[] = {2,    0,    0, 0, 1,    0,    7,    0,    0xff, 0xff,
                                      0xff, 0xff, 4, 0, 5,    0,    0xff, 0xff, 0xff, 0xff,
                                      0x20, 0,    5, 0, 0xff, 0xff, 0xff, 0xff};
  if (setxattr(d, "system.posix_acl_access", acl, sizeof acl, 0) != 0) return fail("setxattr acl");
  int fd = open(f, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return fail("open");
  if (setxattr(f, "user.a", "kept", 4, 0) != 0) return fail("setxattr");
  if (lsetxattr(f, "user.b", "gone", 4, 0) != 0) return fail("lsetxattr");
  if (removexattr(f, "user.b") != 0) return fail("removexattr");
  if (fallocate(fd, 0, 0, 8192) != 0) return fail("fallocate");
  if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) return fail("fadvise");
  return close(fd) == 0 ? 0 : fail("close");
}

static int copy(const char* src, const char* dst) {
  int in = open(src, O_RDONLY);
  if (in < 0) return fail("open src");
  int out = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (out < 0) return fail("open dst");
  for (ssize_t n; (n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0)) != 0;)
    if (n < 0) return fail("copy_file_range");
  off_t at = 0;
  if (sendfile(out, in, &at, 100) != 100) return fail("sendfile");
  return close(in) == 0 && close(out) == 0 ? 0 : fail("close");
}

static void on_usr1(int sig) {
  (void)sig;
}

static int interrupted(void) {
  int p[2];
  if (pipe(p) != 0) return fail("pipe");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR1, &sa, NULL) != 0) return fail("sigaction");
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) return fail("fork");
  if (child == 0) {
    struct timespec t = {0, 200 * 1000 * 1000};
    nanosleep(&t, NULL);
    kill(parent, SIGUSR1);
    t.tv_nsec = 100 * 1000 * 1000;
    nanosleep(&t, NULL);
    _exit(write(p[1], "late\n", 5) == 5 ? 0 : 1);
  }
  char buf[16];
  ssize_t n = read(p[0], buf, sizeof buf);
  int status;
  if (waitpid(child, &status, 0) != child || status != 0) return fail("child");
  if (n != 5 || memcmp(buf, "late\n", 5) != 0) return fail("read");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "interrupted") == 0) return interrupted();
  if (argc == 3 && strcmp(argv[1], "fifo") == 0) return fifo(argv[2]);
  if (argc == 3 && strcmp(argv[1], "xattr") == 0) return xattr(argv[2]);
  if (argc == 4 && strcmp(argv[1], "copy") == 0) return copy(argv[2], argv[3]);
  fprintf(stderr, "usage: fs_calls fifo DIR | xattr DIR | copy SRC DST | interrupted\n");
  return 2;
}
