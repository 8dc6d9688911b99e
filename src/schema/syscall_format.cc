#include "schema/syscall_format.h"

#include "schema/syscall_capture.h"

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <span>

#include "schema/decode/struct_format.h"
#include "schema/syscall_table.h"
#include "schema/syscall_values.h"

namespace fay {
namespace {

using decode::ArgContext;

constexpr uint64_t kOCreat = 0100;
constexpr uint64_t kOTmpfileBit = 020000000;

bool IsPrint(uint8_t c) {
  return c >= 0x20 && c <= 0x7e;
}

std::string Scalar(const ArgSpec& a, uint64_t v) {
  switch (a.type) {
    case ArgType::kInt:
    case ArgType::kFd:
      return std::to_string(static_cast<int32_t>(v));
    case ArgType::kLong:
      return std::to_string(static_cast<int64_t>(v));
    case ArgType::kUint:
      return std::to_string(static_cast<uint32_t>(v));
    case ArgType::kUlong:
      return std::to_string(v);
    case ArgType::kHex:
      return v == 0 ? "0" : fmt::format("{:#x}", v);
    case ArgType::kPtr:
      return v == 0 ? "NULL" : fmt::format("{:#x}", v);
    case ArgType::kDirfd:
      return static_cast<int32_t>(v) == -100 ? "AT_FDCWD" : std::to_string(static_cast<int32_t>(v));
    case ArgType::kFlags:
      // Flag arguments are C ints (clone's are a long): stray upper register bits are not
      // part of the value.
      return FormatFlags(a.set, a.set == ValueSet::kCloneFlags ? v : static_cast<uint32_t>(v));
    case ArgType::kEnum:
      return FormatEnum(a.set, v);
    case ArgType::kOctalMode:
      return fmt::format("{:#03o}", static_cast<uint32_t>(v));
    case ArgType::kMode:
    case ArgType::kOpenMode:
      return decode::FormatMode(static_cast<uint32_t>(v));
    case ArgType::kSignal:
      return SignalName(static_cast<int32_t>(v));
    case ArgType::kUid:
      return static_cast<int32_t>(v) == -1 ? "-1" : std::to_string(static_cast<uint32_t>(v));
    default:
      return v == 0 ? "NULL" : fmt::format("{:#x}", v);
  }
}

// The socket protocol is named from the domain: IPPROTO_* only means something for IP.
std::string SockProto(const SyscallEvent& ev) {
  uint32_t domain = static_cast<uint32_t>(ev.args[0]);
  if (domain == 2 || domain == 10) return FormatEnum(ValueSet::kSockProto, ev.args[2]);
  return std::to_string(static_cast<int32_t>(ev.args[2]));
}

std::string FutexOp(uint64_t op) {
  uint32_t v = static_cast<uint32_t>(op);
  std::string name = FormatEnum(ValueSet::kFutexOp, v & 0x7f);
  if (v & 128) name += "_PRIVATE";
  if (v & 256) name += "|FUTEX_CLOCK_REALTIME";
  if (v & ~0x1ffu) name += fmt::format("|{:#x}", v & ~0x1ffu);
  return name;
}

std::string FormatFutex(const SyscallEvent& ev) {
  uint32_t cmd = static_cast<uint32_t>(ev.args[1]) & 0x7f;
  auto ptr = [&](int i) { return Scalar(ArgSpec{"", ArgType::kPtr}, ev.args[i]); };
  auto val = [&](int i) { return std::to_string(static_cast<int32_t>(ev.args[i])); };
  auto bitset = [&](int i) {
    return static_cast<uint32_t>(ev.args[i]) == 0xffffffffu
               ? std::string("FUTEX_BITSET_MATCH_ANY")
               : fmt::format("{:#x}", static_cast<uint32_t>(ev.args[i]));
  };
  std::string out = fmt::format("{}, {}, ", ptr(0), FutexOp(ev.args[1]));
  switch (cmd) {
    case 0:
      return out + val(2) + ", " + ptr(3);  // WAIT
    case 1:
    case 7:
      return cmd == 7 ? fmt::format("{}, {}", ptr(0), FutexOp(ev.args[1])) : out + val(2);  // WAKE
    case 3:
      return out + val(2) + ", " + val(3) + ", " + ptr(4);  // REQUEUE
    case 4:
    case 12:
      return out + val(2) + ", " + val(3) + ", " + ptr(4) + ", " + val(5);  // CMP_REQUEUE
    case 9:
      return out + val(2) + ", " + ptr(3) + ", " + bitset(5);  // WAIT_BITSET
    case 10:
      return out + val(2) + ", " + bitset(5);  // WAKE_BITSET
    case 6:
    case 8:
    case 13:
      return fmt::format("{}, {}, {}", ptr(0), FutexOp(ev.args[1]), ptr(3));
    default:
      return out + val(2) + ", " + ptr(3) + ", " + ptr(4) + ", " + fmt::format("{:#x}", ev.args[5]);
  }
}

std::string FormatClone(const SyscallEvent& ev) {
  uint64_t flags = ev.args[0];
  std::string f;
  uint64_t named = flags & ~0xffull;
  if (named) f = FormatFlags(ValueSet::kCloneFlags, named);
  if (flags & 0xff) {
    if (!f.empty()) f += '|';
    f += SignalName(static_cast<int>(flags & 0xff));
  }
  if (f.empty()) f = "0";
  auto ptr = [](uint64_t v) { return v == 0 ? std::string("NULL") : fmt::format("{:#x}", v); };
  std::string out = "child_stack=" + ptr(ev.args[1]) + ", flags=" + f;
  if (flags & 0x100000) out += ", parent_tid=" + ptr(ev.args[2]);  // CLONE_PARENT_SETTID
  if (flags & 0x80000) out += ", tls=" + ptr(ev.args[4]);          // CLONE_SETTLS
  if (flags & (0x1000000 | 0x200000)) out += ", child_tidptr=" + ptr(ev.args[3]);
  return out;
}

// struct flock as strace prints it: {l_type=F_RDLCK, l_whence=SEEK_SET, l_start=0, l_len=0}.
std::string FormatFlock(const CapturedBuffer& b, bool with_pid) {
  if (b.bytes.size() < 32) return fmt::format("{:#x}", b.addr);
  int16_t type, whence;
  int64_t start, len;
  int32_t pid;
  std::memcpy(&type, b.bytes.data(), 2);
  std::memcpy(&whence, b.bytes.data() + 2, 2);
  std::memcpy(&start, b.bytes.data() + 8, 8);
  std::memcpy(&len, b.bytes.data() + 16, 8);
  std::memcpy(&pid, b.bytes.data() + 24, 4);
  static constexpr const char* kTypes[] = {"F_RDLCK", "F_WRLCK", "F_UNLCK"};
  static constexpr const char* kWhence[] = {"SEEK_SET", "SEEK_CUR", "SEEK_END"};
  std::string t = type >= 0 && type <= 2 ? kTypes[type] : fmt::format("{:#x} /* F_??? */", type);
  std::string w =
      whence >= 0 && whence <= 2 ? kWhence[whence] : fmt::format("{:#x} /* SEEK_??? */", whence);
  std::string out = fmt::format("{{l_type={}, l_whence={}, l_start={}, l_len={}", t, w, start, len);
  if (with_pid) out += fmt::format(", l_pid={}", pid);
  return out + "}";
}

// fcntl's third argument means something different per command, and some commands take none.
std::optional<std::string> FcntlArg(const decode::ArgContext& ctx, uint32_t cmd, uint64_t arg) {
  if (FcntlTakesFlock(cmd)) {
    if (arg == 0) return std::string("NULL");
    bool get = FcntlReturnsFlock(cmd);
    const CapturedBuffer* b = get ? ctx.Latest(2, 0) : ctx.Find(2, 0, BufferDir::kIn);
    if (b) return FormatFlock(*b, get && b->dir == BufferDir::kOut);
    return fmt::format("{:#x}", arg);
  }
  switch (cmd) {
    case 1:
    case 3:
    case 9:
    case 11:
    case 1025:
    case 1032:
    case 1034:
      return std::nullopt;
    case 2:
      return FormatFlags(ValueSet::kFdFlags, static_cast<uint32_t>(arg));
    case 4:
      return FormatFlags(ValueSet::kOpenFlags, static_cast<uint32_t>(arg));
    case 0:
    case 1030:
    case 8:
    case 10:
    case 1031:
      return std::to_string(static_cast<int32_t>(arg));
    default:
      return arg == 0 ? std::string("NULL") : fmt::format("{:#x}", arg);
  }
}

// Socket option names per level, as strace prints them (the common ones; others as numbers).
std::string SockoptName(uint64_t level, uint64_t opt) {
  struct Name {
    uint32_t level, opt;
    const char* name;
  };
  static constexpr Name kNames[] = {
      {1, 1, "SO_DEBUG"},
      {1, 2, "SO_REUSEADDR"},
      {1, 3, "SO_TYPE"},
      {1, 4, "SO_ERROR"},
      {1, 5, "SO_DONTROUTE"},
      {1, 6, "SO_BROADCAST"},
      {1, 7, "SO_SNDBUF"},
      {1, 8, "SO_RCVBUF"},
      {1, 9, "SO_KEEPALIVE"},
      {1, 10, "SO_OOBINLINE"},
      {1, 11, "SO_NO_CHECK"},
      {1, 12, "SO_PRIORITY"},
      {1, 13, "SO_LINGER"},
      {1, 15, "SO_REUSEPORT"},
      {1, 16, "SO_PASSCRED"},
      {1, 17, "SO_PEERCRED"},
      {1, 18, "SO_RCVLOWAT"},
      {1, 19, "SO_SNDLOWAT"},
      {1, 20, "SO_RCVTIMEO_OLD"},
      {1, 21, "SO_SNDTIMEO_OLD"},
      {1, 25, "SO_BINDTODEVICE"},
      {1, 26, "SO_ATTACH_FILTER"},
      {1, 28, "SO_PEERNAME"},
      {1, 30, "SO_ACCEPTCONN"},
      {1, 31, "SO_PEERSEC"},
      {1, 32, "SO_SNDBUFFORCE"},
      {1, 33, "SO_RCVBUFFORCE"},
      {1, 34, "SO_PASSSEC"},
      {1, 36, "SO_MARK"},
      {1, 38, "SO_PROTOCOL"},
      {1, 39, "SO_DOMAIN"},
      {1, 46, "SO_BUSY_POLL"},
      {1, 49, "SO_INCOMING_CPU"},
      {1, 50, "SO_ATTACH_BPF"},
      {1, 60, "SO_ZEROCOPY"},
      {6, 1, "TCP_NODELAY"},
      {6, 2, "TCP_MAXSEG"},
      {6, 3, "TCP_CORK"},
      {6, 4, "TCP_KEEPIDLE"},
      {6, 5, "TCP_KEEPINTVL"},
      {6, 6, "TCP_KEEPCNT"},
      {6, 7, "TCP_SYNCNT"},
      {6, 8, "TCP_LINGER2"},
      {6, 9, "TCP_DEFER_ACCEPT"},
      {6, 10, "TCP_WINDOW_CLAMP"},
      {6, 11, "TCP_INFO"},
      {6, 12, "TCP_QUICKACK"},
      {6, 13, "TCP_CONGESTION"},
      {6, 18, "TCP_USER_TIMEOUT"},
      {6, 23, "TCP_FASTOPEN"},
      {6, 25, "TCP_NOTSENT_LOWAT"},
      {0, 1, "IP_TOS"},
      {0, 2, "IP_TTL"},
      {0, 3, "IP_HDRINCL"},
      {0, 4, "IP_OPTIONS"},
      {0, 8, "IP_PKTINFO"},
      {0, 10, "IP_MTU_DISCOVER"},
      {0, 11, "IP_RECVERR"},
      {0, 15, "IP_FREEBIND"},
      {0, 19, "IP_TRANSPARENT"},
      {0, 24, "IP_BIND_ADDRESS_NO_PORT"},
      {0, 33, "IP_MULTICAST_TTL"},
      {0, 34, "IP_MULTICAST_LOOP"},
      {0, 35, "IP_ADD_MEMBERSHIP"},
      {41, 16, "IPV6_UNICAST_HOPS"},
      {41, 18, "IPV6_MULTICAST_HOPS"},
      {41, 23, "IPV6_MTU_DISCOVER"},
      {41, 25, "IPV6_RECVERR"},
      {41, 26, "IPV6_V6ONLY"},
      {41, 67, "IPV6_TCLASS"},
  };
  for (const Name& n : kNames)
    if (n.level == static_cast<uint32_t>(level) && n.opt == static_cast<uint32_t>(opt))
      return n.name;
  return std::to_string(static_cast<int32_t>(opt));
}

// An option's value: an int as [N], a linger struct, a name as a string (TCP_CONGESTION,
// SO_BINDTODEVICE); otherwise the bytes.
std::optional<std::string> SockoptValue(const ArgContext& ctx, bool get) {
  const SyscallEvent& ev = ctx.ev;
  const CapturedBuffer* b = get ? ctx.Find(3, 0, BufferDir::kOut) : ctx.Find(3, 0, BufferDir::kIn);
  if (!b || b->not_captured || ctx.Failed()) return std::nullopt;
  std::span<const uint8_t> v = b->View();
  uint32_t level = static_cast<uint32_t>(ev.args[1]), opt = static_cast<uint32_t>(ev.args[2]);
  bool named = (level == 6 && opt == 13) || (level == 1 && opt == 25);
  if (named) {
    size_t n = 0;
    while (n < v.size() && v[n] != 0) ++n;
    return QuoteString(v.subspan(0, n), ctx.opts.string_limit, false, ctx.opts);
  }
  if (level == 1 && opt == 13 && v.size() == 8) {
    int32_t on, linger;
    std::memcpy(&on, v.data(), 4);
    std::memcpy(&linger, v.data() + 4, 4);
    return fmt::format("{{l_onoff={}, l_linger={}}}", on, linger);
  }
  if (v.size() == 4) {
    int32_t i;
    std::memcpy(&i, v.data(), 4);
    return fmt::format("[{}]", i);
  }
  return std::nullopt;
}

// strace names the reflink requests with their btrfs aliases first.
std::optional<std::string> IoctlArg(const ArgContext& ctx, int i) {
  const auto& a = ctx.ev.args;
  if (i == 1) {
    if (a[1] == kFiClone) return "BTRFS_IOC_CLONE or FICLONE";
    if (a[1] == kFiCloneRange) return "BTRFS_IOC_CLONE_RANGE or FICLONERANGE";
    if (a[1] == kFiDedupeRange) return "BTRFS_IOC_FILE_EXTENT_SAME or FIDEDUPERANGE";
    return FormatEnum(ValueSet::kIoctlCmd, a[1]);
  }
  if (a[1] == kFioclex || a[1] == kFionclex) return std::nullopt;           // they take no argument
  if (a[1] == kFiClone) return std::to_string(static_cast<int32_t>(a[2]));  // the source fd
  return a[2] == 0 ? std::string("NULL") : fmt::format("{:#x}", a[2]);
}

// The xattr calls' value or list: only an address when the size is 0 (a call asking how much
// room it needs) or the call failed, as strace prints it.
bool XattrBufferIsAddress(std::string_view name, const SyscallEvent& ev, int i) {
  bool list = name.size() >= 9 && name.substr(name.size() - 9) == "listxattr";
  bool get = name.size() >= 8 && name.substr(name.size() - 8) == "getxattr";
  int buf = list ? 1 : get ? 2 : -1;
  if (i != buf) return false;
  bool failed = ev.ret < 0 && ev.ret >= -4095;
  return ev.args[buf + 1] == 0 || failed;
}

std::string FormatArgs(const ArgContext& ctx) {
  const SyscallEvent& ev = ctx.ev;
  const SyscallSignature& sig = ctx.sig;
  std::string name(sig.name);
  if (name == "clone") return FormatClone(ev);
  if (name == "futex") return FormatFutex(ev);
  if (name == "rt_sigreturn") return SigreturnMask(ctx);
  bool mknod = name == "mknod" || name == "mknodat";
  std::string out;
  for (int i = 0; i < sig.nargs; ++i) {
    const ArgSpec& a = sig.args[i];
    std::optional<std::string> text;
    bool sockopt = name == "setsockopt" || name == "getsockopt";
    if (name == "ioctl" && i >= 1) {
      text = IoctlArg(ctx, i);
    } else if (sockopt && i == 2) {
      text = SockoptName(ev.args[1], ev.args[2]);
    } else if (sockopt && i == 3 && (text = SockoptValue(ctx, name == "getsockopt"))) {
    } else if (mknod && i == sig.nargs - 1) {
      // The device only for a device node, as makedev(major, minor).
      uint32_t type = static_cast<uint32_t>(ev.args[i - 1]) & 0170000;
      if (type == 0020000 || type == 0060000) text = decode::Makedev(ev.args[i]);
    } else if (XattrBufferIsAddress(name, ev, i)) {
      text = Scalar(ArgSpec{"", ArgType::kPtr}, ev.args[i]);
    } else if (a.type == ArgType::kOpenMode) {
      // open's mode only exists when the flags ask for a new file.
      int flags_arg = i - 1;
      uint64_t flags = flags_arg >= 0 ? ev.args[flags_arg] : 0;
      if (flags & (kOCreat | kOTmpfileBit)) text = Scalar(a, ev.args[i]);
    } else if (name == "fcntl" && i == 2) {
      text = FcntlArg(ctx, static_cast<uint32_t>(ev.args[1]), ev.args[2]);
    } else if (a.set == ValueSet::kSockProto) {
      text = SockProto(ev);
    } else if (a.type >= ArgType::kPath) {
      text = decode::FormatMemoryArg(ctx, i);
    } else {
      text = Scalar(a, ev.args[i]);
    }
    if (!text) continue;
    if (!out.empty()) out += ", ";
    out += *text;
  }
  return out;
}

std::string FormatReturn(const ArgContext& ctx) {
  const SyscallEvent& ev = ctx.ev;
  if ((ev.flags & kEventNoExit) || ctx.sig.ret == RetType::kNoReturn) return "?";
  int64_t ret = ev.ret;
  if (ret < 0 && ret >= -4095) {
    int err = static_cast<int>(-ret);
    std::string_view name = ErrnoName(err);
    std::string msg = ErrnoMessage(err);
    if (err >= 512 && err <= 530 && !name.empty()) return fmt::format("? {} ({})", name, msg);
    if (name.empty()) return fmt::format("-1 {} ({})", err, msg);
    return fmt::format("-1 {} ({})", name, msg);
  }
  switch (ctx.sig.ret) {
    case RetType::kHex:
      return ret == 0 ? "0" : fmt::format("{:#x}", static_cast<uint64_t>(ret));
    case RetType::kOctal:
      return fmt::format("{:#03o}", static_cast<uint64_t>(ret));
    case RetType::kFcntl: {
      uint32_t cmd = static_cast<uint32_t>(ev.args[1]);
      if (cmd == 1 && ret != 0)
        return fmt::format("{:#x} (flags {})", ret, FormatFlags(ValueSet::kFdFlags, ret));
      if (cmd == 3)
        return fmt::format("{} (flags {})", ret == 0 ? "0" : fmt::format("{:#x}", ret),
                           FormatFlags(ValueSet::kOpenFlags, ret));
      return std::to_string(ret);
    }
    default:
      break;
  }
  std::string out = std::to_string(ret);
  std::string suffix = decode::ReturnSuffix(ctx);
  if (!suffix.empty()) out += " (" + suffix + ")";
  return out;
}

bool IsDataBuffer(const SyscallSignature& sig, const CapturedBuffer& b) {
  if (b.arg >= sig.nargs) return false;
  ArgType t = sig.args[b.arg].type;
  if (t == ArgType::kBuf || t == ArgType::kHexBuf) return true;
  if (t == ArgType::kIovec) return b.sub >= 1;
  if (t == ArgType::kMsghdr) return b.sub >= 4;
  return false;
}

}  // namespace

std::string QuoteString(std::span<const uint8_t> data, size_t limit, bool more_follows,
                        const FormatOptions& opts) {
  size_t n = std::min(data.size(), limit);
  bool ellipsis = more_follows || data.size() > limit;
  bool hex = false;
  if (opts.hex_strings) {
    for (size_t i = 0; i < n; ++i) {
      uint8_t c = data[i];
      if (c > 0x7e || (c < 0x20 && (c < 9 || c > 13))) {
        hex = true;
        break;
      }
    }
  }
  std::string out = "\"";
  for (size_t i = 0; i < n; ++i) {
    uint8_t c = data[i];
    if (hex) {
      out += fmt::format("\\x{:02x}", c);
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\v':
        out += "\\v";
        continue;
      default:
        break;
    }
    if (IsPrint(c)) {
      out += static_cast<char>(c);
      continue;
    }
    // Octal with as few digits as possible, unless the next byte is an octal digit that would
    // be read as part of the escape.
    out += '\\';
    bool next_is_digit = i + 1 < n && data[i + 1] >= '0' && data[i + 1] <= '7';
    if (next_is_digit) {
      out += static_cast<char>('0' + (c >> 6));
      out += static_cast<char>('0' + ((c >> 3) & 7));
    } else if (c >> 3) {
      if (c >> 6) out += static_cast<char>('0' + (c >> 6));
      out += static_cast<char>('0' + ((c >> 3) & 7));
    }
    out += static_cast<char>('0' + (c & 7));
  }
  out += '"';
  if (ellipsis) out += "...";
  return out;
}

std::string FormatSyscall(const SyscallEvent& ev, const FormatOptions& opts) {
  const SyscallSignature& sig = Signature(ev.nr);
  ArgContext ctx{ev, sig, opts};
  std::string name = sig.name.empty() ? fmt::format("syscall_{:#x}", ev.nr) : std::string(sig.name);
  return fmt::format("{}({}) = {}", name, FormatArgs(ctx), FormatReturn(ctx));
}

std::string FormatHexDump(const SyscallEvent& ev) {
  const SyscallSignature& sig = Signature(ev.nr);
  std::string out;
  for (const CapturedBuffer& b : ev.buffers) {
    if (!IsDataBuffer(sig, b) || b.not_captured) continue;
    for (size_t off = 0; off < b.bytes.size(); off += 16) {
      std::string hex, ascii;
      for (size_t j = 0; j < 16 && off + j < b.bytes.size(); ++j) {
        uint8_t c = b.bytes[off + j];
        hex += fmt::format("{:02x} ", c);
        if (j == 7) hex += ' ';
        ascii += IsPrint(c) ? static_cast<char>(c) : '.';
      }
      out += fmt::format(" | {:05x}  {:<49} {:<16} |\n", off, hex, ascii);
    }
  }
  return out;
}

}  // namespace fay
