// iovec_rw FILE: writev of three elements ("hello ", a NULL one of length 0, 6000 bytes of 'y'
// ending in a newline) into FILE, then readv of it back into 4 + 8000 bytes: 6006 each way.
// Then the same two buffers as one datagram through a socketpair: sendmsg, and recvmsg into
// 3 + 9000 bytes with a 16-byte control buffer.
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
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

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0) return 1;
  struct iovec dgram[2] = {{a, 6}, {b, sizeof b}};
  struct msghdr m = {0};
  m.msg_iov = dgram;
  m.msg_iovlen = 2;
  if (sendmsg(sv[0], &m, 0) != 6006) return 1;
  static char c1[3], c2[9000];
  static char control[16];
  memset(c2, 0, sizeof c2);
  memset(control, 0, sizeof control);
  struct iovec back[2] = {{c1, sizeof c1}, {c2, sizeof c2}};
  struct msghdr n = {0};
  n.msg_iov = back;
  n.msg_iovlen = 2;
  n.msg_control = control;
  n.msg_controllen = sizeof control;
  if (recvmsg(sv[1], &n, 0) != 6006) return 1;
  return 0;
}
