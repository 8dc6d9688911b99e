// write_epipe: makes a pipe, closes its read end, and writes one byte "x" to the write end with
// SIGPIPE at its default action, so the write fails with EPIPE and the program dies of SIGPIPE
// (exit status 128 + 13 from a shell). One thread, no dynamic loader, nothing else.
#include <signal.h>
#include <unistd.h>

int main(void) {
  signal(SIGPIPE, SIG_DFL);
  int p[2];
  if (pipe(p) != 0) return 1;
  close(p[0]);
  (void)!write(p[1], "x", 1);
  return 1;  // not reached: SIGPIPE ended the program
}
