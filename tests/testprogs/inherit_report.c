// inherit_report: prints what the program inherited from whoever started it, one fact a line:
// the signals whose disposition is SIG_IGN, the blocked signals, the descriptors above 2 that
// are open, and FAY_INHERIT_* environment variables. A tracer that starts it must not change
// any of these (strace's rule). Exits 0.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char** environ;

int main(void) {
  printf("ignored:");
  for (int s = 1; s < NSIG; s++) {
    struct sigaction sa;
    if (s == SIGKILL || s == SIGSTOP || sigaction(s, NULL, &sa) != 0) continue;
    if (sa.sa_handler == SIG_IGN) printf(" %d", s);
  }
  printf("\nblocked:");
  sigset_t mask;
  sigprocmask(SIG_BLOCK, NULL, &mask);
  for (int s = 1; s < NSIG; s++)
    if (sigismember(&mask, s) == 1) printf(" %d", s);
  printf("\nfds:");
  for (int fd = 3; fd < 64; fd++)
    if (fcntl(fd, F_GETFD) >= 0) printf(" %d", fd);
  printf("\nenv:");
  for (char** e = environ; *e; e++)
    if (strncmp(*e, "FAY_INHERIT_", 12) == 0) printf(" %s", *e);
  printf("\n");
  return 0;
}
