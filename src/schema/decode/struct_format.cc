#include "schema/decode/struct_format.h"

#include <fmt/format.h>

#include <ctime>

#include <cstring>
#include <vector>

#include "schema/decode/siginfo.h"
#include "schema/syscall_capture.h"
#include "schema/syscall_values.h"

namespace fay::decode {
namespace {

bool IsSelectOrPoll(std::string_view name) {
  return name == "select" || name == "pselect6" || name == "poll" || name == "ppoll";
}

std::string Addr(uint64_t v) {
  return v == 0 ? "NULL" : fmt::format("{:#x}", v);
}

// Reads a T at off; false when the buffer is too short.
template <typename T>
bool Load(const CapturedBuffer* b, size_t off, T* v) {
  if (b == nullptr || b->not_captured || off + sizeof(T) > b->bytes.size()) return false;
  std::memcpy(v, b->bytes.data() + off, sizeof(T));
  return true;
}

template <typename T>
T Get(const CapturedBuffer* b, size_t off) {
  T v{};
  Load(b, off, &v);
  return v;
}

bool Has(const CapturedBuffer* b, size_t size) {
  return b != nullptr && !b->not_captured && b->bytes.size() >= size;
}

std::string FileType(uint32_t mode) {
  switch (mode & 0170000) {
    case 0140000:
      return "S_IFSOCK";
    case 0120000:
      return "S_IFLNK";
    case 0100000:
      return "S_IFREG";
    case 060000:
      return "S_IFBLK";
    case 040000:
      return "S_IFDIR";
    case 020000:
      return "S_IFCHR";
    case 010000:
      return "S_IFIFO";
    default:
      return {};
  }
}

// st_mode as strace prints it in a stat struct: type, set-id bits by name, permissions.
std::string StMode(uint32_t mode) {
  std::string out = FileType(mode);
  if (out.empty() && (mode & 0170000)) out = fmt::format("{:#o}", mode & 0170000);
  if (mode & 04000) out += "|S_ISUID";
  if (mode & 02000) out += "|S_ISGID";
  if (mode & 01000) out += "|S_ISVTX";
  out += fmt::format("|{:#03o}", mode & 0777);
  if (!out.empty() && out[0] == '|') out.erase(0, 1);
  return out;
}

std::string Timespec(const CapturedBuffer* b, size_t off, bool usec) {
  int64_t sec = Get<int64_t>(b, off), frac = Get<int64_t>(b, off + 8);
  if (!usec) {
    if (frac == 0x3fffffff) return fmt::format("{{tv_sec={}, tv_nsec=UTIME_NOW}}", sec);
    if (frac == 0x3ffffffe) return fmt::format("{{tv_sec={}, tv_nsec=UTIME_OMIT}}", sec);
  }
  return fmt::format("{{tv_sec={}, {}={}}}", sec, usec ? "tv_usec" : "tv_nsec", frac);
}

// utimensat's times as strace prints them: UTIME_NOW and UTIME_OMIT by name alone, and a time
// with its date in a comment, in the local zone (TZ), nanoseconds when there are any.
std::string TimespecUtime(const CapturedBuffer* b, size_t off) {
  int64_t sec = Get<int64_t>(b, off), nsec = Get<int64_t>(b, off + 8);
  if (nsec == 0x3fffffff) return "UTIME_NOW";
  if (nsec == 0x3ffffffe) return "UTIME_OMIT";
  std::string out = fmt::format("{{tv_sec={}, tv_nsec={}}}", sec, nsec);
  time_t t = static_cast<time_t>(sec);
  struct tm tm;
  char date[64], zone[16];
  if (!localtime_r(&t, &tm) || !strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm) ||
      !strftime(zone, sizeof zone, "%z", &tm))
    return out;
  if (nsec > 0 && nsec < 1'000'000'000)
    return fmt::format("{} /* {}.{:09}{} */", out, date, nsec, zone);
  return fmt::format("{} /* {}{} */", out, date, zone);
}

std::string Rlim(uint64_t v) {
  if (v == ~0ull) return "RLIM64_INFINITY";
  if (v > 1024 && v % 1024 == 0) return fmt::format("{}*1024", v / 1024);
  return std::to_string(v);
}

// Signals 1..64 in a kernel sigset; strace prints the complement when most are set.
std::string Sigset(const CapturedBuffer* b) {
  size_t bytes = std::min<size_t>(b->bytes.size(), 8);
  uint64_t mask = 0;
  std::memcpy(&mask, b->bytes.data(), bytes);
  int nsig = static_cast<int>(bytes * 8);
  int set = __builtin_popcountll(mask);
  bool invert = set > nsig / 2;
  std::string out = invert ? "~[" : "[";
  bool first = true;
  for (int i = 0; i < nsig; ++i) {
    bool on = (mask >> i) & 1;
    if (on == invert) continue;
    if (!first) out += ' ';
    first = false;
    out += SignalShortName(i + 1);
  }
  return out + "]";
}

std::string Sockaddr(const CapturedBuffer* b, const FormatOptions& opts) {
  const std::vector<uint8_t>& d = b->bytes;
  if (d.size() < 2) return "{sa_family=AF_UNSPEC}";
  uint16_t family = Get<uint16_t>(b, 0);
  std::string fam = FormatEnum(ValueSet::kAddressFamily, family);
  if (family == 1) {  // AF_UNIX
    if (d.size() <= 2) return "{sa_family=AF_UNIX}";
    std::span<const uint8_t> path(d.data() + 2, d.size() - 2);
    bool abstract = path[0] == 0;
    if (abstract) path = path.subspan(1);
    size_t len = abstract ? path.size() : std::strlen(reinterpret_cast<const char*>(path.data()));
    len = std::min(len, path.size());
    FormatOptions o = opts;
    return fmt::format("{{sa_family=AF_UNIX, sun_path={}{}}}", abstract ? "@" : "",
                       QuoteString(path.subspan(0, len), 108, false, o));
  }
  if (family == 2 && d.size() >= 8) {  // AF_INET
    uint16_t port = static_cast<uint16_t>(d[2] << 8 | d[3]);
    return fmt::format(
        "{{sa_family=AF_INET, sin_port=htons({}), sin_addr=inet_addr(\"{}.{}.{}.{}\")}}", port,
        d[4], d[5], d[6], d[7]);
  }
  if (family == 10 && d.size() >= 24) {  // AF_INET6
    uint16_t port = static_cast<uint16_t>(d[2] << 8 | d[3]);
    uint32_t flow = static_cast<uint32_t>(d[4]) << 24 | d[5] << 16 | d[6] << 8 | d[7];
    // RFC 5952 text form: the longest run (>= 2) of zero groups collapses to "::".
    uint16_t g[8];
    for (int i = 0; i < 8; ++i) g[i] = static_cast<uint16_t>(d[8 + 2 * i] << 8 | d[9 + 2 * i]);
    int best = -1, best_len = 0;
    for (int i = 0; i < 8;) {
      if (g[i] != 0) {
        ++i;
        continue;
      }
      int j = i;
      while (j < 8 && g[j] == 0) ++j;
      if (j - i > best_len && j - i >= 2) best = i, best_len = j - i;
      i = j;
    }
    std::string text;
    bool v4mapped = g[0] == 0 && g[1] == 0 && g[2] == 0 && g[3] == 0 && g[4] == 0 && g[5] == 0xffff;
    if (v4mapped) {
      text = fmt::format("::ffff:{}.{}.{}.{}", d[20], d[21], d[22], d[23]);
    } else {
      for (int i = 0; i < 8; ++i) {
        if (i == best) {
          text += "::";
          i += best_len - 1;
          continue;
        }
        if (!text.empty() && text.back() != ':') text += ':';
        text += fmt::format("{:x}", g[i]);
      }
    }
    uint32_t scope = d.size() >= 28 ? Get<uint32_t>(b, 24) : 0;
    return fmt::format(
        "{{sa_family=AF_INET6, sin6_port=htons({}), sin6_flowinfo=htonl({}), "
        "inet_pton(AF_INET6, \"{}\", &sin6_addr), sin6_scope_id={}}}",
        port, flow, text, scope);
  }
  if (family == 16 && d.size() >= 12) {  // AF_NETLINK
    return fmt::format("{{sa_family=AF_NETLINK, nl_pid={}, nl_groups={:08x}}}", Get<uint32_t>(b, 4),
                       Get<uint32_t>(b, 8));
  }
  std::span<const uint8_t> rest(d.data() + 2, d.size() - 2);
  return fmt::format("{{sa_family={}, sa_data={}}}", fam,
                     QuoteString(rest, rest.size(), false, opts));
}

std::string Stat(const CapturedBuffer* b) {
  uint32_t mode = Get<uint32_t>(b, 24);
  uint32_t type = mode & 0170000;
  if (type == 020000 || type == 060000)
    return fmt::format("{{st_mode={}, st_rdev={}, ...}}", StMode(mode),
                       Makedev(Get<uint64_t>(b, 40)));
  return fmt::format("{{st_mode={}, st_size={}, ...}}", StMode(mode), Get<int64_t>(b, 48));
}

std::string Statx(const CapturedBuffer* b) {
  return fmt::format("{{stx_mask={}, stx_attributes={}, stx_mode={}, stx_size={}, ...}}",
                     FormatFlags(ValueSet::kStatxMask, Get<uint32_t>(b, 0)),
                     Get<uint64_t>(b, 8) == 0 ? "0" : fmt::format("{:#x}", Get<uint64_t>(b, 8)),
                     StMode(Get<uint16_t>(b, 28)), Get<uint64_t>(b, 40));
}

// A file system's magic number by its name in linux/magic.h, as strace prints it.
std::string FsMagic(uint64_t m) {
  static constexpr std::pair<uint32_t, const char*> kMagic[] = {
      {0xef53, "EXT2_SUPER_MAGIC"},
      {0x01021994, "TMPFS_MAGIC"},
      {0x9fa0, "PROC_SUPER_MAGIC"},
      {0x62656572, "SYSFS_MAGIC"},
      {0x9123683e, "BTRFS_SUPER_MAGIC"},
      {0x58465342, "XFS_SUPER_MAGIC"},
      {0x794c7630, "OVERLAYFS_SUPER_MAGIC"},
      {0x63677270, "CGROUP2_SUPER_MAGIC"},
      {0x27e0eb, "CGROUP_SUPER_MAGIC"},
      {0x1cd1, "DEVPTS_SUPER_MAGIC"},
      {0x6969, "NFS_SUPER_MAGIC"},
      {0x73717368, "SQUASHFS_MAGIC"},
      {0x65735546, "FUSE_SUPER_MAGIC"},
      {0x64626720, "DEBUGFS_MAGIC"},
      {0x74726163, "TRACEFS_MAGIC"},
      {0xcafe4a11, "BPF_FS_MAGIC"},
      {0x01021997, "V9FS_MAGIC"},
      {0x858458f6, "RAMFS_MAGIC"},
      {0x73636673, "SECURITYFS_MAGIC"},
      {0x4d44, "MSDOS_SUPER_MAGIC"},
      {0x2011bab0, "EXFAT_SUPER_MAGIC"},
      {0x5346544e, "NTFS_SB_MAGIC"},
      {0x9660, "ISOFS_SUPER_MAGIC"},
      {0xf2f52010, "F2FS_SUPER_MAGIC"},
      {0x2fc12fc1, "ZFS_SUPER_MAGIC"},
      {0x6e736673, "NSFS_MAGIC"},
      {0x50495045, "PIPEFS_MAGIC"},
      {0x534f434b, "SOCKFS_MAGIC"},
      {0x42494e4d, "BINFMTFS_MAGIC"},
      {0x19800202, "MQUEUE_MAGIC"},
      {0x958458f6, "HUGETLBFS_MAGIC"},
      {0x9fa2, "USBDEVICE_SUPER_MAGIC"},
      {0x187, "AUTOFS_SUPER_MAGIC"},
      {0xde5e81e4, "EFIVARFS_MAGIC"},
      {0x6165676c, "PSTOREFS_MAGIC"},
      {0x62646576, "BDEVFS_MAGIC"},
      {0x43415d53, "SMB2_SUPER_MAGIC"},
      {0xff534d42, "CIFS_SUPER_MAGIC"},
      {0x5a3c69f0, "AAFS_MAGIC"},
      {0x13661366, "BALLOON_KVM_MAGIC"},
  };
  for (const auto& [v, name] : kMagic)
    if (v == static_cast<uint32_t>(m)) return name;
  return fmt::format("{:#x}", m);
}

// statfs's f_flags (ST_* of sys/statvfs.h).
std::string StFlags(uint64_t f) {
  static constexpr std::pair<uint64_t, const char*> kFlags[] = {
      {1, "ST_RDONLY"},      {2, "ST_NOSUID"},         {4, "ST_NODEV"},
      {8, "ST_NOEXEC"},      {16, "ST_SYNCHRONOUS"},   {32, "ST_VALID"},
      {64, "ST_MANDLOCK"},   {1024, "ST_NOATIME"},     {2048, "ST_NODIRATIME"},
      {4096, "ST_RELATIME"}, {8192, "ST_NOSYMFOLLOW"},
  };
  std::string out;
  for (const auto& [bit, name] : kFlags)
    if (f & bit) {
      out += (out.empty() ? "" : "|") + std::string(name);
      f &= ~bit;
    }
  if (f) out += (out.empty() ? "" : "|") + fmt::format("{:#x}", f);
  return out.empty() ? "0" : out;
}

std::string Statfs(const CapturedBuffer* b) {
  return fmt::format(
      "{{f_type={}, f_bsize={}, f_blocks={}, f_bfree={}, f_bavail={}, f_files={}, "
      "f_ffree={}, f_fsid={{val=[{:#x}, {:#x}]}}, f_namelen={}, f_frsize={}, f_flags={}}}",
      FsMagic(Get<uint64_t>(b, 0)), Get<int64_t>(b, 8), Get<uint64_t>(b, 16), Get<uint64_t>(b, 24),
      Get<uint64_t>(b, 32), Get<uint64_t>(b, 40), Get<uint64_t>(b, 48), Get<uint32_t>(b, 56),
      Get<uint32_t>(b, 60), Get<int64_t>(b, 64), Get<int64_t>(b, 72),
      StFlags(Get<uint64_t>(b, 80)));
}

std::string Utsname(const CapturedBuffer* b, const FormatOptions& opts) {
  auto field = [&](size_t off) {
    const uint8_t* p = b->bytes.data() + off;
    size_t n = strnlen(reinterpret_cast<const char*>(p), 65);
    return QuoteString({p, n}, opts.string_limit, false, opts);
  };
  return fmt::format("{{sysname={}, nodename={}, ...}}", field(0), field(65));
}

std::string Sysinfo(const CapturedBuffer* b) {
  return fmt::format(
      "{{uptime={}, loads=[{}, {}, {}], totalram={}, freeram={}, sharedram={}, bufferram={}, "
      "totalswap={}, freeswap={}, procs={}, totalhigh={}, freehigh={}, mem_unit={}}}",
      Get<int64_t>(b, 0), Get<uint64_t>(b, 8), Get<uint64_t>(b, 16), Get<uint64_t>(b, 24),
      Get<uint64_t>(b, 32), Get<uint64_t>(b, 40), Get<uint64_t>(b, 48), Get<uint64_t>(b, 56),
      Get<uint64_t>(b, 64), Get<uint64_t>(b, 72), Get<uint16_t>(b, 80), Get<uint64_t>(b, 88),
      Get<uint64_t>(b, 96), Get<uint32_t>(b, 104));
}

std::string Sigaction(const CapturedBuffer* b) {
  uint64_t handler = Get<uint64_t>(b, 0), flags = Get<uint64_t>(b, 8);
  uint64_t restorer = Get<uint64_t>(b, 16);
  std::string h = handler == 0   ? "SIG_DFL"
                  : handler == 1 ? "SIG_IGN"
                                 : fmt::format("{:#x}", handler);
  CapturedBuffer mask;
  mask.bytes.assign(b->bytes.begin() + 24, b->bytes.begin() + 32);
  std::string out = fmt::format("{{sa_handler={}, sa_mask={}, sa_flags={}", h, Sigset(&mask),
                                FormatFlags(ValueSet::kSaFlags, flags));
  if (flags & 0x04000000) out += fmt::format(", sa_restorer={}", Addr(restorer));
  return out + "}";
}

std::string WaitStatus(int32_t s) {
  if ((s & 0x7f) == 0)
    return fmt::format("[{{WIFEXITED(s) && WEXITSTATUS(s) == {}}}]", (s >> 8) & 0xff);
  if ((s & 0xff) == 0x7f)
    return fmt::format("[{{WIFSTOPPED(s) && WSTOPSIG(s) == {}}}]", SignalName((s >> 8) & 0xff));
  if (s == 0xffff) return "[{WIFCONTINUED(s)}]";
  return fmt::format("[{{WIFSIGNALED(s) && WTERMSIG(s) == {}{}}}]", SignalName(s & 0x7f),
                     (s & 0x80) ? " && WCOREDUMP(s)" : "");
}

std::string Pollfds(const CapturedBuffer* b, bool revents_only, size_t limit) {
  std::string out = "[";
  size_t n = b->bytes.size() / 8;
  bool first = true;
  size_t shown = 0;
  for (size_t k = 0; k < n; ++k) {
    int32_t fd = Get<int32_t>(b, k * 8);
    uint16_t events = Get<uint16_t>(b, k * 8 + 4), revents = Get<uint16_t>(b, k * 8 + 6);
    if (revents_only && revents == 0) continue;
    if (!first) out += ", ";
    first = false;
    if (++shown > limit) {
      out += "...";
      break;
    }
    if (revents_only)
      out += fmt::format("{{fd={}, revents={}}}", fd, FormatFlags(ValueSet::kPollEvents, revents));
    else
      out += fmt::format("{{fd={}, events={}}}", fd, FormatFlags(ValueSet::kPollEvents, events));
  }
  return out + "]";
}

std::string EpollEvent(const CapturedBuffer* b, size_t off) {
  uint32_t events = Get<uint32_t>(b, off);
  uint64_t data = Get<uint64_t>(b, off + 4);
  return fmt::format("{{events={}, data={{u32={}, u64={}}}}}",
                     FormatFlags(ValueSet::kEpollEvents, events), static_cast<uint32_t>(data),
                     data);
}

std::string Iovecs(const ArgContext& ctx, int arg, int base, BufferDir dir,
                   const CapturedBuffer* array, bool filled_by_kernel) {
  size_t n = array->bytes.size() / 16;
  std::string out = "[";
  for (size_t k = 0; k < n; ++k) {
    if (k > 0) out += ", ";
    if (k >= ctx.opts.string_limit) {
      out += "...";
      break;
    }
    uint64_t base_addr = Get<uint64_t>(array, k * 16), len = Get<uint64_t>(array, k * 16 + 8);
    const CapturedBuffer* data = ctx.Find(arg, base + 1 + static_cast<int>(k), dir);
    std::string text;
    if (data != nullptr && !data->not_captured)
      text = QuoteString(data->bytes, ctx.opts.string_limit, data->truncated, ctx.opts);
    else if (filled_by_kernel && data == nullptr)
      text = "\"\"";
    else
      text = Addr(base_addr);
    out += fmt::format("{{iov_base={}, iov_len={}}}", text, len);
  }
  return out + "]";
}

std::string Msghdr(const ArgContext& ctx, int arg, BufferDir dir, const CapturedBuffer* hdr) {
  uint64_t name = Get<uint64_t>(hdr, 0), iov = Get<uint64_t>(hdr, 16),
           iovlen = Get<uint64_t>(hdr, 24);
  uint64_t control = Get<uint64_t>(hdr, 32), controllen = Get<uint64_t>(hdr, 40);
  uint32_t namelen = Get<uint32_t>(hdr, 8);
  int32_t flags = Get<int32_t>(hdr, 48);
  std::string name_text = "NULL";
  if (name != 0) {
    const CapturedBuffer* nb = ctx.Find(arg, 1, dir);
    name_text = Has(nb, 2) ? Sockaddr(nb, ctx.opts) : Addr(name);
  }
  std::string iov_text = "NULL";
  if (iov != 0) {
    const CapturedBuffer* ab = ctx.Find(arg, 3, dir);
    iov_text = Has(ab, 16) ? Iovecs(ctx, arg, 3, dir, ab, dir == BufferDir::kOut) : Addr(iov);
  }
  std::string out = fmt::format("{{msg_name={}, msg_namelen={}, msg_iov={}, msg_iovlen={}, ",
                                name_text, namelen, iov_text, iovlen);
  if (control != 0 && controllen > 0) out += fmt::format("msg_control={:#x}, ", control);
  out += fmt::format("msg_controllen={}, msg_flags={}}}", controllen,
                     FormatFlags(ValueSet::kMsgFlags, static_cast<uint32_t>(flags)));
  return out;
}

std::string StrArray(const ArgContext& ctx, int arg, const CapturedBuffer* array) {
  size_t n = array->bytes.size() / 8;
  std::string out = "[";
  for (size_t k = 0; k < n; ++k) {
    if (k > 0) out += ", ";
    if (k >= ctx.opts.string_limit) {
      out += "...";
      break;
    }
    const CapturedBuffer* s = ctx.Find(arg, 1 + static_cast<int>(k), BufferDir::kIn);
    if (s != nullptr && !s->not_captured)
      out += QuoteString(s->bytes, ctx.opts.string_limit, s->truncated, ctx.opts);
    else
      out += Addr(Get<uint64_t>(array, k * 8));
  }
  return out + "]";
}

std::string FdSet(const CapturedBuffer* b, int nfds) {
  std::string out = "[";
  bool first = true;
  for (int fd = 0; fd < nfds && static_cast<size_t>(fd / 8) < b->bytes.size(); ++fd) {
    if (!((b->bytes[fd / 8] >> (fd % 8)) & 1)) continue;
    if (!first) out += ' ';
    first = false;
    out += std::to_string(fd);
  }
  return out + "]";
}

std::string CloneArgs(const CapturedBuffer* b) {
  uint64_t flags = Get<uint64_t>(b, 0);
  std::string out = fmt::format("{{flags={}", FormatFlags(ValueSet::kCloneFlags, flags));
  if (flags & 0x1000) out += fmt::format(", pidfd={}", Addr(Get<uint64_t>(b, 8)));
  if (flags & (0x1000000 | 0x200000))
    out += fmt::format(", child_tid={}", Addr(Get<uint64_t>(b, 16)));
  if (flags & 0x100000) out += fmt::format(", parent_tid={}", Addr(Get<uint64_t>(b, 24)));
  out += fmt::format(", exit_signal={}", SignalName(static_cast<int>(Get<uint64_t>(b, 32))));
  out += fmt::format(", stack={}, stack_size={}", Addr(Get<uint64_t>(b, 40)),
                     Get<uint64_t>(b, 48) ? fmt::format("{:#x}", Get<uint64_t>(b, 48)) : "0");
  if (flags & 0x80000) out += fmt::format(", tls={}", Addr(Get<uint64_t>(b, 56)));
  return out + "}";
}

size_t CountDirents(const CapturedBuffer* b) {
  size_t n = 0;
  for (size_t off = 0; off + 18 < b->bytes.size() + 1;) {
    uint16_t reclen = Get<uint16_t>(b, off + 16);
    if (reclen == 0) break;
    ++n;
    off += reclen;
  }
  return n;
}

}  // namespace

const CapturedBuffer* ArgContext::Find(int arg, int sub, BufferDir dir) const {
  for (const CapturedBuffer& b : ev.buffers)
    if (b.arg == arg && b.sub == sub && b.dir == dir) return &b;
  return nullptr;
}

const CapturedBuffer* ArgContext::Latest(int arg, int sub) const {
  const CapturedBuffer* out = Find(arg, sub, BufferDir::kOut);
  return out ? out : Find(arg, sub, BufferDir::kIn);
}

std::string FormatMode(uint32_t mode) {
  std::string type = FileType(mode);
  if (type.empty()) return fmt::format("{:#03o}", mode);
  return fmt::format("{}|{:#03o}", type, mode & 07777);
}

std::string SigreturnMask(const ArgContext& ctx) {
  const CapturedBuffer* b = ctx.Find(kStackArg, 0, BufferDir::kIn);
  if (!b || b->not_captured || !Has(b, 8)) return {};
  return fmt::format("{{mask={}}}", Sigset(b));
}

std::optional<std::string> FormatMemoryArg(const ArgContext& ctx, int i) {
  const SyscallEvent& ev = ctx.ev;
  const ArgSpec& a = ctx.sig.args[i];
  const FormatOptions& opts = ctx.opts;
  uint64_t addr = ev.args[i];
  if (addr == 0) return std::string("NULL");
  // What the kernel wrote is only meaningful when the call succeeded; strace shows the address.
  // A sleep writes its time left only when a signal cut it short, and a sleep to an absolute
  // time (TIMER_ABSTIME) not even then.
  if (a.dir == ArgDir::kOut && OutOnlyWhenInterrupted(ev.nr)) {
    bool absolute = ev.nr == sysno::clock_nanosleep && (ev.args[1] & 1);
    if (!InterruptedSleep(ev.ret) || absolute) return Addr(addr);
  } else if (a.dir == ArgDir::kOut && ctx.Failed()) {
    return Addr(addr);
  }
  BufferDir dir = a.dir == ArgDir::kIn ? BufferDir::kIn : BufferDir::kOut;
  const CapturedBuffer* b = a.dir == ArgDir::kInOut ? ctx.Latest(i, 0) : ctx.Find(i, 0, dir);
  if (a.dir == ArgDir::kInOut && ctx.Failed()) b = ctx.Find(i, 0, BufferDir::kIn);
  // select's sets and the select and poll timeouts print as they went in; what came out is
  // the return's suffix (ReturnSuffix).
  if (a.dir == ArgDir::kInOut && IsSelectOrPoll(ctx.sig.name) && a.type != ArgType::kPollfd)
    b = ctx.Find(i, 0, BufferDir::kIn);
  if (b == nullptr || b->not_captured) return Addr(addr);
  switch (a.type) {
    case ArgType::kPath:
      return QuoteString(b->bytes, b->bytes.size(), b->truncated, opts);
    case ArgType::kString:
    case ArgType::kBuf:
      return QuoteString(b->bytes, opts.string_limit, b->truncated, opts);
    case ArgType::kHexBuf: {
      std::string out = "\"";
      size_t n = std::min(b->bytes.size(), opts.string_limit);
      for (size_t k = 0; k < n; ++k) out += fmt::format("\\x{:02x}", b->bytes[k]);
      out += '"';
      if (b->truncated || b->bytes.size() > n) out += "...";
      return out;
    }
    case ArgType::kStrArray:
      return StrArray(ctx, i, b);
    case ArgType::kEnvArray: {
      size_t n = b->bytes.size() / 8;
      return fmt::format("{:#x} /* {} var{} */", addr, n, n == 1 ? "" : "s");
    }
    case ArgType::kIovec:
      return Iovecs(ctx, i, 0, dir, b, dir == BufferDir::kOut);
    case ArgType::kMsghdr:
      if (!Has(b, 56)) return Addr(addr);
      return Msghdr(ctx, i, dir, b);
    case ArgType::kSockaddr:
      return Sockaddr(b, opts);
    case ArgType::kSocklen: {
      const CapturedBuffer* in = ctx.Find(i, 0, BufferDir::kIn);
      const CapturedBuffer* out = ctx.Find(i, 0, BufferDir::kOut);
      if (Has(in, 4) && Has(out, 4) && Get<uint32_t>(in, 0) != Get<uint32_t>(out, 0))
        return fmt::format("[{} => {}]", Get<uint32_t>(in, 0), Get<uint32_t>(out, 0));
      if (!Has(b, 4)) return Addr(addr);
      return fmt::format("[{}]", Get<uint32_t>(b, 0));
    }
    case ArgType::kStat:
      return Has(b, 144) ? Stat(b) : Addr(addr);
    case ArgType::kStatx:
      return Has(b, 144) ? Statx(b) : Addr(addr);
    case ArgType::kStatfs:
      return Has(b, 88) ? Statfs(b) : Addr(addr);
    case ArgType::kTimespec:
      return Has(b, 16) ? Timespec(b, 0, false) : Addr(addr);
    case ArgType::kTimeval:
      return Has(b, 16) ? Timespec(b, 0, true) : Addr(addr);
    case ArgType::kTimespec2:
      return Has(b, 32) ? "[" + TimespecUtime(b, 0) + ", " + TimespecUtime(b, 16) + "]"
                        : Addr(addr);
    case ArgType::kTimezone:
      return Has(b, 8) ? fmt::format("{{tz_minuteswest={}, tz_dsttime={}}}", Get<int32_t>(b, 0),
                                     Get<int32_t>(b, 4))
                       : Addr(addr);
    case ArgType::kItimerspec:
      return Has(b, 32) ? fmt::format("{{it_interval={}, it_value={}}}", Timespec(b, 0, false),
                                      Timespec(b, 16, false))
                        : Addr(addr);
    case ArgType::kItimerval:
      return Has(b, 32) ? fmt::format("{{it_interval={}, it_value={}}}", Timespec(b, 0, true),
                                      Timespec(b, 16, true))
                        : Addr(addr);
    case ArgType::kPollfd: {
      const CapturedBuffer* in = ctx.Find(i, 0, BufferDir::kIn);
      return in ? Pollfds(in, false, opts.string_limit) : Addr(addr);
    }
    case ArgType::kEpollEvent: {
      if (a.len != LenKind::kRet) return Has(b, 12) ? EpollEvent(b, 0) : Addr(addr);
      std::string out = "[";
      for (size_t off = 0; off + 12 <= b->bytes.size(); off += 12) {
        if (off) out += ", ";
        out += EpollEvent(b, off);
      }
      return out + "]";
    }
    case ArgType::kRlimit:
      return Has(b, 16) ? fmt::format("{{rlim_cur={}, rlim_max={}}}", Rlim(Get<uint64_t>(b, 0)),
                                      Rlim(Get<uint64_t>(b, 8)))
                        : Addr(addr);
    case ArgType::kRusage:
      return Has(b, 32) ? fmt::format("{{ru_utime={}, ru_stime={}, ...}}", Timespec(b, 0, true),
                                      Timespec(b, 16, true))
                        : Addr(addr);
    case ArgType::kUtsname:
      return Has(b, 130) ? Utsname(b, opts) : Addr(addr);
    case ArgType::kSysinfo:
      return Has(b, 108) ? Sysinfo(b) : Addr(addr);
    case ArgType::kSigaction:
      return Has(b, 32) ? Sigaction(b) : Addr(addr);
    case ArgType::kSiginfo:
      return Has(b, kSiginfoBytes) ? FormatSiginfo(Get<int32_t>(b, 0), b->View()) : Addr(addr);
    case ArgType::kStackT: {
      if (!Has(b, 24)) return Addr(addr);
      uint32_t f = Get<uint32_t>(b, 8);
      std::string flags;
      for (auto [bit, name] : {std::pair<uint32_t, const char*>{1, "SS_ONSTACK"},
                               {2, "SS_DISABLE"},
                               {1u << 31, "SS_AUTODISARM"}})
        if (f & bit) {
          flags += (flags.empty() ? "" : "|") + std::string(name);
          f &= ~bit;
        }
      if (f) flags += (flags.empty() ? "" : "|") + fmt::format("{:#x}", f);
      return fmt::format("{{ss_sp={}, ss_flags={}, ss_size={}}}", Addr(Get<uint64_t>(b, 0)),
                         flags.empty() ? "0" : flags, Get<uint64_t>(b, 16));
    }
    case ArgType::kSigset:
      return Has(b, 1) ? Sigset(b) : Addr(addr);
    case ArgType::kFdPair:
      return Has(b, 8) ? fmt::format("[{}, {}]", Get<int32_t>(b, 0), Get<int32_t>(b, 4))
                       : Addr(addr);
    case ArgType::kIntPtr:
      return Has(b, 4) ? fmt::format("[{}]", Get<int32_t>(b, 0)) : Addr(addr);
    case ArgType::kUlongPtr:
      return Has(b, 8) ? fmt::format("[{}]", Get<uint64_t>(b, 0)) : Addr(addr);
    case ArgType::kWaitStatus:
      // wait4 with WNOHANG and no child ready returns 0 and writes nothing.
      if (ev.ret == 0) return Addr(addr);
      return Has(b, 4) ? WaitStatus(Get<int32_t>(b, 0)) : Addr(addr);
    case ArgType::kDirents:
      return fmt::format("{:#x} /* {} entries */", addr, CountDirents(b));
    case ArgType::kFdSet:
      return FdSet(b, static_cast<int32_t>(ev.args[0]));
    case ArgType::kCloneArgs: {
      if (!Has(b, 64)) return Addr(addr);
      std::string out = CloneArgs(b);
      // What the call wrote through the struct's pointers, in the parent (strace's "=> {...}").
      uint64_t flags = Get<uint64_t>(b, 0);
      std::string wrote;
      auto put = [&](uint64_t flag, int sub, const char* name) {
        const CapturedBuffer* p = ctx.Find(i, sub, BufferDir::kOut);
        if ((flags & flag) && p && Has(p, 4))
          wrote += fmt::format("{}{}=[{}]", wrote.empty() ? "" : ", ", name, Get<int32_t>(p, 0));
      };
      if (ev.ret > 0) {
        put(0x1000, 2, "pidfd");         // CLONE_PIDFD
        put(0x100000, 1, "parent_tid");  // CLONE_PARENT_SETTID
      }
      return wrote.empty() ? out : out + " => {" + wrote + "}";
    }
    case ArgType::kSigmaskArg: {
      if (!Has(b, 16)) return Addr(addr);
      uint64_t set = Get<uint64_t>(b, 0);
      const CapturedBuffer* p = ctx.Find(i, 1, BufferDir::kIn);
      std::string mask = set == 0                             ? std::string("NULL")
                         : p && !p->not_captured && Has(p, 1) ? Sigset(p)
                                                              : Addr(set);
      return fmt::format("{{sigmask={}, sigsetsize={}}}", mask, Get<uint64_t>(b, 8));
    }
    case ArgType::kOpenHow:
      return Has(b, 24)
                 ? fmt::format(
                       "{{flags={}, mode={}, resolve={}}}",
                       FormatFlags(ValueSet::kOpenFlags, Get<uint64_t>(b, 0)),
                       FormatMode(static_cast<uint32_t>(Get<uint64_t>(b, 8))),
                       Get<uint64_t>(b, 16) == 0 ? "0" : fmt::format("{:#x}", Get<uint64_t>(b, 16)))
                 : Addr(addr);
    default:
      return Addr(addr);
  }
}

std::string ReturnSuffix(const ArgContext& ctx) {
  std::string_view name = ctx.sig.name;
  if (!IsSelectOrPoll(name)) return {};
  if (ctx.ev.ret == 0) return "Timeout";
  std::string out;
  if (name == "poll" || name == "ppoll") {
    const CapturedBuffer* fds = ctx.Find(0, 0, BufferDir::kOut);
    if (fds && !fds->not_captured) out = Pollfds(fds, true, ctx.opts.string_limit);
  } else {
    // The ready descriptors of each set: "in [5], out [1 2]".
    static constexpr const char* kSets[] = {"in", "out", "except"};
    for (int k = 0; k < 3; ++k) {
      const CapturedBuffer* set = ctx.Find(k + 1, 0, BufferDir::kOut);
      if (!set || set->not_captured) continue;
      std::string fds = FdSet(set, static_cast<int32_t>(ctx.ev.args[0]));
      if (fds == "[]") continue;
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ", kSets[k], fds);
    }
  }
  // What was left of the timeout, which the kernel wrote back.
  int t = name == "ppoll" ? 2 : name == "poll" ? -1 : 4;
  const CapturedBuffer* left = t >= 0 ? ctx.Find(t, 0, BufferDir::kOut) : nullptr;
  if (left && Has(left, 16))
    out += fmt::format("{}left {}", out.empty() ? "" : ", ", Timespec(left, 0, name == "select"));
  return out;
}

std::string Makedev(uint64_t dev) {
  uint64_t major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfffull);
  uint64_t minor = (dev & 0xff) | ((dev >> 12) & ~0xffull);
  auto hex = [](uint64_t v) { return v == 0 ? std::string("0") : fmt::format("{:#x}", v); };
  return fmt::format("makedev({}, {})", hex(major), hex(minor));
}

}  // namespace fay::decode
