// end_effects MODE FILE: effects on FILE that a replay of the system calls alone may or may not
// reproduce, for the end-state check of `fay replay --verify`.
//   mmap    creates FILE (0644), sizes it to 4096 and writes "through a shared mapping\n" at
//           offset 0 through a MAP_SHARED mapping, then msync, munmap, close: the calls replay
//           exactly, the bytes written through memory are in no call.
//   mmapbig the same on a file of 1 MiB, more than the trace keeps of one (512 KiB).
//   append  opens the existing FILE O_WRONLY|O_APPEND and writes "appended\n": the trace never
//           sees what FILE held before.
//   create  creates FILE (0640) with "created\n", makes FILE.dir (0750), renames FILE to
//           FILE.dir/moved, sets mode 0600 on it: every effect is a call the replay makes.
// Exit status 0 when every call returned what it should; 1 and a message otherwise.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char* what) {
  perror(what);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: end_effects mmap|append|create FILE\n");
    return 2;
  }
  const char* mode = argv[1];
  const char* file = argv[2];
  if (strcmp(mode, "mmap") == 0 || strcmp(mode, "mmapbig") == 0) {
    size_t size = strcmp(mode, "mmap") == 0 ? 4096 : 1 << 20;
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return fail("open");
    if (ftruncate(fd, (off_t)size) != 0) return fail("ftruncate");
    char* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail("mmap");
    const char msg[] = "through a shared mapping\n";
    memcpy(p, msg, sizeof msg - 1);
    if (msync(p, size, MS_SYNC) != 0) return fail("msync");
    if (munmap(p, size) != 0) return fail("munmap");
    return close(fd) == 0 ? 0 : fail("close");
  }
  if (strcmp(mode, "append") == 0) {
    int fd = open(file, O_WRONLY | O_APPEND);
    if (fd < 0) return fail("open");
    if (write(fd, "appended\n", 9) != 9) return fail("write");
    return close(fd) == 0 ? 0 : fail("close");
  }
  if (strcmp(mode, "create") == 0) {
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    if (fd < 0) return fail("open");
    if (write(fd, "created\n", 8) != 8) return fail("write");
    if (close(fd) != 0) return fail("close");
    char dir[4096], moved[4200];
    snprintf(dir, sizeof dir, "%s.dir", file);
    snprintf(moved, sizeof moved, "%s/moved", dir);
    if (mkdir(dir, 0750) != 0) return fail("mkdir");
    if (rename(file, moved) != 0) return fail("rename");
    return chmod(moved, 0600) == 0 ? 0 : fail("chmod");
  }
  fprintf(stderr, "end_effects: unknown mode %s\n", mode);
  return 2;
}
