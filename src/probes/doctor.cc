#include "probes/doctor.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/privileges.h"
#include "common/strings.h"
#include "probes/elf_symbols.h"
#include "probes/read_file.h"
#include "probes/tracefs.h"

namespace fay {
namespace {

// The exact `setcap` for this binary where capabilities are missing; else what is left.
std::string PrivilegeFixText() {
  std::string fix = PrivilegeFix();
  return fix.rfind("fix: ", 0) == 0 ? fix.substr(5) : fix;
}
constexpr const char* kPmuDir = "/sys/bus/event_source/devices";

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsPrivilegeError(int err) {
  return err == EPERM || err == EACCES;
}

DoctorCheck Ok(std::string text, bool required) {
  return {true, required, std::move(text), ""};
}
DoctorCheck No(std::string text, std::string fix, bool required) {
  return {false, required, std::move(text), std::move(fix)};
}

int PerfEventOpen(perf_event_attr* attr, pid_t pid, int cpu) {
  return static_cast<int>(::syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// A PMU's dynamic type number from sysfs, or -1.
int PmuType(const std::string& pmu) {
  auto text = ReadWholeFile(std::string(kPmuDir) + "/" + pmu + "/type");
  if (!text.ok()) return -1;
  return std::atoi(text->c_str());
}

// r0 = 0; exit: the smallest program every verifier accepts.
const bpf_insn kReturnZero[] = {
    {BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0},
    {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
};

UniqueFd LoadTrivial(bpf_prog_type type, bpf_prog_load_opts* opts = nullptr) {
  int fd = bpf_prog_load(type, "fay_doctor", "GPL", kReturnZero, 2, opts);
  if (fd < 0) errno = -fd;
  return UniqueFd(fd < 0 ? -1 : fd);
}

// The last non-empty line of a verifier log.
std::string LastLogLine(const char* log) {
  std::string_view s = Trim(log);
  size_t nl = s.rfind('\n');
  return std::string(nl == std::string_view::npos ? s : s.substr(nl + 1));
}

DoctorCheck CheckKernel() {
  struct utsname u;
  ::uname(&u);
  const char* btf = "/sys/kernel/btf/vmlinux";
  if (Exists(btf)) return Ok(std::string("kernel ") + u.release + " with BTF (" + btf + ")", false);
  return No(std::string("kernel ") + u.release + " without BTF (no " + btf + ")",
            "fay does not need BTF; fentry/fexit would need CONFIG_DEBUG_INFO_BTF=y", false);
}

// Root, or the capabilities that stand for it; the exact setcap line for what is missing.
DoctorCheck CheckPrivileges() {
  const Privileges p = CurrentPrivileges();
  if (p.root) return Ok("privileges: running as root", true);
  const std::vector<std::string> missing = MissingCapabilities(p);
  if (missing.empty())
    return Ok("privileges: not root, with CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE", true);
  std::string names;
  for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
  return No("privileges: not root, and without " + names, SetcapCommand() + " (or run as root)",
            true);
}

// An unprivileged fay with capabilities cannot read tracefs (root's alone, mode 0700): syscall
// probes then come from fay's syscall table on raw tracepoints; tracepoint: probes need it.
DoctorCheck CheckTracefsReadable() {
  auto root = FindTracefs();
  if (!root) return Ok("tracefs: not mounted, nothing to read", false);
  // The effective ids and capabilities (cap_dac_read_search), not access()'s real uid.
  if (::faccessat(AT_FDCWD, (*root + "/events").c_str(), R_OK | X_OK, AT_EACCESS) == 0)
    return Ok("tracefs readable: tracepoint: probes and tracefs formats for syscall: ones", false);
  return No("tracefs at " + *root +
                " is root's alone: syscall: probes use fay's table instead; "
                "tracepoint: probes cannot be resolved",
            "for tracepoint: probes, run as root or also grant cap_dac_read_search", false);
}

DoctorCheck CheckTracefs() {
  bool was_mounted = FindTracefs().has_value();
  Status st = EnsureTracefs();
  if (!st.ok()) {
    if (st.code() == Code::kPermission) {
      return No("tracefs not mounted, and mounting it needs root", kTracefsMountFix, true);
    }
    return No("tracefs: " + st.message(), "use a kernel built with CONFIG_TRACING=y", true);
  }
  std::string text = "tracefs mounted at " + FindTracefs().value_or(kTracefsPath);
  if (!was_mounted) text += " (fay mounted it)";
  return Ok(text, true);
}

DoctorCheck CheckBpfTracepoint() {
  UniqueFd prog = LoadTrivial(BPF_PROG_TYPE_TRACEPOINT);
  if (!prog.valid()) {
    int err = errno;
    std::string text = "bpf(): cannot load a tracepoint program: " + ErrnoText(err);
    if (err == ENOSYS) {
      return No(text + " (kernel built without CONFIG_BPF_SYSCALL)",
                "use a kernel with CONFIG_BPF_SYSCALL=y", true);
    }
    if (IsPrivilegeError(err)) return No(text + " (not privileged)", PrivilegeFixText(), true);
    return No(text, "check `dmesg` and the kernel's BPF configuration", true);
  }
  // Attaching, not just loading, is what a query does: try syscalls:sys_enter_getppid.
  auto root = FindTracefs();
  if (!root) return Ok("bpf(): tracepoint programs load (attach not tried: no tracefs)", true);
  auto format = ReadEventFormat(*root, "syscalls", "sys_enter_getppid");
  if (!format.ok()) return Ok("bpf(): tracepoint programs load (attach not tried)", true);
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = static_cast<uint64_t>(format->id);
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  UniqueFd event(PerfEventOpen(&attr, -1, 0));
  if (!event.valid()) {
    int err = errno;
    return No("tracepoint programs load but perf_event_open(tracepoint) fails: " + ErrnoText(err),
              IsPrivilegeError(err) ? PrivilegeFixText() : "check kernel.perf_event_paranoid",
              true);
  }
  if (::ioctl(event.get(), PERF_EVENT_IOC_SET_BPF, prog.get()) != 0) {
    int err = errno;
    return No("tracepoint programs load but do not attach: " + ErrnoText(err), PrivilegeFixText(),
              true);
  }
  return Ok("bpf(): tracepoint programs load and attach", true);
}

DoctorCheck CheckMap(bpf_map_type type, const char* what, uint32_t key, uint32_t value,
                     uint32_t entries, const char* missing_means) {
  int fd = bpf_map_create(type, "fay_doctor", key, value, entries, nullptr);
  if (fd >= 0) {
    ::close(fd);
    return Ok(what, true);
  }
  int err = -fd;
  std::string text = std::string(what) + ": " + ErrnoText(err);
  if (IsPrivilegeError(err)) return No(text + " (not privileged)", PrivilegeFixText(), true);
  return No(text + " (" + missing_means + ")", "use a newer kernel (5.8 or later)", true);
}

DoctorCheck CheckUprobes() {
  int type = PmuType("uprobe");
  if (type < 0) {
    return No(std::string("uprobes: no uprobe PMU in ") + kPmuDir +
                  " (kernel built without CONFIG_UPROBE_EVENTS)",
              "use a kernel with CONFIG_UPROBES=y and CONFIG_UPROBE_EVENTS=y", true);
  }
  std::string pmu = "uprobes (perf uprobe PMU type " + std::to_string(type) + ")";
  // Really place one, on a libc function, for this process only.
  auto libc = ResolveBinaryPath("libc.so.6");
  if (!libc.ok()) return Ok(pmu + "; attach not tried: libc not found", true);
  auto symbols = ReadFunctionSymbols(*libc);
  if (!symbols.ok() || symbols->empty()) return Ok(pmu + "; attach not tried", true);
  uint64_t offset = symbols->front().file_offset;
  for (const auto& s : *symbols)
    if (s.name == "getpid") offset = s.file_offset;
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = static_cast<uint32_t>(type);
  attr.config1 = reinterpret_cast<uint64_t>(libc->c_str());
  attr.config2 = offset;
  attr.sample_period = 1;
  UniqueFd event(PerfEventOpen(&attr, ::getpid(), -1));
  if (!event.valid()) {
    int err = errno;
    // With every capability fay asks for, a kernel that wants more for uprobes still leaves
    // -c and -p, whose uprobes run in the process (docs/INPROCESS.md).
    if (IsPrivilegeError(err) && MissingCapabilities(CurrentPrivileges()).empty())
      return No("kernel uprobes: perf_event_open(uprobe) fails: " + ErrnoText(err) +
                    " (this kernel wants more than CAP_PERFMON for them); in-process uprobes of "
                    "-c and -p commands need none",
                "for machine-wide uprobes, run as root", false);
    return No("uprobes: perf_event_open(uprobe) fails: " + ErrnoText(err),
              IsPrivilegeError(err) ? PrivilegeFixText() : "check `dmesg`", true);
  }
  UniqueFd prog = LoadTrivial(BPF_PROG_TYPE_KPROBE);
  if (!prog.valid() || ::ioctl(event.get(), PERF_EVENT_IOC_SET_BPF, prog.get()) != 0) {
    int err = errno;
    return No("uprobes: probes are placed but BPF programs do not attach: " + ErrnoText(err),
              PrivilegeFixText(), true);
  }
  return Ok(pmu, true);
}

DoctorCheck CheckSoftwareEvents() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.sample_freq = 99;
  attr.freq = 1;
  UniqueFd event(PerfEventOpen(&attr, -1, 0));
  if (!event.valid()) {
    int err = errno;
    return No("perf cpu-clock sampling (profile:, interval:): " + ErrnoText(err),
              IsPrivilegeError(err) ? PrivilegeFixText() : "use a kernel with CONFIG_PERF_EVENTS=y",
              false);
  }
  return Ok("perf cpu-clock sampling (profile:, interval:)", false);
}

DoctorCheck CheckPtrace() {
  pid_t child = ::fork();
  if (child < 0) return No("ptrace: fork failed: " + ErrnoText(errno), "", false);
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) ::pause();
  }
  long r = ::ptrace(PTRACE_SEIZE, child, nullptr, nullptr);
  int err = errno;
  ::kill(child, SIGKILL);
  int wstatus = 0;
  while (::waitpid(child, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (r != 0) {
    return No("ptrace: PTRACE_SEIZE of a child fails: " + ErrnoText(err) +
                  (IsPrivilegeError(err) ? " (seccomp, Yama or a container forbids ptrace)" : ""),
              "allow ptrace (kernel.yama.ptrace_scope <= 1, no seccomp filter on ptrace); fay "
              "record falls back to eBPF",
              false);
  }
  return Ok("ptrace", false);
}

DoctorCheck CheckKprobes() {
  int type = PmuType("kprobe");
  if (type < 0) {
    return No(std::string("kprobes: no kprobe PMU in ") + kPmuDir +
                  " (kernel built without CONFIG_KPROBE_EVENTS)",
              "none needed: fay uses tracepoints and uprobes instead", false);
  }
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = static_cast<uint32_t>(type);
  const char* func = "do_sys_openat2";
  attr.config1 = reinterpret_cast<uint64_t>(func);
  UniqueFd event(PerfEventOpen(&attr, -1, 0));
  if (!event.valid()) {
    int err = errno;
    return No("kprobes: perf_event_open(kprobe " + std::string(func) + ") fails: " + ErrnoText(err),
              IsPrivilegeError(err) ? PrivilegeFixText()
                                    : "none needed: fay uses tracepoints and uprobes instead",
              false);
  }
  return Ok("kprobes (perf kprobe PMU type " + std::to_string(type) + ")", false);
}

DoctorCheck CheckFentry() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) {
    return No("fentry/fexit: no kernel BTF to attach by", "needs CONFIG_DEBUG_INFO_BTF=y", false);
  }
  int id = -1;
  for (const char* func : {"vfs_read", "do_sys_openat2", "__x64_sys_getpid", "schedule"}) {
    id = btf__find_by_name_kind(vmlinux, func, BTF_KIND_FUNC);
    if (id > 0) break;
  }
  btf__free(vmlinux);
  if (id <= 0) {
    return No("fentry/fexit: no traceable kernel function found in BTF",
              "none needed: fay uses tracepoints and uprobes instead", false);
  }
  char log[4096] = "";
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY,
              .attach_btf_id = static_cast<__u32>(id), .log_level = 1, .log_size = sizeof log,
              .log_buf = log);
  UniqueFd prog = LoadTrivial(BPF_PROG_TYPE_TRACING, &opts);
  int err = errno;
  if (prog.valid()) {
    int link = bpf_link_create(prog.get(), 0, BPF_TRACE_FENTRY, nullptr);
    if (link >= 0) {
      ::close(link);
      return Ok("fentry/fexit", false);
    }
    err = -link;
  }
  std::string text = "fentry/fexit: " + ErrnoText(err);
  std::string detail = LastLogLine(log);
  if (!detail.empty()) text += ": " + detail;
  if (IsPrivilegeError(err)) {
    text += " (the kernel refuses BPF trampoline programs";
    text += ::geteuid() == 0 ? " even to root: a security policy forbids them)" : ")";
  } else if (err == ENOTSUP || err == 524 /* ENOTSUPP */ || err == EINVAL) {
    text += " (no BPF trampoline support on this kernel)";
  }
  bool unprivileged = IsPrivilegeError(err) && ::geteuid() != 0;
  return No(
      text,
      unprivileged ? PrivilegeFixText() : "none needed: fay uses tracepoints and uprobes instead",
      false);
}

DoctorCheck CheckHardwareCounters() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.exclude_kernel = 1;
  UniqueFd event(PerfEventOpen(&attr, 0, -1));
  if (event.valid()) return Ok("hardware counters (cpu cycles)", false);
  int err = errno;
  std::string text = "hardware counters: perf_event_open(cycles) fails: " + ErrnoText(err);
  if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV) {
    return No(text + " (no hardware PMU exposed, as in most virtual machines)",
              "none needed: profile: samples on the software cpu-clock", false);
  }
  return No(text, IsPrivilegeError(err) ? PrivilegeFixText() : "", false);
}

}  // namespace

std::string ErrnoText(int err) {
  const char* name = ::strerrorname_np(err);
  std::string text = name ? name : "errno " + std::to_string(err);
  return text + " (" + std::strerror(err) + ")";
}

bool DoctorReport::ready() const {
  for (const auto& c : checks)
    if (c.required && !c.ok) return false;
  return true;
}

DoctorReport RunDoctor() {
  // libbpf would print its own warnings for every probe that is expected to fail.
  libbpf_print_fn_t old = libbpf_set_print(nullptr);
  DoctorReport r;
  r.checks.push_back(CheckPrivileges());
  r.checks.push_back(CheckKernel());
  r.checks.push_back(CheckTracefs());
  r.checks.push_back(CheckTracefsReadable());
  r.checks.push_back(CheckBpfTracepoint());
  r.checks.push_back(CheckMap(BPF_MAP_TYPE_RINGBUF, "ring buffer maps", 0, 0,
                              static_cast<uint32_t>(::getpagesize()) * 4,
                              "kernel before 5.8 has no BPF ring buffer"));
  r.checks.push_back(CheckMap(BPF_MAP_TYPE_PERCPU_HASH, "per-CPU hash maps", 8, 8, 16,
                              "kernel without per-CPU maps"));
  r.checks.push_back(CheckUprobes());
  r.checks.push_back(CheckSoftwareEvents());
  r.checks.push_back(CheckPtrace());
  r.checks.push_back(CheckKprobes());
  r.checks.push_back(CheckFentry());
  r.checks.push_back(CheckHardwareCounters());
  libbpf_set_print(old);
  return r;
}

}  // namespace fay
