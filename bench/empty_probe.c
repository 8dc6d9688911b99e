// empty_probe: the floor for any tracer on a tracepoint. Attaches the smallest possible eBPF
// program (r0 = 0; exit) to one or more tracepoints, runs a command, and exits with
// the command's status. Whatever a real tracer costs beyond this is the tracer's own work.
//
//   empty_probe [-t CATEGORY:NAME]... [--] CMD [ARGS...]
//   (default tracepoint: syscalls:sys_enter_getppid)
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TRACEPOINTS 16

static const char* tracefs_root(void) {
  static const char* roots[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
  struct stat st;
  for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
    char path[256];
    snprintf(path, sizeof(path), "%s/events", roots[i]);
    if (stat(path, &st) == 0) return roots[i];
  }
  // Not mounted: mount it where the kernel expects it (we are root if bpf() will work at all).
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0) return roots[0];
  return NULL;
}

static long tracepoint_id(const char* root, const char* spec) {
  char cat[128], name[128], path[512];
  const char* colon = strchr(spec, ':');
  if (!colon || colon == spec || strlen(colon + 1) == 0 || (size_t)(colon - spec) >= sizeof(cat) ||
      strlen(colon + 1) >= sizeof(name)) {
    fprintf(stderr, "empty_probe: bad tracepoint '%s' (want CATEGORY:NAME)\n", spec);
    return -1;
  }
  memcpy(cat, spec, colon - spec);
  cat[colon - spec] = '\0';
  strcpy(name, colon + 1);
  snprintf(path, sizeof(path), "%s/events/%s/%s/id", root, cat, name);
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "empty_probe: %s: %s\n", path, strerror(errno));
    return -1;
  }
  long id = -1;
  if (fscanf(f, "%ld", &id) != 1) id = -1;
  fclose(f);
  return id;
}

// One perf event on CPU 0 is enough: the kernel keeps the program array per tracepoint and runs it
// wherever the tracepoint fires (libbpf attaches tracepoints the same way). Attaching the same
// program to a second event of the same tracepoint fails with EEXIST.
static int attach(int prog_fd, long tp_id) {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = (unsigned long long)tp_id;
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  int fd = (int)syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    perror("empty_probe: perf_event_open");
    return -1;
  }
  if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog_fd) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    perror("empty_probe: attaching the program");
    return -1;
  }
  return 0;  // the fd stays open until we exit: that is the attachment's lifetime
}

int main(int argc, char** argv) {
  const char* tps[MAX_TRACEPOINTS];
  int ntp = 0, i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    if (strcmp(argv[i], "-t") != 0) break;
    if (i + 1 >= argc || ntp == MAX_TRACEPOINTS) {
      fprintf(stderr, "empty_probe: -t needs CATEGORY:NAME (at most %d)\n", MAX_TRACEPOINTS);
      return 2;
    }
    tps[ntp++] = argv[++i];
  }
  if (i >= argc) {
    fprintf(stderr, "usage: empty_probe [-t CATEGORY:NAME]... [--] CMD [ARGS...]\n");
    return 2;
  }
  if (ntp == 0) tps[ntp++] = "syscalls:sys_enter_getppid";

  const char* root = tracefs_root();
  if (!root) {
    fprintf(stderr, "empty_probe: tracefs is not mounted and cannot be mounted\n");
    return 1;
  }
  const struct bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT},
  };
  int prog_fd = bpf_prog_load(BPF_PROG_TYPE_TRACEPOINT, "empty", "GPL", insns, 2, NULL);
  if (prog_fd < 0) {
    fprintf(stderr, "empty_probe: bpf_prog_load: %s\n", strerror(-prog_fd));
    return 1;
  }
  for (int t = 0; t < ntp; t++) {
    long id = tracepoint_id(root, tps[t]);
    if (id < 0 || attach(prog_fd, id) != 0) return 1;
  }

  pid_t pid = fork();
  if (pid < 0) {
    perror("empty_probe: fork");
    return 1;
  }
  if (pid == 0) {
    execvp(argv[i], argv + i);
    fprintf(stderr, "empty_probe: %s: %s\n", argv[i], strerror(errno));
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
