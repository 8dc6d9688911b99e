#include "schema/syscall_capture.h"

#include "schema/syscall_values.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace fay {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kIovecSize = 16;
constexpr uint64_t kMsghdrSize = 56;
constexpr uint64_t kSockaddrMax = 128;  // sizeof(struct sockaddr_storage)
constexpr uint64_t kSigsetMax = 128;
constexpr uint64_t kEpollEventSize = 12;  // packed on x86-64

struct Capturer {
  TraceeMemory& mem;
  uint64_t max_buffer;
  std::vector<CapturedBuffer>* out;

  uint64_t Cap() const {
    return max_buffer ? std::min(max_buffer, kHardBufferCap) : kHardBufferCap;
  }

  // Reads length bytes at addr, in chunks so an unreadable region costs no allocation.
  CapturedBuffer& Bytes(int arg, int sub, BufferDir dir, uint64_t addr, uint64_t length) {
    CapturedBuffer b;
    b.arg = static_cast<uint8_t>(arg);
    b.sub = static_cast<uint16_t>(sub);
    b.dir = dir;
    b.addr = addr;
    b.length = length;
    uint64_t want = std::min(length, Cap());
    while (b.bytes.size() < want) {
      uint64_t pos = b.bytes.size();
      uint64_t n = std::min(kChunk, want - pos);
      b.bytes.resize(pos + n);
      size_t got = mem.Read(addr + pos, b.bytes.data() + pos, n);
      b.bytes.resize(pos + got);
      if (got < n) break;
    }
    if (b.bytes.empty() && length > 0) {
      b.not_captured = true;
    } else {
      // Short of length either because of the cap or because the tail was unreadable.
      b.truncated = b.bytes.size() < length;
    }
    out->push_back(std::move(b));
    return out->back();
  }

  // A NUL-terminated string; length is strlen, the NUL is not stored. Reads stop at page
  // boundaries first so a string ending just before an unmapped page is still read.
  CapturedBuffer& String(int arg, int sub, BufferDir dir, uint64_t addr) {
    CapturedBuffer b;
    b.arg = static_cast<uint8_t>(arg);
    b.sub = static_cast<uint16_t>(sub);
    b.dir = dir;
    b.addr = addr;
    bool terminated = false;
    bool readable = true;
    std::vector<uint8_t> s;
    while (s.size() < kMaxCapturedString) {
      uint64_t at = addr + s.size();
      uint64_t n = std::min(kPage - at % kPage, kMaxCapturedString + 1 - s.size());
      size_t pos = s.size();
      s.resize(pos + n);
      size_t got = mem.Read(at, s.data() + pos, n);
      s.resize(pos + got);
      auto nul = std::find(s.begin() + static_cast<ptrdiff_t>(pos), s.end(), 0);
      if (nul != s.end()) {
        s.erase(nul, s.end());
        terminated = true;
        break;
      }
      if (got < n) {
        readable = pos + got > 0;
        break;
      }
    }
    if (!terminated && s.size() > kMaxCapturedString) s.resize(kMaxCapturedString);
    b.length = s.size();
    if (!readable) {
      b.not_captured = true;
      b.length = 0;
    } else {
      uint64_t cap = Cap();
      if (s.size() > cap) {
        s.resize(cap);
        b.truncated = true;
      }
      // An unterminated string longer than PATH_MAX is as cut as a capped one.
      if (!terminated && b.length >= kMaxCapturedString) b.truncated = true;
      b.bytes = std::move(s);
    }
    out->push_back(std::move(b));
    return out->back();
  }

  bool ReadU64(uint64_t addr, uint64_t* v) { return mem.Read(addr, v, 8) == 8; }

  // What a pointer inside a struct points to: the u64 at `at`, then `len` bytes there, as
  // element `sub` of the argument (see PointeeRules). Nothing for a NULL or unreadable pointer.
  void Pointee(int arg, int sub, BufferDir dir, uint64_t at, uint64_t len) {
    uint64_t ptr = 0;
    if (!ReadU64(at, &ptr) || ptr == 0) return;
    Bytes(arg, sub, dir, ptr, len);
  }
  bool ReadU32(uint64_t addr, uint32_t* v) { return mem.Read(addr, v, 4) == 4; }

  // iovec array (sub base) and element data (sub base + 1 + i). With limit >= 0 the elements
  // are filled in order up to limit bytes in total (what readv returned).
  void Iovecs(int arg, int base, BufferDir dir, uint64_t addr, uint64_t count, int64_t limit) {
    count = std::min(count, kMaxCapturedIovecs);
    CapturedBuffer& array = Bytes(arg, base, dir, addr, count * kIovecSize);
    if (array.bytes.size() < count * kIovecSize) return;
    std::vector<uint64_t> iov(count * 2);
    std::memcpy(iov.data(), array.bytes.data(), count * kIovecSize);
    uint64_t left = limit < 0 ? UINT64_MAX : static_cast<uint64_t>(limit);
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t base_addr = iov[2 * i], len = iov[2 * i + 1];
      uint64_t n = std::min(len, left);
      if (limit >= 0 && n == 0) break;
      // A NULL base has nothing to copy; without a buffer it prints as NULL, as strace does.
      if (base_addr == 0) continue;
      Bytes(arg, base + 1 + static_cast<int>(i), dir, base_addr, n);
      left -= n;
    }
  }

  // struct msghdr and what it points to. data_limit < 0: every iovec in full (sendmsg).
  void Msghdr(int arg, BufferDir dir, uint64_t addr, int64_t data_limit) {
    CapturedBuffer& hdr = Bytes(arg, 0, dir, addr, kMsghdrSize);
    if (hdr.bytes.size() < kMsghdrSize) return;
    uint64_t name, iov, iovlen, control, controllen;
    uint32_t namelen;
    std::memcpy(&name, hdr.bytes.data() + 0, 8);
    std::memcpy(&namelen, hdr.bytes.data() + 8, 4);
    std::memcpy(&iov, hdr.bytes.data() + 16, 8);
    std::memcpy(&iovlen, hdr.bytes.data() + 24, 8);
    std::memcpy(&control, hdr.bytes.data() + 32, 8);
    std::memcpy(&controllen, hdr.bytes.data() + 40, 8);
    if (name != 0 && namelen > 0)
      Bytes(arg, 1, dir, name, std::min<uint64_t>(namelen, kSockaddrMax));
    if (control != 0 && controllen > 0) Bytes(arg, 2, dir, control, controllen);
    if (iov != 0) Iovecs(arg, 3, dir, iov, iovlen, data_limit);
  }

  void PointerArray(int arg, BufferDir dir, uint64_t addr, bool strings) {
    std::vector<uint64_t> ptrs;
    while (ptrs.size() < kMaxCapturedArrayEntries) {
      uint64_t p;
      if (!ReadU64(addr + ptrs.size() * 8, &p)) break;
      if (p == 0) break;
      ptrs.push_back(p);
    }
    CapturedBuffer& array = Bytes(arg, 0, dir, addr, ptrs.size() * 8);
    if (array.not_captured) return;
    if (!strings) return;
    for (size_t i = 0; i < ptrs.size(); ++i) String(arg, 1 + static_cast<int>(i), dir, ptrs[i]);
  }
};

bool IsMemory(ArgType t) {
  return t >= ArgType::kPath && t < ArgType::kCount_;
}

// Length in bytes of a memory argument whose size does not depend on the return value.
uint64_t StaticLength(const ArgSpec& a, const std::array<uint64_t, 6>& args) {
  uint64_t fixed = FixedArgSize(a.type);
  if (a.len == LenKind::kFixed) return fixed;
  if (a.len != LenKind::kArg || a.len_arg < 0) return fixed;
  uint64_t n = args[a.len_arg];
  switch (a.type) {
    case ArgType::kPollfd:
      return std::min<uint64_t>(n, 1u << 16) * 8;
    case ArgType::kFdSet:
      return (std::min<uint64_t>(static_cast<uint32_t>(n), 1u << 20) + 63) / 64 * 8;
    case ArgType::kSigset:
      return std::min(n, kSigsetMax);
    case ArgType::kSockaddr:
      return std::min<uint64_t>(static_cast<uint32_t>(n), kSockaddrMax);
    case ArgType::kCloneArgs:
    case ArgType::kOpenHow:
      return std::min<uint64_t>(n, 4096);
    default:
      return n;
  }
}

void CaptureArg(Capturer& c, int i, const ArgSpec& a, const std::array<uint64_t, 6>& args,
                BufferDir dir, int64_t ret) {
  uint64_t addr = args[i];
  if (addr == 0) return;
  bool at_exit = dir == BufferDir::kOut;
  switch (a.type) {
    case ArgType::kPath:
    case ArgType::kString:
      c.String(i, 0, dir, addr);
      return;
    case ArgType::kStrArray:
    case ArgType::kEnvArray:
      c.PointerArray(i, dir, addr, true);
      return;
    case ArgType::kIovec:
      if (a.len_arg < 0) return;
      c.Iovecs(i, 0, dir, addr, args[a.len_arg], at_exit ? ret : -1);
      return;
    case ArgType::kMsghdr:
      c.Msghdr(i, dir, addr, at_exit ? ret : -1);
      return;
    default:
      break;
  }
  uint64_t length = 0;
  switch (a.len) {
    case LenKind::kRet:
      length = static_cast<uint64_t>(ret);
      if (a.type == ArgType::kEpollEvent) length *= kEpollEventSize;
      break;
    case LenKind::kArgPtr: {
      uint32_t len32 = 0;
      if (a.len_arg < 0 || args[a.len_arg] == 0 || !c.ReadU32(args[a.len_arg], &len32)) return;
      length = a.type == ArgType::kSockaddr ? std::min<uint64_t>(len32, kSockaddrMax) : len32;
      break;
    }
    default:
      length = StaticLength(a, args);
      break;
  }
  if (length == 0 && a.len != LenKind::kArg && a.len != LenKind::kRet) return;
  c.Bytes(i, 0, dir, addr, length);
}

}  // namespace

uint64_t FixedArgSize(ArgType type) {
  switch (type) {
    case ArgType::kStat:
      return 144;
    case ArgType::kStatx:
      return 256;
    case ArgType::kStatfs:
      return 120;
    case ArgType::kTimespec:
      return 16;
    case ArgType::kTimespec2:
      return 32;
    case ArgType::kTimeval:
      return 16;
    case ArgType::kTimezone:
      return 8;
    case ArgType::kItimerspec:
      return 32;
    case ArgType::kItimerval:
      return 32;
    case ArgType::kEpollEvent:
      return kEpollEventSize;
    case ArgType::kRlimit:
      return 16;
    case ArgType::kRusage:
      return 144;
    case ArgType::kUtsname:
      return 390;
    case ArgType::kSysinfo:
      return 112;
    case ArgType::kSigaction:
      return 32;
    case ArgType::kStackT:
      return 24;
    case ArgType::kSiginfo:
      return 128;
    case ArgType::kSigmaskArg:
      return 16;
    case ArgType::kFdPair:
      return 8;
    case ArgType::kIntPtr:
      return 4;
    case ArgType::kUlongPtr:
      return 8;
    case ArgType::kWaitStatus:
      return 4;
    case ArgType::kSocklen:
      return 4;
    case ArgType::kMsghdr:
      return kMsghdrSize;
    default:
      return 0;
  }
}

// fcntl's third argument is a struct flock only for the lock commands, which no per-argument spec
// can say; this is the one rule that looks at another argument's value.

std::span<const StackRule> StackRules(int nr) {
  static constexpr StackRule kSigreturn[] = {{296, 8}};  // rt_sigframe's uc.uc_sigmask
  if (nr == sysno::rt_sigreturn) return kSigreturn;
  return {};
}

void CaptureAtEntry(int nr, const std::array<uint64_t, 6>& args, TraceeMemory& mem,
                    uint64_t max_buffer, std::vector<CapturedBuffer>* out, uint64_t stack_pointer) {
  const SyscallSignature& sig = Signature(nr);
  if (!sig.decoded) return;
  Capturer c{mem, max_buffer, out};
  if (nr == sysno::fcntl && FcntlTakesFlock(args[1]) && args[2] != 0)
    c.Bytes(2, 0, BufferDir::kIn, args[2], kFlockSize);
  for (int i = 0; i < sig.nargs; ++i) {
    const ArgSpec& a = sig.args[i];
    if (!IsMemory(a.type) || a.dir == ArgDir::kOut) continue;
    CaptureArg(c, i, a, args, BufferDir::kIn, -1);
  }
  for (const PointeeRule& p : PointeeRules(nr, BufferDir::kIn))
    if (args[p.arg] != 0) c.Pointee(p.arg, p.sub, BufferDir::kIn, args[p.arg] + p.offset, p.len);
  if (stack_pointer != 0)
    for (const StackRule& r : StackRules(nr))
      c.Bytes(kStackArg, 0, BufferDir::kIn, stack_pointer + r.offset, r.len);
}

std::span<const PointeeRule> PointeeRules(int nr, BufferDir dir) {
  // pselect6's mask: { const sigset_t *ss; size_t ss_len; }. clone3's results: the pidfd and
  // the parent's tid it writes through clone_args.pidfd (offset 8) and .parent_tid (24).
  static constexpr PointeeRule kPselect[] = {{5, 1, 0, 8}};
  static constexpr PointeeRule kClone3[] = {{0, 1, 24, 4}, {0, 2, 8, 4}};
  if (nr == sysno::pselect6 && dir == BufferDir::kIn) return kPselect;
  if (nr == sysno::clone3 && dir == BufferDir::kOut) return kClone3;
  return {};
}

bool OutOnlyWhenInterrupted(int nr) {
  return nr == sysno::nanosleep || nr == sysno::clock_nanosleep;
}

bool InterruptedSleep(int64_t ret) {
  return ret == -EINTR || ret == -kERestartRestartBlock;
}

void CaptureAtExit(int nr, const std::array<uint64_t, 6>& args, int64_t ret, TraceeMemory& mem,
                   uint64_t max_buffer, std::vector<CapturedBuffer>* out) {
  if (OutOnlyWhenInterrupted(nr) ? !InterruptedSleep(ret) : ret < 0) return;
  const SyscallSignature& sig = Signature(nr);
  if (!sig.decoded) return;
  Capturer c{mem, max_buffer, out};
  if (nr == sysno::fcntl && FcntlReturnsFlock(args[1]) && args[2] != 0)
    c.Bytes(2, 0, BufferDir::kOut, args[2], kFlockSize);
  for (int i = 0; i < sig.nargs; ++i) {
    const ArgSpec& a = sig.args[i];
    if (!IsMemory(a.type) || a.dir == ArgDir::kIn) continue;
    CaptureArg(c, i, a, args, BufferDir::kOut, ret);
  }
  for (const PointeeRule& p : PointeeRules(nr, BufferDir::kOut))
    if (args[p.arg] != 0) c.Pointee(p.arg, p.sub, BufferDir::kOut, args[p.arg] + p.offset, p.len);
}

bool FcntlTakesFlock(uint64_t cmd) {
  return cmd == 5 || cmd == 6 || cmd == 7 || cmd == 36 || cmd == 37 || cmd == 38;
}
bool FcntlReturnsFlock(uint64_t cmd) {
  return cmd == 5 || cmd == 36;  // F_GETLK, F_OFD_GETLK
}

}  // namespace fay
