// empty_probe: the floor for any tracer on a tracepoint. Attaches the smallest possible eBPF
// program (r0 = 0; exit) to one or more tracepoints, runs a command, and exits with
// the command's status. Whatever a real tracer costs beyond this is the tracer's own work.
//
//   empty_probe [-t CATEGORY:NAME | -u PATH:SYMBOL | -r RAW_TRACEPOINT]... [--] CMD [ARGS...]
//   (default tracepoint: syscalls:sys_enter_getppid)
//
// -u attaches the same empty program as a uprobe on a function's entry: the floor for function
// probes (W6).
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdint.h>
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

// The file offset of SYMBOL's first instruction in the ELF file at PATH, which is what a uprobe
// perf event wants: the symbol's address, translated through the section that holds it.
static long long symbol_offset(const char* path, const char* symbol) {
  long long off = -1;
  if (elf_version(EV_CURRENT) == EV_NONE) return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "empty_probe: %s: %s\n", path, strerror(errno));
    return -1;
  }
  Elf* elf = elf_begin(fd, ELF_C_READ, NULL);
  Elf_Scn* scn = NULL;
  while (elf && off < 0 && (scn = elf_nextscn(elf, scn)) != NULL) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
    Elf_Data* data = elf_getdata(scn, NULL);
    size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
    for (size_t k = 0; data && k < count; k++) {
      GElf_Sym sym;
      if (!gelf_getsym(data, (int)k, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
          sym.st_shndx == SHN_UNDEF)
        continue;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!name || strcmp(name, symbol) != 0) continue;
      GElf_Shdr text;
      Elf_Scn* holder = elf_getscn(elf, sym.st_shndx);
      if (holder && gelf_getshdr(holder, &text))
        off = (long long)(sym.st_value - text.sh_addr + text.sh_offset);
      break;
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  if (off < 0) fprintf(stderr, "empty_probe: no function '%s' in %s\n", symbol, path);
  return off;
}

static int uprobe_pmu_type(void) {
  FILE* f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
  int type = -1;
  if (f) {
    if (fscanf(f, "%d", &type) != 1) type = -1;
    fclose(f);
  }
  if (type < 0) fprintf(stderr, "empty_probe: this kernel has no uprobe PMU\n");
  return type;
}

// One perf event on CPU 0 is enough: the kernel keeps the program array per tracepoint and runs it
// wherever the tracepoint fires (libbpf attaches tracepoints the same way). Attaching the same
// program to a second event of the same tracepoint fails with EEXIST.
// A system-wide uprobe event (pid -1, CPU 0) fires in every process that maps the file, on any CPU,
// the way libbpf attaches one.
static int attach(int prog_fd, const struct perf_event_attr* probe) {
  struct perf_event_attr attr = *probe;
  attr.size = sizeof(attr);
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
  const char* ups[MAX_TRACEPOINTS];
  const char* raws[MAX_TRACEPOINTS];
  int ntp = 0, nup = 0, nraw = 0, i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    int up = strcmp(argv[i], "-u") == 0;
    int raw = strcmp(argv[i], "-r") == 0;
    if (!up && !raw && strcmp(argv[i], "-t") != 0) break;
    if (i + 1 >= argc || ntp + nup + nraw == MAX_TRACEPOINTS) {
      fprintf(stderr,
              "empty_probe: -t needs CATEGORY:NAME, -u PATH:SYMBOL, -r RAW_TRACEPOINT (at most "
              "%d)\n",
              MAX_TRACEPOINTS);
      return 2;
    }
    if (up)
      ups[nup++] = argv[++i];
    else if (raw)
      raws[nraw++] = argv[++i];
    else
      tps[ntp++] = argv[++i];
  }
  if (i >= argc) {
    fprintf(stderr,
            "usage: empty_probe [-t CATEGORY:NAME | -u PATH:SYMBOL | -r RAW_TRACEPOINT]... [--] "
            "CMD [ARGS...]\n");
    return 2;
  }
  if (ntp + nup + nraw == 0) tps[ntp++] = "syscalls:sys_enter_getppid";

  const char* root = ntp ? tracefs_root() : "";
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
    struct perf_event_attr attr = {.type = PERF_TYPE_TRACEPOINT, .config = (unsigned long long)id};
    if (id < 0 || attach(prog_fd, &attr) != 0) return 1;
  }
  // Raw tracepoints (-r sys_enter) run the program without building a trace record: the floor
  // for a tracer that attaches there, as fay's syscall probes do.
  if (nraw > 0) {
    int raw_fd = bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, "empty_r", "GPL", insns, 2, NULL);
    if (raw_fd < 0) {
      fprintf(stderr, "empty_probe: bpf_prog_load (raw tracepoint): %s\n", strerror(-raw_fd));
      return 1;
    }
    for (int r = 0; r < nraw; r++) {
      if (bpf_raw_tracepoint_open(raws[r], raw_fd) < 0) {
        fprintf(stderr, "empty_probe: raw tracepoint %s: %s\n", raws[r], strerror(errno));
        return 1;
      }
    }
  }
  int uprobe_fd = -1;
  if (nup > 0) {
    // Uprobes take a kprobe-type program; the same two instructions load as one.
    uprobe_fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "empty_u", "GPL", insns, 2, NULL);
    if (uprobe_fd < 0) {
      fprintf(stderr, "empty_probe: bpf_prog_load (uprobe): %s\n", strerror(-uprobe_fd));
      return 1;
    }
  }
  for (int u = 0; u < nup; u++) {
    char path[4096];
    const char* colon = strrchr(ups[u], ':');
    if (!colon || colon == ups[u] || colon[1] == '\0' || (size_t)(colon - ups[u]) >= sizeof(path)) {
      fprintf(stderr, "empty_probe: bad uprobe '%s' (want PATH:SYMBOL)\n", ups[u]);
      return 2;
    }
    memcpy(path, ups[u], colon - ups[u]);
    path[colon - ups[u]] = '\0';
    long long off = symbol_offset(path, colon + 1);
    int type = off < 0 ? -1 : uprobe_pmu_type();
    if (type < 0) return 1;
    struct perf_event_attr attr = {.type = (unsigned)type,
                                   .config1 = (unsigned long long)(uintptr_t)path,
                                   .config2 = (unsigned long long)off};
    if (attach(uprobe_fd, &attr) != 0) return 1;
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
