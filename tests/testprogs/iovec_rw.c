// iovec_rw FILE: writev of three elements ("hello ", a NULL one of length 0, 6000 bytes of 'y'
// ending in a newline) into FILE, then readv of it back into 4 + 8000 bytes: 6006 each way.
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    (void)!write(2, "usage: iovec_rw FILE\n", 21);
    return 2;
  }
  static char a[] = "hello ", b[6000], r1[4], r2[8000];
  memset(b, 'y', sizeof b);
  b[sizeof b - 1] = '\n';
  struct iovec out[3] = {{a, 6}, {NULL, 0}, {b, sizeof b}};
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || writev(fd, out, 3) != 6006) return 1;
  close(fd);
  // Touched before the call: the kernel only writes into them, and a probe reads them after.
  memset(r2, 0, sizeof r2);
  struct iovec in[2] = {{r1, sizeof r1}, {r2, sizeof r2}};
  fd = open(argv[1], O_RDONLY);
  if (fd < 0 || readv(fd, in, 2) != 6006) return 1;
  close(fd);
  return 0;
}
