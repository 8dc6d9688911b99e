// path_calls DIR N: N rounds of path-taking system calls whose path argument sits at a different
// position from one syscall to the next, each on a path of its own under DIR, so a query over
// several of them shows which path each call really carried. Raw syscalls pin each number.
// Per round: open(DIR/open, O_CLOEXEC) and openat(AT_FDCWD, DIR/openat, O_NOFOLLOW), both ENOENT; stat(DIR/stat),
// lstat(DIR/lstat), statx(AT_FDCWD, DIR/statx), newfstatat(AT_FDCWD, DIR/fstatat), all ENOENT;
// mkdir(DIR/dir) and rmdir(DIR/dir), both 0; execve(DIR/exec), ENOENT. DIR must exist and hold
// none of these names. Exits 1 if any call returns something else.
#include <errno.h>
#include <fcntl.h>
#include <linux/stat.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

static int bad;

static void expect(long r, int err) {
  if (err ? (r != -1 || errno != err) : r != 0) bad = 1;
}

int main(int argc, char** argv) {
  long n = testprog_arg(argc, argv, 2, "usage: path_calls DIR N\n");
  const char* dir = argv[1];
  char p[9][4096];
  const char* names[9] = {"open", "openat", "stat", "lstat", "statx", "fstatat", "dir", "exec", ""};
  for (int i = 0; i < 8; i++) snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
  struct stat st;
  struct statx stx;
  char* const args[] = {p[7], NULL};
  for (long i = 0; i < n; i++) {
    expect(syscall(SYS_open, p[0], O_RDONLY | O_CLOEXEC), ENOENT);
    expect(syscall(SYS_openat, AT_FDCWD, p[1], O_RDONLY | O_NOFOLLOW), ENOENT);
    expect(syscall(SYS_stat, p[2], &st), ENOENT);
    expect(syscall(SYS_lstat, p[3], &st), ENOENT);
    expect(syscall(SYS_statx, AT_FDCWD, p[4], 0, STATX_BASIC_STATS, &stx), ENOENT);
    expect(syscall(SYS_newfstatat, AT_FDCWD, p[5], &st, 0), ENOENT);
    expect(syscall(SYS_mkdir, p[6], 0755), 0);
    expect(syscall(SYS_rmdir, p[6]), 0);
    expect(syscall(SYS_execve, p[7], args, args + 1), ENOENT);
  }
  return bad;
}
