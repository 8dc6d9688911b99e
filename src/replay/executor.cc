// Dispatch, fd-table calls (open, close, dup, fcntl, pipe2, umask) and the emulated calls'
// bookkeeping. Data calls are in exec_data.cc, path calls in exec_path.cc.
#include "replay/executor.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "schema/syscall_table.h"
#include "schema/syscall_values.h"

namespace fay::replay {
namespace {

// Calls that make a new fd the replay does not make live: the recorded number is emulated from
// then on (forgetting any stale live entry under the same number).
bool CreatesEmulatedFd(int nr) {
  switch (nr) {
    case sysno::socket:
    case sysno::accept:
    case sysno::accept4:
    case sysno::eventfd:
    case sysno::eventfd2:
    case sysno::epoll_create:
    case sysno::epoll_create1:
    case sysno::memfd_create:
    case sysno::memfd_secret:
    case sysno::timerfd_create:
    case sysno::signalfd:
    case sysno::signalfd4:
    case sysno::inotify_init:
    case sysno::inotify_init1:
    case sysno::fanotify_init:
    case sysno::pidfd_open:
    case sysno::pidfd_getfd:
    case sysno::userfaultfd:
    case sysno::perf_event_open:
    case sysno::io_uring_setup:
    case sysno::open_by_handle_at:
    case sysno::open_tree:
    case sysno::fsopen:
    case sysno::fsmount:
    case sysno::fspick:
    case sysno::bpf:
      return true;
    default:
      return false;
  }
}

bool Failed(int64_t ret) {
  return ret < 0 && ret >= -4095;
}

int64_t Errno(long r) {
  return r < 0 ? -errno : r;
}

}  // namespace

bool IsReplayed(int nr) {
  switch (nr) {
    case sysno::open:
    case sysno::openat:
    case sysno::openat2:
    case sysno::creat:
    case sysno::close:
    case sysno::close_range:
    case sysno::read:
    case sysno::pread64:
    case sysno::readv:
    case sysno::preadv:
    case sysno::preadv2:
    case sysno::write:
    case sysno::pwrite64:
    case sysno::writev:
    case sysno::pwritev:
    case sysno::pwritev2:
    case sysno::lseek:
    case sysno::copy_file_range:
    case sysno::sendfile:
    case sysno::fsync:
    case sysno::fdatasync:
    case sysno::sync_file_range:
    case sysno::ftruncate:
    case sysno::truncate:
    case sysno::fallocate:
    case sysno::stat:
    case sysno::lstat:
    case sysno::fstat:
    case sysno::newfstatat:
    case sysno::statx:
    case sysno::access:
    case sysno::faccessat:
    case sysno::faccessat2:
    case sysno::mkdir:
    case sysno::mkdirat:
    case sysno::rmdir:
    case sysno::unlink:
    case sysno::unlinkat:
    case sysno::rename:
    case sysno::renameat:
    case sysno::renameat2:
    case sysno::link:
    case sysno::linkat:
    case sysno::symlink:
    case sysno::symlinkat:
    case sysno::readlink:
    case sysno::readlinkat:
    case sysno::getdents64:
    case sysno::chmod:
    case sysno::fchmod:
    case sysno::fchmodat:
    case sysno::fchmodat2:
    case sysno::chown:
    case sysno::lchown:
    case sysno::fchown:
    case sysno::fsetxattr:
    case sysno::fremovexattr:
    case sysno::setxattr:
    case sysno::lsetxattr:
    case sysno::removexattr:
    case sysno::lremovexattr:
    case sysno::mknod:
    case sysno::mknodat:
    case sysno::fadvise64:
    case sysno::splice:
    case sysno::ioctl:
    case sysno::fchownat:
    case sysno::utimensat:
    case sysno::dup:
    case sysno::dup2:
    case sysno::dup3:
    case sysno::fcntl:
    case sysno::pipe:
    case sysno::pipe2:
    case sysno::umask:
      return true;
    default:
      return false;
  }
}

namespace {

bool IsVirtualNormal(std::string_view n) {
  auto under = [&](std::string_view top) {
    return n.substr(0, top.size()) == top && (n.size() == top.size() || n[top.size()] == '/');
  };
  // /dev/shm is an ordinary tmpfs that programs keep real files in.
  if (under("/dev/shm")) return false;
  return under("/proc") || under("/sys") || under("/dev");
}

}  // namespace

bool IsVirtualPath(const std::string& path) {
  // Nearly every path is normal already: its first component says it all, without a copy.
  if (IsNormalPath(path)) return IsVirtualNormal(path);
  return IsVirtualNormal(NormalizePath(path));
}

const CapturedBuffer* FindBuffer(const SyscallEvent& ev, int arg, int sub, BufferDir dir) {
  for (const CapturedBuffer& b : ev.buffers) {
    if (b.arg == arg && b.sub == sub && b.dir == dir) return &b;
  }
  return nullptr;
}

std::string_view CapturedView(const CapturedBuffer* b) {
  std::span<const uint8_t> v = b->View();
  const void* nul = std::memchr(v.data(), 0, v.size());
  return {reinterpret_cast<const char*>(v.data()),
          nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - v.data()) : v.size()};
}

std::string CapturedString(const CapturedBuffer* b) {
  return std::string(CapturedView(b));
}

uint8_t* Executor::Scratch(size_t n) {
  if (scratch_.size() < n) scratch_.resize(n);
  return scratch_.data();
}

bool Executor::PathArg(const SyscallEvent& ev, ProcessState& proc, int path_arg, int dirfd_arg,
                       std::string* out) const {
  const CapturedBuffer* b = FindBuffer(ev, path_arg);
  if (!b || b->not_captured || b->truncated) return false;
  std::string_view path = CapturedView(b);
  if (!path.empty() && path.front() == '/') {
    out->assign(path);
    return true;
  }
  int dirfd = dirfd_arg < 0 ? AT_FDCWD : static_cast<int>(ev.args[dirfd_arg]);
  if (dirfd == AT_FDCWD) {
    *out = JoinPath(proc.cwd(), path);
    return true;
  }
  auto live = proc.Get(dirfd);
  if (!live) return false;
  // Where the directory is now (it may have been renamed since it was opened), as the kernel
  // knows it; the path it was opened by when that is not beneath the root any more (removed).
  std::string now = sandbox_.PathOf(live->fd.get());
  *out = JoinPath(now.empty() ? live->path : now, path);
  return true;
}

// A replay pipe's capacity: 16 times a default pipe's (Executor::Pipe).
constexpr int kReplayPipeBytes = 1 << 20;

bool IsInterrupted(int64_t ret) {
  return ret == -kERestartSys || ret == -kERestartNoIntr || ret == -kERestartNoHand ||
         ret == -kERestartRestartBlock;
}

Outcome Executor::Run(const SyscallEvent& ev, ProcessState& proc) {
  cache_.EndOfCall();
  Outcome out;
  if (IsInterrupted(ev.ret)) {
    // Run for real it would read, write or wait for what the recorded call never got to.
    Emulate(ev, proc);
    out.ret = ev.ret;
    out.interrupted = true;
    return out;
  }
  bool returned = ev.exit_ns != 0 && !(ev.flags & kEventNoExit);
  if (returned && IsReplayed(ev.nr)) {
    bool done = false;
    switch (ev.nr) {
      case sysno::open:
      case sysno::openat:
      case sysno::openat2:
      case sysno::creat:
        done = Open(ev, proc, &out);
        break;
      case sysno::close:
      case sysno::close_range:
        done = Close(ev, proc, &out);
        break;
      case sysno::read:
      case sysno::pread64:
      case sysno::readv:
      case sysno::preadv:
      case sysno::preadv2:
      case sysno::getdents64:
        done = Read(ev, proc, &out);
        break;
      case sysno::write:
      case sysno::pwrite64:
      case sysno::writev:
      case sysno::pwritev:
      case sysno::pwritev2:
        done = Write(ev, proc, &out);
        break;
      case sysno::copy_file_range:
      case sysno::sendfile:
      case sysno::splice:
        done = Copy(ev, proc, &out);
        break;
      case sysno::ioctl:
        done = Ioctl(ev, proc, &out);
        break;
      case sysno::lseek:
      case sysno::fsync:
      case sysno::fdatasync:
      case sysno::sync_file_range:
      case sysno::ftruncate:
      case sysno::fallocate:
      case sysno::fchmod:
      case sysno::fchown:
      case sysno::fsetxattr:
      case sysno::fremovexattr:
      case sysno::fadvise64:
        done = FdOp(ev, proc, &out);
        break;
      case sysno::stat:
      case sysno::lstat:
      case sysno::fstat:
      case sysno::newfstatat:
      case sysno::statx:
        done = Stat(ev, proc, &out);
        break;
      case sysno::dup:
      case sysno::dup2:
      case sysno::dup3:
        done = Dup(ev, proc, &out);
        break;
      case sysno::fcntl:
        done = Fcntl(ev, proc, &out);
        break;
      case sysno::pipe:
      case sysno::pipe2:
        done = Pipe(ev, proc, &out);
        break;
      case sysno::umask:
        out.ret = proc.umask();
        proc.set_umask(static_cast<uint32_t>(ev.args[0]) & 0777);
        done = true;
        break;
      default:
        done = PathOp(ev, proc, &out);
        break;
    }
    if (done) {
      out.replayed = true;
      return out;
    }
  }
  Emulate(ev, proc);
  out.ret = ev.ret;
  return out;
}

bool Executor::IsFifo(const std::string& path) const {
  struct stat st;
  ParentAndName pn;
  if (path.empty() || path.back() == '/' || sandbox_.Parent(path, &pn, &cache_) != 0) return false;
  if (::fstatat(pn.dir(), pn.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (!S_ISLNK(st.st_mode)) return S_ISFIFO(st.st_mode);
  UniqueFd target(sandbox_.OpenPath(path, false));  // through the link, inside the root
  return target.get() >= 0 && ::fstat(target.get(), &st) == 0 && S_ISFIFO(st.st_mode);
}

bool Executor::Open(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  std::string path;
  uint64_t flags = 0, mode = 0, resolve = 0;
  switch (ev.nr) {
    case sysno::open:
      if (!PathArg(ev, proc, 0, -1, &path)) return false;
      flags = ev.args[1];
      mode = ev.args[2];
      break;
    case sysno::creat:
      if (!PathArg(ev, proc, 0, -1, &path)) return false;
      flags = O_CREAT | O_WRONLY | O_TRUNC;
      mode = ev.args[1];
      break;
    case sysno::openat:
      if (!PathArg(ev, proc, 1, 0, &path)) return false;
      flags = ev.args[2];
      mode = ev.args[3];
      break;
    case sysno::openat2: {
      if (!PathArg(ev, proc, 1, 0, &path)) return false;
      const CapturedBuffer* how = FindBuffer(ev, 2);
      if (!how || how->View().size() < sizeof(open_how)) return false;
      open_how h;
      std::memcpy(&h, how->View().data(), sizeof(h));
      flags = h.flags;
      mode = h.mode;
      // BENEATH and IN_ROOT were relative to the recorded dirfd; the sandbox's IN_ROOT is
      // stricter than either and always applies.
      resolve = h.resolve & ~static_cast<uint64_t>(RESOLVE_BENEATH | RESOLVE_IN_ROOT);
      break;
    }
    default:
      return false;
  }
  if (IsVirtualPath(path)) return false;
  // open(2) ignores the mode without O_CREAT/O_TMPFILE; openat2(2) refuses one.
  if (flags & (O_CREAT | __O_TMPFILE)) {
    mode &= ~static_cast<uint64_t>(proc.umask());
  } else {
    mode = 0;
  }
  uint64_t asked = mode;
  mode = Withhold(mode, out);
  // An open of a FIFO blocks until its other end is opened, perhaps by a process that was not
  // recorded: the replay opens it without blocking, and its reads and writes then wait for the
  // other end as a pipe's do. Read-only is opened read-write, so that a read waits for data
  // rather than seeing end-of-file before the writer has opened.
  int fifo_hidden = 0;
  bool may_block = !(flags & (O_NONBLOCK | O_PATH | O_DIRECTORY)) &&
                   (flags & O_ACCMODE) != O_RDWR && !((flags & O_CREAT) && (flags & O_EXCL));
  int accmode = static_cast<int>(flags & O_ACCMODE);
  if (may_block && sandbox_.MayHoldFifos() && IsFifo(path)) {
    fifo_hidden = O_NONBLOCK;
    if ((flags & O_ACCMODE) == O_RDONLY) flags |= O_RDWR;
    flags |= O_NONBLOCK;
  }
  int fd;
  bool fallback = true;
  if (ev.nr != sysno::openat2) fd = FastOpen(path, flags, mode & 07777, &fallback);
  if (fallback) fd = sandbox_.OpenAt(path, flags, mode & 07777, resolve);
  if (fd == -ENXIO && fifo_hidden) {  // write-only with no reader yet: be one
    flags = (flags & ~static_cast<uint64_t>(O_ACCMODE)) | O_RDWR;
    fd = sandbox_.OpenAt(path, flags, mode & 07777, resolve);
  }
  out->compare = RetCompare::kSuccess;
  out->ret = fd;
  int recorded = static_cast<int>(ev.ret);
  if (Failed(ev.ret)) {
    if (fd >= 0) ::close(fd);
    return true;
  }
  if (fd < 0) {
    proc.Erase(recorded);
    return true;
  }
  if (out->withheld) Withheld(fd, asked);
  auto live = std::make_shared<LiveFd>();
  live->fd.reset(fd);
  live->path = std::move(path);
  if (!fallback && !(flags & O_NOFOLLOW)) live->hidden_flags = O_NOFOLLOW;
  if (fifo_hidden) {
    live->is_pipe = true;
    live->hidden_flags |= fifo_hidden;
    live->accmode = accmode;  // opened read-write, but the program asked for this
  }
  proc.Set(recorded, std::move(live), (flags & O_CLOEXEC) != 0);
  return true;
}

bool Executor::Close(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  if (ev.nr == sysno::close_range) {
    int first = static_cast<int>(ev.args[0]);
    int last = ev.args[1] > INT32_MAX ? INT32_MAX : static_cast<int>(ev.args[1]);
    if (Failed(ev.ret)) return false;
    proc.EraseRange(first, last, (ev.args[2] & CLOSE_RANGE_CLOEXEC) != 0);
    out->ret = 0;
    return true;
  }
  int fd = static_cast<int>(ev.args[0]);
  if (!proc.Has(fd)) return false;
  // The live fd closes with the last table entry naming it (dup and fork share it).
  proc.Erase(fd);
  out->ret = 0;
  return true;
}

bool Executor::Dup(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  int oldfd = static_cast<int>(ev.args[0]);
  auto live = proc.Get(oldfd);
  if (!live) {
    if (!Failed(ev.ret)) proc.Erase(static_cast<int>(ev.ret));  // the new number is emulated
    return false;
  }
  out->compare = RetCompare::kSuccess;
  if (ev.nr == sysno::dup3 && (ev.args[0] == ev.args[1] || (ev.args[2] & ~O_CLOEXEC))) {
    out->ret = -EINVAL;
    return true;
  }
  if (Failed(ev.ret)) {
    // dup fails for EMFILE-like reasons the replay cannot reproduce; report what happened.
    out->ret = 0;
    return true;
  }
  int newfd = static_cast<int>(ev.ret);
  out->ret = newfd;
  if (ev.nr != sysno::dup && ev.args[0] == ev.args[1]) return true;  // dup2(fd, fd): no-op
  proc.Set(newfd, std::move(live), ev.nr == sysno::dup3 && (ev.args[2] & O_CLOEXEC));
  return true;
}

bool Executor::Fcntl(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  int fd = static_cast<int>(ev.args[0]);
  int cmd = static_cast<int>(ev.args[1]);
  auto live = proc.Get(fd);
  if (!live) {
    if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && !Failed(ev.ret)) {
      proc.Erase(static_cast<int>(ev.ret));
    }
    return false;
  }
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC:
      out->compare = RetCompare::kSuccess;
      if (Failed(ev.ret)) {
        out->ret = 0;
        return true;
      }
      out->ret = ev.ret;
      proc.Set(static_cast<int>(ev.ret), std::move(live), cmd == F_DUPFD_CLOEXEC);
      return true;
    case F_GETFD:
      out->ret = proc.GetCloexec(fd) == 1 ? FD_CLOEXEC : 0;
      return true;
    case F_SETFD:
      proc.SetCloexec(fd, (ev.args[2] & FD_CLOEXEC) != 0);
      out->ret = 0;
      return true;
    case F_GETFL: {
      long r = ::fcntl(live->fd.get(), F_GETFL);
      if (r >= 0) r &= ~static_cast<long>(live->hidden_flags.load());
      if (r >= 0 && live->accmode >= 0) r = (r & ~static_cast<long>(O_ACCMODE)) | live->accmode;
      out->ret = Errno(r);
      return true;
    }
    case F_SETFL: {
      long arg = static_cast<long>(ev.args[2]);
      // Live pipes stay non-blocking so that replay never hangs; F_GETFL shows what the
      // program asked for.
      if (live->is_pipe) {
        int others = live->hidden_flags.load() & ~O_NONBLOCK;  // O_NOFOLLOW
        live->hidden_flags = others | ((arg & O_NONBLOCK) ? 0 : O_NONBLOCK);
        arg |= O_NONBLOCK;
      }
      out->ret = Errno(::fcntl(live->fd.get(), F_SETFL, arg));
      return true;
    }
    case F_SETPIPE_SZ:
      // Emulated (the recorded result stands), but the live pipe gets at least that much room
      // too, with the margin Pipe gives.
      if (live->is_pipe && ev.args[2] > kReplayPipeBytes / 16) {
        // As much as pipe-max-size and the user's budget allow, down to what was asked.
        for (uint64_t k : {16, 4, 1})
          if (::fcntl(live->fd.get(), F_SETPIPE_SZ,
                      static_cast<int>(std::min<uint64_t>(ev.args[2] * k, 1u << 30))) >= 0)
            break;
      }
      return false;
    default:
      return false;  // locks, leases, seals, pipe sizes: emulated
  }
}

bool Executor::Pipe(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  out->compare = RetCompare::kSuccess;
  const CapturedBuffer* b = FindBuffer(ev, 0, 0, BufferDir::kOut);
  if (Failed(ev.ret) || !b || b->View().size() < 8) return false;
  int recorded[2];
  std::memcpy(recorded, b->View().data(), sizeof(recorded));
  uint64_t flags = ev.nr == sysno::pipe2 ? ev.args[1] : 0;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK | (flags & O_DIRECT)) != 0) {
    out->ret = -errno;
    return true;
  }
  // Room for more than the recording's pipe ever held. A pipe holds 16 pages, each partly
  // filled as the writes and reads happened to fall: the replay's, interleaved otherwise, may
  // fit fewer bytes, and a writer the recording let through then waits on a reader that the
  // schedule holds behind that very write (tar | gzip stalled, and came out misaligned).
  // Unused room costs nothing: pages are taken as they are written.
  // A user's pipes have a page budget (pipe-user-pages-soft): where 1 MiB is refused, less.
  for (int room : {kReplayPipeBytes, 256 << 10, 128 << 10})
    if (::fcntl(fds[1], F_SETPIPE_SZ, room) >= 0) break;
  for (int i = 0; i < 2; ++i) {
    auto live = std::make_shared<LiveFd>();
    live->fd.reset(fds[i]);
    live->is_pipe = true;
    if (!(flags & O_NONBLOCK)) live->hidden_flags = O_NONBLOCK;
    proc.Set(recorded[i], std::move(live), (flags & O_CLOEXEC) != 0);
  }
  out->ret = 0;
  return true;
}

void Executor::Emulate(const SyscallEvent& ev, ProcessState& proc) {
  if (ev.nr == sysno::exit_group) {
    proc.Exit();
    return;
  }
  bool returned = ev.exit_ns != 0 && !(ev.flags & kEventNoExit);
  if (!returned || Failed(ev.ret)) return;
  int nr = ev.nr;
  if (CreatesEmulatedFd(nr)) {
    proc.Erase(static_cast<int>(ev.ret));
  } else if (nr == sysno::socketpair) {
    const CapturedBuffer* b = FindBuffer(ev, 3, 0, BufferDir::kOut);
    if (b && b->View().size() >= 8) {
      int fds[2];
      std::memcpy(fds, b->View().data(), sizeof(fds));
      proc.Erase(fds[0]);
      proc.Erase(fds[1]);
    }
  } else if (nr == sysno::open || nr == sysno::openat || nr == sysno::openat2 ||
             nr == sysno::creat || nr == sysno::dup || nr == sysno::dup2 || nr == sysno::dup3 ||
             nr == sysno::pipe || nr == sysno::pipe2) {
    // A replayable call that had to be emulated (a path under /proc, an fd that is not live):
    // whatever it returned is not live either.
    if (nr == sysno::pipe || nr == sysno::pipe2) {
      const CapturedBuffer* b = FindBuffer(ev, 0, 0, BufferDir::kOut);
      if (b && b->View().size() >= 8) {
        int fds[2];
        std::memcpy(fds, b->View().data(), sizeof(fds));
        proc.Erase(fds[0]);
        proc.Erase(fds[1]);
      }
    } else if (!(nr == sysno::dup2 && ev.args[0] == ev.args[1])) {
      proc.Erase(static_cast<int>(ev.ret));
    }
  } else if (nr == sysno::fcntl && (ev.args[1] == F_DUPFD || ev.args[1] == F_DUPFD_CLOEXEC)) {
    proc.Erase(static_cast<int>(ev.ret));
  } else if (nr == sysno::execve || nr == sysno::execveat) {
    proc.Exec();
  } else if (nr == sysno::clone || nr == sysno::clone3 || nr == sysno::fork || nr == sysno::vfork) {
    // A new process (not a thread: threads share the table) starts with a copy, or with the
    // parent's table itself under CLONE_FILES. clone3's flags lead its struct clone_args.
    uint64_t flags = 0;
    if (nr == sysno::clone) {
      flags = ev.args[0];
    } else if (nr == sysno::clone3) {
      const CapturedBuffer* b = FindBuffer(ev, 0, 0, BufferDir::kIn);
      if (b && b->View().size() >= sizeof(flags))
        std::memcpy(&flags, b->View().data(), sizeof(flags));
    }
    if (ProcessState* child = procs_.Find(static_cast<int32_t>(ev.ret)); child && child != &proc) {
      child->CopyFrom(proc, (flags & CLONE_FILES) != 0);
    }
  } else if (nr == sysno::chdir || nr == sysno::fchdir) {
    std::string path;
    if (nr == sysno::chdir) {
      if (!PathArg(ev, proc, 0, -1, &path)) return;
    } else {
      auto live = proc.Get(static_cast<int>(ev.args[0]));
      if (!live) return;
      path = live->path;
    }
    // The canonical path of the directory as the sandbox resolves it; lexically when it does
    // not resolve (the directory may be missing without --prepare).
    int fd = sandbox_.OpenAt(path, O_PATH | O_DIRECTORY, 0);
    std::string canon = fd >= 0 ? sandbox_.PathOf(fd) : std::string();
    if (fd >= 0) ::close(fd);
    proc.set_cwd(canon.empty() ? NormalizePath(path) : canon);
  }
}

uint64_t Executor::Withhold(uint64_t mode, Outcome* out) {
  constexpr uint64_t kSetId = S_ISUID | S_ISGID;
  if (mode & kSetId) out->withheld = true;
  return mode & ~kSetId;
}

void Executor::Withheld(int fd, uint64_t asked) const {
  struct stat st;
  if (!options_.prepared || ::fstat(fd, &st) != 0) return;
  // The bits the file lacks now. (A creating open of a file already there changed no mode; an
  // entry for it only excuses bits a stat recorded after that open would not show anyway.)
  uint32_t missing = static_cast<uint32_t>(asked) & (S_ISUID | S_ISGID) & ~st.st_mode;
  if (missing) options_.prepared->Add(st.st_dev, st.st_ino, {missing, false});
}

}  // namespace fay::replay
