// Calls on live fds that move data or metadata: read/write families, getdents64, lseek, the
// sync calls, truncate/fallocate, fchmod/fchown, and the stat family (for fds and paths).
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "replay/executor.h"
#include "replay/verify.h"
#include "schema/syscall_table.h"
#include "schema/syscall_values.h"

namespace fay::replay {
namespace {

// Reads are done into scratch memory of the requested size, but no larger than this: a call
// asking for 1 GiB and getting 4 KiB must not make the replayer allocate 1 GiB.
constexpr uint64_t kMaxReadBuffer = 64ull << 20;
// A live pipe is non-blocking; a read or write that would block waits this long for the other
// end (replayed by another thread) before the call is reported as it came out.
constexpr int kPipeWaitMs = 2000;

bool Failed(int64_t ret) {
  return ret < 0 && ret >= -4095;
}

int64_t Errno(long r) {
  return r < 0 ? -errno : r;
}

template <typename F>
int64_t PipeRetry(const LiveFd& live, short events, F&& op) {
  int64_t r = op();
  if (r == -EAGAIN && live.is_pipe) {
    pollfd p{live.fd.get(), events, 0};
    if (::poll(&p, 1, kPipeWaitMs) > 0) r = op();
  }
  return r;
}

// Whether the recorded program used the pipe blocking: the replay's pipe never blocks.
bool RecordedBlocking(const LiveFd& live) {
  return live.is_pipe && (live.hidden_flags.load() & O_NONBLOCK) != 0;
}

// On a pipe used blocking, a call moved exactly the recorded count (a read returns once some
// bytes are there, a write once all are written). The replay moves that count piecewise,
// waiting for the other end between pieces, so the next call starts where the recorded one did.
template <typename F>
int64_t PipeExactly(const LiveFd& live, short events, uint64_t want, F&& op) {
  uint64_t done = 0;
  while (done < want) {
    int64_t r = op(done, want - done);
    if (r == -EAGAIN || r == -EINTR) {
      pollfd p{live.fd.get(), events, 0};
      if (r == -EINTR || ::poll(&p, 1, kPipeWaitMs) > 0) continue;
    }
    if (r <= 0) return done > 0 ? static_cast<int64_t>(done) : r;
    done += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(done);
}

struct Iov {
  uint64_t base;
  uint64_t len;
};

std::vector<Iov> IovArray(const CapturedBuffer* b) {
  std::vector<Iov> v;
  if (!b || b->not_captured || b->truncated) return v;
  v.resize(b->View().size() / sizeof(Iov));
  if (!v.empty()) std::memcpy(v.data(), b->View().data(), v.size() * sizeof(Iov));
  return v;
}

}  // namespace

bool Executor::Read(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  auto live = proc.Get(static_cast<int>(ev.args[0]));
  if (!live) return false;
  int fd = live->fd.get();
  int nr = ev.nr;
  if (nr == sysno::readv || nr == sysno::preadv || nr == sysno::preadv2) {
    // The element lengths come from the iovec array, captured only when the call succeeded.
    std::vector<Iov> iov = IovArray(FindBuffer(ev, 1, 0, BufferDir::kOut));
    if (iov.empty() && ev.args[2] != 0) return false;
    // Room for what the recording read (the elements in order, as the kernel fills them), and
    // never more than kMaxReadBuffer in all however large the elements claim to be.
    uint64_t budget = std::min<uint64_t>(
        Failed(ev.ret) || ev.ret == 0 ? kMaxReadBuffer : static_cast<uint64_t>(ev.ret),
        kMaxReadBuffer);
    std::vector<iovec> live_iov(iov.size());
    uint64_t total = 0;
    for (size_t i = 0; i < iov.size(); ++i) {
      live_iov[i].iov_len = std::min(iov[i].len, budget - total);
      total += live_iov[i].iov_len;
    }
    uint8_t* buf = Scratch(total);
    uint64_t at = 0;
    for (iovec& v : live_iov) {
      v.iov_base = buf + at;
      at += v.iov_len;
    }
    int cnt = static_cast<int>(live_iov.size());
    out->ret = PipeRetry(*live, POLLIN, [&]() -> int64_t {
      if (nr == sysno::readv) return Errno(::readv(fd, live_iov.data(), cnt));
      if (nr == sysno::preadv) {
        return Errno(::preadv(fd, live_iov.data(), cnt, static_cast<off_t>(ev.args[3])));
      }
      return Errno(::preadv2(fd, live_iov.data(), cnt, static_cast<off_t>(ev.args[3]),
                             static_cast<int>(ev.args[5])));
    });
    if (options_.verify && out->ret > 0 && !Failed(ev.ret)) {
      // Compare element by element, as the recording captured them.
      uint64_t left = static_cast<uint64_t>(out->ret), off = 0;
      for (size_t i = 0; i < iov.size() && left > 0 && out->data_mismatch.empty(); ++i) {
        uint64_t n = std::min<uint64_t>(live_iov[i].iov_len, left);
        const CapturedBuffer* b = FindBuffer(ev, 1, static_cast<int>(i + 1), BufferDir::kOut);
        if (b) out->data_mismatch = CompareBytes(*b, buf + off, n);
        off += live_iov[i].iov_len;
        left -= n;
      }
    }
    return true;
  }
  uint64_t count = std::min<uint64_t>(ev.args[2], kMaxReadBuffer);
  uint8_t* buf = Scratch(count);
  if (nr == sysno::read && RecordedBlocking(*live) && !Failed(ev.ret) && ev.ret > 0) {
    uint64_t want = std::min<uint64_t>(count, static_cast<uint64_t>(ev.ret));
    out->ret = PipeExactly(*live, POLLIN, want, [&](uint64_t at, uint64_t n) -> int64_t {
      return Errno(::read(fd, buf + at, n));
    });
  } else if (nr == sysno::read && ev.ret == 0 && live->accmode >= 0) {
    // A FIFO the replay opened read-write (Executor::Open) never reaches end-of-file, as the
    // replay holds a write end itself: the recorded end is an empty FIFO.
    out->ret = Errno(::read(fd, buf, count));
    if (out->ret == -EAGAIN) out->ret = 0;
  } else {
    out->ret = PipeRetry(*live, POLLIN, [&]() -> int64_t {
      switch (nr) {
        case sysno::read:
          return Errno(::read(fd, buf, count));
        case sysno::pread64:
          return Errno(::pread(fd, buf, count, static_cast<off_t>(ev.args[3])));
        default:
          return Errno(::syscall(SYS_getdents64, fd, buf, count));
      }
    });
  }
  if (options_.verify && out->ret > 0 && !Failed(ev.ret)) {
    const CapturedBuffer* b = FindBuffer(ev, 1, 0, BufferDir::kOut);
    if (b) {
      out->data_mismatch = nr == sysno::getdents64
                               ? CompareDirents(*b, buf, static_cast<size_t>(out->ret))
                               : CompareBytes(*b, buf, static_cast<size_t>(out->ret));
    }
  }
  return true;
}

bool Executor::Write(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  auto live = proc.Get(static_cast<int>(ev.args[0]));
  if (!live) return false;
  int fd = live->fd.get();
  int nr = ev.nr;
  // The bytes written are the recorded bytes; as many as the recording wrote (a short write
  // is reproduced as one), or all of them for a call that failed.
  std::vector<uint8_t> data;
  std::span<const uint8_t> bytes;
  uint64_t want = 0;
  if (nr == sysno::write || nr == sysno::pwrite64) {
    const CapturedBuffer* b = FindBuffer(ev, 1);
    want = ev.args[2];
    if (!Failed(ev.ret)) want = std::min<uint64_t>(want, static_cast<uint64_t>(ev.ret));
    if (want > 0 && (!b || b->not_captured)) return false;
    // A failed call's length may be anything; zeros past the capture are not worth gigabytes.
    if (b && b->View().size() < want && want > kMaxReadBuffer) return false;
    if (b && b->View().size() >= want) {
      bytes = b->View();
    } else if (b) {
      data.assign(b->View().begin(), b->View().end());  // cut by --max-buffer: the rest is zeros
      data.resize(want);
      bytes = data;
    }
  } else {
    std::vector<Iov> iov = IovArray(FindBuffer(ev, 1, 0, BufferDir::kIn));
    if (iov.empty() && ev.args[2] != 0) return false;
    uint64_t total = 0;
    for (const Iov& v : iov) total += v.len;
    if (!Failed(ev.ret)) total = std::min<uint64_t>(total, static_cast<uint64_t>(ev.ret));
    if (total > kMaxReadBuffer * 16) return false;
    for (size_t i = 0; i < iov.size() && data.size() < total; ++i) {
      const CapturedBuffer* b = FindBuffer(ev, 1, static_cast<int>(i + 1));
      if (iov[i].len > 0 && (!b || b->not_captured)) return false;
      size_t at = data.size();
      uint64_t len = std::min<uint64_t>(iov[i].len, total - at);
      data.resize(at + len);
      if (b)
        std::memcpy(data.data() + at, b->View().data(), std::min<uint64_t>(b->View().size(), len));
    }
    want = data.size();
    bytes = data;
  }
  if (!Failed(ev.ret)) want = std::min<uint64_t>(want, static_cast<uint64_t>(ev.ret));
  const uint8_t* p = bytes.empty() ? nullptr : bytes.data();
  if (live->is_pipe && ev.ret == -EPIPE) {
    // The reader had gone when the program wrote; in the replay its close may still be on
    // its way from another worker (the two calls overlapped). Wait for it, boundedly.
    // No events asked: poll reports POLLERR, which a pipe's write end raises once no reader
    // is left, and nothing else.
    pollfd pf{fd, 0, 0};
    ::poll(&pf, 1, kPipeWaitMs);
  }
  if ((nr == sysno::write || nr == sysno::writev) && RecordedBlocking(*live) && want > 0) {
    out->ret = PipeExactly(*live, POLLOUT, want, [&](uint64_t at, uint64_t n) -> int64_t {
      return Errno(::write(fd, p + at, n));
    });
    return true;
  }
  out->ret = PipeRetry(*live, POLLOUT, [&]() -> int64_t {
    switch (nr) {
      case sysno::write:
      case sysno::writev:
        return Errno(::write(fd, p, want));
      case sysno::pwrite64:
      case sysno::pwritev:
        return Errno(::pwrite(fd, p, want, static_cast<off_t>(ev.args[3])));
      default: {
        iovec one{const_cast<uint8_t*>(p), want};
        return Errno(
            ::pwritev2(fd, &one, 1, static_cast<off_t>(ev.args[3]), static_cast<int>(ev.args[5])));
      }
    }
  });
  return true;
}

bool Executor::Copy(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  // copy_file_range and splice share their layout: fd_in, off_in, fd_out, off_out, len, flags.
  bool cfr = ev.nr == sysno::copy_file_range || ev.nr == sysno::splice;
  int in_arg = cfr ? 0 : 1, out_arg = cfr ? 2 : 0;
  auto in = proc.Get(static_cast<int>(ev.args[in_arg]));
  auto to = proc.Get(static_cast<int>(ev.args[out_arg]));
  if (!in || !to) {
    // Copying a live file to an emulated fd (cat to the terminal) still moves the file offset.
    bool in_offset_used = cfr ? ev.args[1] == 0 : ev.args[2] == 0;
    if (in && in_offset_used && !Failed(ev.ret) && ev.ret > 0) {
      ::lseek(in->fd.get(), ev.ret, SEEK_CUR);
    }
    return false;
  }
  // The offsets the call was given, as captured at entry (NULL: the file offsets).
  auto offset = [&](int arg, loff_t* v) -> loff_t* {
    if (ev.args[arg] == 0) return nullptr;
    const CapturedBuffer* b = FindBuffer(ev, arg, 0, BufferDir::kIn);
    if (!b || b->View().size() < sizeof(*v)) return nullptr;
    std::memcpy(v, b->View().data(), sizeof(*v));
    return v;
  };
  // As many bytes as the recording moved; all that was asked when it moved none.
  uint64_t len = cfr ? ev.args[4] : ev.args[3];
  if (!Failed(ev.ret) && ev.ret > 0) len = static_cast<uint64_t>(ev.ret);
  loff_t off_in = 0, off_out = 0;
  if (cfr) {
    loff_t* pin = offset(1, &off_in);
    loff_t* pout = offset(3, &off_out);
    if ((ev.args[1] && !pin) || (ev.args[3] && !pout)) return false;
    if (ev.nr == sysno::splice) {
      // One end is a pipe, which in the replay never blocks: wait for the other end as a read
      // or write on it would, and move what the recording moved.
      const LiveFd& pipe = in->is_pipe ? *in : *to;
      short events = in->is_pipe ? POLLIN : POLLOUT;
      unsigned flags = static_cast<unsigned>(ev.args[5]);
      auto op = [&](uint64_t, uint64_t n) -> int64_t {
        return Errno(::splice(in->fd.get(), pin, to->fd.get(), pout, n, flags));
      };
      out->ret = RecordedBlocking(pipe) && !Failed(ev.ret) && ev.ret > 0
                     ? PipeExactly(pipe, events, len, op)
                     : PipeRetry(pipe, events, [&] { return op(0, len); });
      return true;
    }
    out->ret = Errno(::copy_file_range(in->fd.get(), pin, to->fd.get(), pout, len,
                                       static_cast<unsigned>(ev.args[5])));
  } else {
    loff_t* pin = offset(2, &off_in);
    if (ev.args[2] && !pin) return false;
    out->ret = Errno(::sendfile(to->fd.get(), in->fd.get(), pin, len));
  }
  return true;
}

bool Executor::Ioctl(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  // Only the reflinks, which change a file: every other request is emulated.
  const auto& a = ev.args;
  if (a[1] != kFiClone && a[1] != kFiCloneRange) return false;
  auto to = proc.Get(static_cast<int>(a[0]));
  if (!to) return false;
  struct Range {
    int64_t src_fd;
    uint64_t src_offset, src_length, dest_offset;
  } range{};
  int src_recorded;
  if (a[1] == kFiClone) {
    src_recorded = static_cast<int>(a[2]);
  } else {
    const CapturedBuffer* b = FindBuffer(ev, 2, 0, BufferDir::kIn);
    if (!b || b->not_captured || b->View().size() < sizeof(range)) return false;
    std::memcpy(&range, b->View().data(), sizeof(range));
    src_recorded = static_cast<int>(range.src_fd);
  }
  auto from = proc.Get(src_recorded);
  if (!from) return false;
  if (a[1] == kFiClone) {
    out->ret = Errno(::ioctl(to->fd.get(), kFiClone, from->fd.get()));
  } else {
    Range live = range;
    live.src_fd = from->fd.get();
    out->ret = Errno(::ioctl(to->fd.get(), kFiCloneRange, &live));
  }
  // The replay's file system may not share extents (a reflink on btrfs replayed on ext4): the
  // same bytes copied give the same file, which is what the program asked for.
  bool unsupported =
      out->ret == -EOPNOTSUPP || out->ret == -EXDEV || out->ret == -EINVAL || out->ret == -ENOTTY;
  if (unsupported && ev.ret == 0) {
    struct stat st;
    if (::fstat(from->fd.get(), &st) != 0) return true;
    loff_t in = static_cast<loff_t>(range.src_offset), at = static_cast<loff_t>(range.dest_offset);
    uint64_t left = a[1] == kFiClone || range.src_length == 0
                        ? static_cast<uint64_t>(st.st_size) - static_cast<uint64_t>(in)
                        : range.src_length;
    if (a[1] == kFiClone && ::ftruncate(to->fd.get(), st.st_size) != 0) return true;
    while (left > 0) {
      ssize_t n = ::copy_file_range(from->fd.get(), &in, to->fd.get(), &at, left, 0);
      if (n <= 0) return true;
      left -= static_cast<uint64_t>(n);
    }
    out->ret = 0;
  }
  return true;
}

bool XattrArgs(const SyscallEvent& ev, bool set, std::string* name, const CapturedBuffer** value) {
  const CapturedBuffer* n = FindBuffer(ev, 1, 0, BufferDir::kIn);
  if (!n || n->not_captured || n->View().empty()) return false;
  *name = CapturedString(n);
  // Not security.* or trusted.*: security.capability would give a file of the trace's own
  // content capabilities (cap_setuid), as a setuid bit would. Emulated.
  if (name->rfind("security.", 0) == 0 || name->rfind("trusted.", 0) == 0) return false;
  if (!set) return true;
  *value = FindBuffer(ev, 2, 0, BufferDir::kIn);
  uint64_t size = ev.args[3];
  return size == 0 || (*value && !(*value)->not_captured && (*value)->View().size() >= size);
}

bool Executor::FdOp(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  auto live = proc.Get(static_cast<int>(ev.args[0]));
  if (!live) return false;
  int fd = live->fd.get();
  const auto& a = ev.args;
  switch (ev.nr) {
    case sysno::lseek:
      out->ret = Errno(::lseek(fd, static_cast<off_t>(a[1]), static_cast<int>(a[2])));
      break;
    case sysno::fsync:
      out->ret = Errno(::fsync(fd));
      break;
    case sysno::fdatasync:
      out->ret = Errno(::fdatasync(fd));
      break;
    case sysno::sync_file_range:
      out->ret = Errno(::sync_file_range(fd, static_cast<off_t>(a[1]), static_cast<off_t>(a[2]),
                                         static_cast<unsigned>(a[3])));
      break;
    case sysno::ftruncate:
      out->ret = Errno(::ftruncate(fd, static_cast<off_t>(a[1])));
      break;
    case sysno::fallocate:
      out->ret = Errno(::fallocate(fd, static_cast<int>(a[1]), static_cast<off_t>(a[2]),
                                   static_cast<off_t>(a[3])));
      break;
    case sysno::fchmod:
      out->ret = Errno(::fchmod(fd, static_cast<mode_t>(Withhold(a[1], out))));
      if (out->ret == 0 && out->withheld) Withheld(fd, a[1]);
      break;
    case sysno::fchown:
      out->ret = Errno(::fchown(fd, static_cast<uid_t>(a[1]), static_cast<gid_t>(a[2])));
      break;
    case sysno::fsetxattr:
    case sysno::fremovexattr: {
      // sed -i and cp -p give a new file its mode through system.posix_acl_access: without
      // it the file keeps the mode it was created with.
      bool set = ev.nr == sysno::fsetxattr;
      std::string xname;
      const CapturedBuffer* value = nullptr;
      if (!XattrArgs(ev, set, &xname, &value)) return false;
      out->ret =
          set ? Errno(::fsetxattr(fd, xname.c_str(), a[3] > 0 ? value->View().data() : nullptr,
                                  static_cast<size_t>(a[3]), static_cast<int>(a[4])))
              : Errno(::fremovexattr(fd, xname.c_str()));
      break;
    }
    case sysno::fadvise64:
      // Advice changes no data, but it is the program's call and costs what it cost.
      out->ret = Errno(::posix_fadvise(fd, static_cast<off_t>(a[1]), static_cast<off_t>(a[2]),
                                       static_cast<int>(a[3])));
      if (out->ret > 0) out->ret = -out->ret;  // posix_fadvise returns the error number
      break;
    default:
      return false;
  }
  return true;
}

bool Executor::Stat(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  UniqueFd holder;
  bool emulate = false;
  int fd = -1;
  int buf_arg = 1;
  const auto& a = ev.args;
  bool is_statx = false;
  // A path (not AT_EMPTY_PATH on an fd): the fast path first.
  {
    int path_arg = -1, dirfd_arg = -1;
    bool nofollow = false, empty_ok = false, sx = ev.nr == sysno::statx;
    if (ev.nr == sysno::stat || ev.nr == sysno::lstat) {
      path_arg = 0;
      nofollow = ev.nr == sysno::lstat;
    } else if (ev.nr == sysno::newfstatat || sx) {
      path_arg = 1;
      dirfd_arg = 0;
      uint64_t flags = sx ? a[2] : a[3];
      nofollow = flags & AT_SYMLINK_NOFOLLOW;
      empty_ok = flags & AT_EMPTY_PATH;
    }
    std::string path;
    const CapturedBuffer* pb = path_arg >= 0 ? FindBuffer(ev, path_arg) : nullptr;
    bool empty = pb && !pb->View().empty() && pb->View()[0] == 0;
    if (pb && !(empty && empty_ok) && !empty && PathArg(ev, proc, path_arg, dirfd_arg, &path) &&
        !IsVirtualPath(path) && FastStat(path, nofollow, sx, ev, out)) {
      return true;
    }
  }
  switch (ev.nr) {
    case sysno::stat:
      fd = Target(ev, proc, -1, 0, false, false, &holder, &emulate);
      break;
    case sysno::lstat:
      fd = Target(ev, proc, -1, 0, true, false, &holder, &emulate);
      break;
    case sysno::fstat: {
      auto live = proc.Get(static_cast<int>(a[0]));
      if (!live) return false;
      fd = live->fd.get();
      struct stat st;
      out->ret = Errno(::fstat(fd, &st));
      if (options_.verify && out->ret == 0 && !Failed(ev.ret)) {
        if (const CapturedBuffer* b = FindBuffer(ev, 1, 0, BufferDir::kOut)) {
          out->data_mismatch = CompareStat(*b, st, options_.prepared, &out->as_prepared);
        }
      }
      return true;
    }
    case sysno::newfstatat:
      buf_arg = 2;
      fd = Target(ev, proc, 0, 1, a[3] & AT_SYMLINK_NOFOLLOW, a[3] & AT_EMPTY_PATH, &holder,
                  &emulate);
      break;
    case sysno::statx:
      buf_arg = 4;
      is_statx = true;
      fd = Target(ev, proc, 0, 1, a[2] & AT_SYMLINK_NOFOLLOW, a[2] & AT_EMPTY_PATH, &holder,
                  &emulate);
      break;
    default:
      return false;
  }
  if (emulate) return false;
  if (fd < 0) {
    out->ret = fd;
    return true;
  }
  if (is_statx) {
    struct statx stx;
    int sync = static_cast<int>(a[2]) & AT_STATX_SYNC_TYPE;
    out->ret = Errno(::statx(fd, "", AT_EMPTY_PATH | sync, static_cast<unsigned>(a[3]), &stx));
    if (options_.verify && out->ret == 0 && !Failed(ev.ret)) {
      if (const CapturedBuffer* b = FindBuffer(ev, buf_arg, 0, BufferDir::kOut)) {
        out->data_mismatch = CompareStatx(*b, stx, options_.prepared, &out->as_prepared);
      }
    }
    return true;
  }
  struct stat st;
  out->ret = Errno(::fstat(fd, &st));
  if (options_.verify && out->ret == 0 && !Failed(ev.ret)) {
    if (const CapturedBuffer* b = FindBuffer(ev, buf_arg, 0, BufferDir::kOut)) {
      out->data_mismatch = CompareStat(*b, st, options_.prepared, &out->as_prepared);
    }
  }
  return true;
}

}  // namespace fay::replay
