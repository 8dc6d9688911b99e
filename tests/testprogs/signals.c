// Signals of every origin whose siginfo is deterministic, for the signal-delivery tests:
//   kill(self, SIGUSR1)             -> SI_USER
//   sigqueue(self, SIGUSR2, 42)     -> SI_QUEUE with a value
//   tgkill(self, self, SIGUSR1)     -> SI_TKILL, taken with SIGUSR2 blocked
//   a child that exits 3            -> SIGCHLD CLD_EXITED, while SIGCHLD is ignored by default
//   a child killed with SIGTERM     -> SIGTERM in the child (fatal), SIGCHLD CLD_KILLED handled
//   a load from address 16          -> SIGSEGV SEGV_MAPERR si_addr=0x10, handled
// With the argument `sleep`, only: a 1 s clock_nanosleep that a SIGALRM 20 ms later cuts short,
// which writes the time left.
// Usage: signals [sleep]
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf after_fault;
// Read through a variable, so that the compiler neither folds nor warns about the bad load.
static volatile unsigned long bad_address = 16;

static void on_signal(int sig) {
  (void)sig;
}

static void on_fault(int sig) {
  (void)sig;
  siglongjmp(after_fault, 1);
}

static void handle(int sig, void (*fn)(int)) {
  struct sigaction sa = {0};
  sa.sa_handler = fn;
  sigaction(sig, &sa, 0);
}

static int interrupted_sleep(void) {
  handle(SIGALRM, on_signal);
  struct itimerval at = {{0, 0}, {0, 20000}};
  setitimer(ITIMER_REAL, &at, 0);
  struct timespec want = {1, 0}, left;
  return clock_nanosleep(CLOCK_REALTIME, 0, &want, &left) == EINTR ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "sleep") == 0) return interrupted_sleep();
  handle(SIGUSR1, on_signal);
  handle(SIGUSR2, on_signal);
  kill(getpid(), SIGUSR1);
  union sigval v = {.sival_int = 42};
  sigqueue(getpid(), SIGUSR2, v);
  // Taken with SIGUSR2 blocked: the handler's rt_sigreturn restores the mask [USR2].
  sigset_t usr2, none;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  sigprocmask(SIG_BLOCK, &usr2, &none);
  syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGUSR1);
  sigprocmask(SIG_SETMASK, &none, 0);

  pid_t child = fork();
  if (child == 0) _exit(3);
  waitpid(child, 0, 0);

  handle(SIGCHLD, on_signal);
  child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  kill(child, SIGTERM);
  while (waitpid(child, 0, 0) < 0) {
  }

  handle(SIGSEGV, on_fault);
  if (sigsetjmp(after_fault, 1) == 0) (void)*(volatile int*)bad_address;
  return 0;
}
