// exit_status CODE [SIG]: exits with CODE (0..255); with a non-zero SIG, kills itself with that
// signal instead (the default action of SIG must be to terminate). Lets a test check that a
// tracer hands on the traced program's exit status, and 128+SIG for a death by signal.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char** argv) {
  const char* usage = "usage: exit_status CODE [SIG]   (CODE <= 255)\n";
  long code = testprog_arg(argc, argv, 1, usage);
  long sig = argc > 2 ? testprog_arg(argc, argv, 2, usage) : 0;
  if (code > 255 || sig >= 65) {
    (void)!write(2, usage, __builtin_strlen(usage));
    return 2;
  }
  if (sig) {
    // The raw syscalls: one getpid, one kill, and the process is gone (an unblocked
    // terminating signal sent to oneself is delivered before kill returns).
    syscall(SYS_kill, syscall(SYS_getpid), sig);
    return 3;  // only reached for a signal that does not terminate
  }
  return (int)code;
}
