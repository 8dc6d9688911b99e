// runone: measures one command the way bench/run reports it.
//
//   runone RESULT_FILE CMD [ARGS...]
//
// Writes "status wall_ns user_us sys_us maxrss_kb start_ns" to RESULT_FILE (start_ns: the
// CLOCK_MONOTONIC instant just before the fork, for tools that stamp their own milestones), where status is the exit code
// or -SIGNAL. It exists because ru_maxrss survives exec: a command forked straight from the
// Python harness would report the harness's own RSS as its peak. Forked from this small static
// program, the command's peak RSS is its own.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: runone RESULT_FILE CMD [ARGS...]\n");
    return 2;
  }
  long long start = now_ns();
  pid_t pid = fork();
  if (pid < 0) {
    perror("runone: fork");
    return 2;
  }
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    fprintf(stderr, "runone: %s: %s\n", argv[2], strerror(errno));
    _exit(127);
  }
  int status;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      perror("runone: wait4");
      return 2;
    }
  }
  long long wall = now_ns() - start;
  FILE* f = fopen(argv[1], "w");
  if (!f) {
    perror("runone: result file");
    return 2;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  fprintf(f, "%d %lld %lld %lld %ld %lld\n", code, wall,
          (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
          (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_maxrss, start);
  return fclose(f) == 0 ? 0 : 2;
}
