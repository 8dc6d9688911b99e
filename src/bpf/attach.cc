#include "bpf/attach.h"

#include <bpf/bpf.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "bpf/map.h"
#include "common/privileges.h"

namespace fay::bpf {

void Link::Merge(Link&& other) {
  for (auto& fd : other.fds_) fds_.push_back(std::move(fd));
  other.fds_.clear();
}

namespace {

int PerfEventOpen(perf_event_attr* attr, int pid, int cpu) {
  return static_cast<int>(syscall(__NR_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

Status PerfError(const std::string& what, int err) {
  Status st = BpfError(what, err);
  if (const Privileges p = CurrentPrivileges();
      (err == EACCES || err == EPERM) && !p.root && !p.perfmon)
    st.Append("(also check /proc/sys/kernel/perf_event_paranoid)");
  return st;
}

// Binds `prog` to the perf event `pfd` and adds both to `link`. A bpf link is preferred: it
// ties the attachment to an fd of its own. Older kernels only have the ioctl.
Status AttachToPerfEvent(const Program& prog, UniqueFd pfd, Link& link, const std::string& what) {
  int lfd = bpf_link_create(prog.fd(), pfd.get(), BPF_PERF_EVENT, nullptr);
  UniqueFd lk;
  if (lfd >= 0) {
    lk.reset(lfd);
  } else if (ioctl(pfd.get(), PERF_EVENT_IOC_SET_BPF, prog.fd()) < 0) {
    return BpfError(fmt::format("cannot attach probe program {} to {}", prog.name(), what), errno);
  }
  if (ioctl(pfd.get(), PERF_EVENT_IOC_ENABLE, 0) < 0)
    return BpfError(fmt::format("cannot enable {}", what), errno);
  // The link goes first so that on teardown the program is detached before its event closes.
  if (lk) link.Add(std::move(lk));
  link.Add(std::move(pfd));
  return Status::Ok();
}

Expected<std::string> ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    return ErrnoError("cannot read " + path, errno ? errno : ENOENT);
  return line;
}

// A decimal number filling `s`, or -1: sysfs text is parsed without exceptions.
long ParseNumber(std::string_view s) {
  long v = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() ? v : -1;
}

// Online CPU ids from a list such as "0-3,5,7-8".
std::vector<int> OnlineCpus() {
  std::vector<int> cpus;
  auto line = ReadFirstLine("/sys/devices/system/cpu/online");
  if (!line.ok()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n; ++i) cpus.push_back(static_cast<int>(i));
    return cpus;
  }
  std::stringstream ss(*line);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    long lo = 0, hi = 0;
    if (size_t dash = part.find('-'); dash != std::string::npos) {
      lo = ParseNumber(std::string_view(part).substr(0, dash));
      hi = ParseNumber(std::string_view(part).substr(dash + 1));
    } else {
      lo = hi = ParseNumber(part);
    }
    if (lo < 0 || hi < lo) continue;
    for (long c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

}  // namespace

Expected<Link> AttachTracepoint(const Program& prog, int tp_id, const std::string& name) {
  std::string what = name.empty() ? fmt::format("tracepoint {}", tp_id) : name;
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = static_cast<uint64_t>(tp_id);
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  // A BPF program on a tracepoint runs on every CPU, whichever CPU its perf event is bound to.
  int pfd = PerfEventOpen(&attr, -1, 0);
  if (pfd < 0 && errno == EPERM) {
    // Some events refuse sampling even to root (x86's irq_vectors: their handlers run where a
    // sample cannot be taken). A counting event runs the program all the same.
    attr.sample_period = 0;
    attr.wakeup_events = 0;
    pfd = PerfEventOpen(&attr, -1, 0);
  }
  if (pfd < 0)
    return PerfError(fmt::format("cannot open {} for probe program {}", what, prog.name()), errno);
  Link link;
  FAY_RETURN_IF_ERROR(AttachToPerfEvent(prog, UniqueFd(pfd), link, what));
  return link;
}

Expected<Link> AttachRawTracepoint(const Program& prog, const std::string& name) {
  int fd = bpf_raw_tracepoint_open(name.c_str(), prog.fd());
  if (fd < 0)
    return BpfError(
        fmt::format("cannot attach probe program {} to raw tracepoint {}", prog.name(), name),
        errno);
  Link link;
  link.Add(UniqueFd(fd));
  return link;
}

Expected<Link> AttachTypedTracepoint(const Program& prog) {
  int fd = bpf_raw_tracepoint_open(nullptr, prog.fd());
  if (fd < 0)
    return BpfError(
        fmt::format("cannot attach probe program {} to its typed tracepoint", prog.name()), errno);
  Link link;
  link.Add(UniqueFd(fd));
  return link;
}

Expected<Link> AttachUprobe(const Program& prog, const std::string& path, uint64_t file_offset,
                            bool retprobe, int pid) {
  const std::string dev = "/sys/bus/event_source/devices/uprobe/";
  auto type = ReadFirstLine(dev + "type");
  if (!type.ok())
    return Error(Code::kUnsupported,
                 "this kernel has no uprobe perf event source (" + type.status().message() + ")");
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  long type_id = ParseNumber(*type);
  if (type_id < 0)
    return Error(Code::kUnsupported, "unreadable uprobe perf event type: '" + *type + "'");
  attr.type = static_cast<uint32_t>(type_id);
  if (retprobe) {
    auto fmt_line = ReadFirstLine(dev + "format/retprobe");
    if (!fmt_line.ok() || fmt_line->rfind("config:", 0) != 0)
      return Error(Code::kUnsupported, "this kernel cannot report uretprobes via perf events");
    long bit = ParseNumber(std::string_view(*fmt_line).substr(7));
    if (bit < 0 || bit > 63)
      return Error(Code::kUnsupported, "unreadable uretprobe format: '" + *fmt_line + "'");
    attr.config |= 1ULL << bit;
  }
  attr.config1 = reinterpret_cast<uint64_t>(path.c_str());
  attr.config2 = file_offset;
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  int pfd = PerfEventOpen(&attr, pid < 0 ? -1 : pid, pid < 0 ? 0 : -1);
  if (pfd < 0) {
    int err = errno;
    std::string what = fmt::format("cannot place {} on {} at file offset {:#x}",
                                   retprobe ? "uretprobe" : "uprobe", path, file_offset);
    if (err == ENOENT) return Error(Code::kNotFound, what + ": no such file");
    if (err == ESRCH) return Error(Code::kNotFound, fmt::format("{}: no process {}", what, pid));
    // ENOTSUPP (524), which strerror does not know: the instruction there cannot be
    // single-stepped out of line (a lock-prefixed or otherwise unsupported instruction).
    if (err == 524)
      return Error(Code::kUnsupported,
                   what +
                       ": the kernel cannot probe the instruction there (e.g. a "
                       "lock-prefixed one)");
    return PerfError(what, err);
  }
  Link link;
  FAY_RETURN_IF_ERROR(AttachToPerfEvent(prog, UniqueFd(pfd), link,
                                        fmt::format("uprobe {}:{:#x}", path, file_offset)));
  return link;
}

bool UprobeMultiSupported() {
  utsname u{};
  if (uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 6 || (major == 6 && minor >= 6);
}

Expected<Link> AttachUprobeMulti(const Program& prog, const std::string& path,
                                 const std::vector<uint64_t>& offsets,
                                 const std::vector<uint64_t>& cookies, bool retprobe) {
  // Debian 12's libbpf and uapi headers predate uprobe_multi (kernel 6.6), so the attr is laid
  // out here as the kernel's uapi has it: link_create's four u32s, then the uprobe_multi arm.
  struct {
    uint32_t prog_fd, target_fd, attach_type, flags;
    uint64_t path, offsets, ref_ctr_offsets, cookies;
    uint32_t cnt, multi_flags, pid, pad;
    uint8_t rest[64];  // the remainder of union bpf_attr's link_create, zero
  } attr{};
  attr.prog_fd = static_cast<uint32_t>(prog.fd());
  attr.attach_type = kAttachUprobeMulti;
  attr.path = reinterpret_cast<uint64_t>(path.c_str());
  attr.offsets = reinterpret_cast<uint64_t>(offsets.data());
  attr.cookies = reinterpret_cast<uint64_t>(cookies.data());
  attr.cnt = static_cast<uint32_t>(offsets.size());
  attr.multi_flags = retprobe ? kUprobeMultiReturn : 0u;
  int fd = static_cast<int>(syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr)));
  if (fd < 0) {
    int err = errno;
    const char* kind = retprobe ? "uretprobe" : "uprobe";
    std::string what =
        offsets.size() == 1
            ? fmt::format("cannot place a {} on {} at file offset {:#x}", kind, path, offsets[0])
            : fmt::format("cannot place {} {}s on {}", offsets.size(), kind, path);
    if (err == 524)
      return Error(Code::kUnsupported,
                   what + (offsets.size() == 1
                               ? ": the kernel cannot probe the instruction there (e.g. a "
                                 "lock-prefixed one)"
                               : ": the kernel cannot probe the instruction at one of them"));
    return BpfError(what, err);
  }
  Link link;
  link.Add(UniqueFd(fd));
  return link;
}

Expected<Link> AttachPerfSoftware(const Program& prog, uint64_t config, uint64_t freq_hz,
                                  uint64_t period_ns, int cpu) {
  if (freq_hz == 0 && period_ns == 0)
    return Error(Code::kInvalidArgument, "a sampling event needs a frequency or a period");
  std::vector<int> cpus = cpu >= 0 ? std::vector<int>{cpu} : OnlineCpus();
  Link link;
  for (int c : cpus) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = config;
    if (freq_hz > 0) {
      attr.freq = 1;
      attr.sample_freq = freq_hz;
    } else {
      attr.sample_period = period_ns;
    }
    int pfd = PerfEventOpen(&attr, -1, c);
    if (pfd < 0)
      return PerfError(fmt::format("cannot open software perf event {} on CPU {}", config, c),
                       errno);
    FAY_RETURN_IF_ERROR(AttachToPerfEvent(prog, UniqueFd(pfd), link,
                                          fmt::format("software perf event on CPU {}", c)));
  }
  return link;
}

}  // namespace fay::bpf
