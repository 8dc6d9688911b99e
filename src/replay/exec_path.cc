// Calls that name a path: every one goes through the Sandbox (openat2 RESOLVE_IN_ROOT). Calls
// that follow the last component act on an O_PATH fd with AT_EMPTY_PATH; calls on a directory
// entry act on (parent fd, name) without following it.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

#include "replay/executor.h"
#include "replay/verify.h"
#include "schema/syscall_table.h"

namespace fay::replay {
namespace {

bool Failed(int64_t ret) {
  return ret < 0 && ret >= -4095;
}

int64_t Errno(long r) {
  return r < 0 ? -errno : r;
}

// The error the kernel gives when the last component is "." or "..", per call.
int64_t DotError(int nr) {
  switch (nr) {
    case sysno::mkdir:
    case sysno::mkdirat:
    case sysno::link:
    case sysno::linkat:
    case sysno::symlink:
    case sysno::symlinkat:
      return -EEXIST;
    case sysno::unlink:
      return -EISDIR;
    case sysno::rename:
    case sysno::renameat:
    case sysno::renameat2:
      return -EBUSY;
    default:
      return -EINVAL;
  }
}

}  // namespace

int Executor::Target(const SyscallEvent& ev, ProcessState& proc, int dirfd_arg, int path_arg,
                     bool nofollow, bool empty_path, UniqueFd* holder, bool* emulate) const {
  const CapturedBuffer* b = FindBuffer(ev, path_arg);
  bool empty = ev.args[path_arg] == 0 || (b && !b->not_captured && CapturedString(b).empty());
  if (empty && empty_path) {
    int dirfd = dirfd_arg < 0 ? AT_FDCWD : static_cast<int>(ev.args[dirfd_arg]);
    if (dirfd != AT_FDCWD) {
      auto live = proc.Get(dirfd);
      if (!live) {
        *emulate = true;
        return -EBADF;
      }
      // The caller uses the fd while the table may change under another thread: hold a dup.
      int fd = ::fcntl(live->fd.get(), F_DUPFD_CLOEXEC, 0);
      if (fd < 0) return -errno;
      holder->reset(fd);
      return fd;
    }
    int fd = sandbox_.OpenPath(proc.cwd(), false);
    if (fd >= 0) holder->reset(fd);
    return fd;
  }
  if (empty) return ev.args[path_arg] == 0 ? -EFAULT : -ENOENT;
  std::string path;
  if (!PathArg(ev, proc, path_arg, dirfd_arg, &path)) {
    *emulate = true;
    return -EINVAL;
  }
  if (int fd = ProcFdPath(ev, proc, path, holder); fd != -1) {
    if (fd == -EBADF) *emulate = true;
    return fd;
  }
  if (IsVirtualPath(path)) {
    *emulate = true;
    return -EINVAL;
  }
  int fd = sandbox_.OpenPath(path, nofollow);
  if (fd >= 0) holder->reset(fd);
  return fd;
}

int Executor::ProcFdPath(const SyscallEvent& ev, ProcessState& proc, const std::string& path,
                         UniqueFd* holder) const {
  // glibc reaches an O_PATH fd's file through /proc/self/fd/N (fchmodat with
  // AT_SYMLINK_NOFOLLOW, fchownat, ...); the replay gives it the live fd behind recorded fd N.
  std::string n = NormalizePath(path);
  std::string pid = std::to_string(ev.pid);
  std::string fd_text;
  for (const std::string& prefix :
       {std::string("/proc/self/fd/"), std::string("/proc/thread-self/fd/"),
        "/proc/" + pid + "/fd/"}) {
    if (n.compare(0, prefix.size(), prefix) == 0) fd_text = n.substr(prefix.size());
  }
  if (fd_text.empty() || fd_text.size() > 9 ||
      fd_text.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  auto live = proc.Get(std::stoi(fd_text));
  if (!live) return -EBADF;
  int fd = ::fcntl(live->fd.get(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return -errno;
  holder->reset(fd);
  return fd;
}

bool Executor::PathOp(const SyscallEvent& ev, ProcessState& proc, Outcome* out) {
  const auto& a = ev.args;
  int nr = ev.nr;
  UniqueFd holder;
  bool emulate = false;
  // The follow-the-last-component calls: an O_PATH fd, then the call on it.
  auto target = [&](int dirfd_arg, int path_arg, bool nofollow, bool empty_path) {
    return Target(ev, proc, dirfd_arg, path_arg, nofollow, empty_path, &holder, &emulate);
  };
  // The directory-entry calls: the parent fd and the name.
  std::string changed[2];  // paths removed or renamed, for the parent cache
  auto entry = [&](int dirfd_arg, int path_arg, ParentAndName* pn, int slot = 0) -> int {
    std::string path;
    if (!PathArg(ev, proc, path_arg, dirfd_arg, &path) || IsVirtualPath(path)) {
      emulate = true;
      return -EINVAL;
    }
    int r = sandbox_.Parent(path, pn, &cache_);
    changed[slot] = std::move(path);
    return r == -EINVAL ? static_cast<int>(DotError(nr)) : r;
  };
  switch (nr) {
    case sysno::truncate: {
      std::string path;
      if (!PathArg(ev, proc, 0, -1, &path) || IsVirtualPath(path)) return false;
      int fd = sandbox_.OpenAt(path, O_WRONLY, 0);
      out->ret = fd < 0 ? fd : Errno(::ftruncate(fd, static_cast<off_t>(a[1])));
      if (fd >= 0) ::close(fd);
      return true;
    }
    case sysno::access:
    case sysno::faccessat:
    case sysno::faccessat2: {
      bool at = nr != sysno::access;
      int flags = nr == sysno::faccessat2 ? static_cast<int>(a[3]) : 0;
      int fd = at ? target(0, 1, flags & AT_SYMLINK_NOFOLLOW, flags & AT_EMPTY_PATH)
                  : target(-1, 0, false, false);
      if (emulate) return false;
      int mode = static_cast<int>(at ? a[2] : a[1]);
      out->ret = fd < 0 ? fd
                        : Errno(::syscall(SYS_faccessat2, fd, "", mode,
                                          AT_EMPTY_PATH | (flags & AT_EACCESS)));
      return true;
    }
    case sysno::chmod:
    case sysno::fchmodat:
    case sysno::fchmodat2: {
      int flags = nr == sysno::fchmodat2 ? static_cast<int>(a[3]) : 0;
      int fd = nr == sysno::chmod
                   ? target(-1, 0, false, false)
                   : target(0, 1, flags & AT_SYMLINK_NOFOLLOW, flags & AT_EMPTY_PATH);
      if (emulate) return false;
      uint64_t asked = nr == sysno::chmod ? a[1] : a[2];
      uint64_t mode = Withhold(asked, out);
      out->ret = fd < 0 ? fd : Errno(::syscall(sysno::fchmodat2, fd, "", mode, AT_EMPTY_PATH));
      if (out->ret == 0 && out->withheld) Withheld(fd, asked);
      return true;
    }
    case sysno::chown:
    case sysno::lchown:
    case sysno::fchownat: {
      int flags = nr == sysno::fchownat ? static_cast<int>(a[4]) : 0;
      int fd = nr == sysno::fchownat
                   ? target(0, 1, flags & AT_SYMLINK_NOFOLLOW, flags & AT_EMPTY_PATH)
                   : target(-1, 0, nr == sysno::lchown, false);
      if (emulate) return false;
      int base = nr == sysno::fchownat ? 2 : 1;
      out->ret = fd < 0 ? fd
                        : Errno(::fchownat(fd, "", static_cast<uid_t>(a[base]),
                                           static_cast<gid_t>(a[base + 1]), AT_EMPTY_PATH));
      return true;
    }
    case sysno::utimensat: {
      int flags = static_cast<int>(a[3]);
      const CapturedBuffer* times = FindBuffer(ev, 2);
      if (a[2] != 0 && (!times || times->View().size() < 2 * sizeof(timespec))) return false;
      timespec ts[2];
      if (a[2] != 0) std::memcpy(ts, times->View().data(), sizeof(ts));
      // utimensat(fd, NULL, ...) is futimens: the dirfd itself.
      int fd = target(0, 1, flags & AT_SYMLINK_NOFOLLOW, true);
      if (emulate) return false;
      out->ret = fd < 0 ? fd : Errno(::utimensat(fd, "", a[2] ? ts : nullptr, AT_EMPTY_PATH));
      return true;
    }
    case sysno::readlink:
    case sysno::readlinkat: {
      bool at = nr == sysno::readlinkat;
      ParentAndName pn;
      int r = entry(at ? 0 : -1, at ? 1 : 0, &pn);
      if (emulate) return false;
      uint64_t size = std::min<uint64_t>(at ? a[3] : a[2], 1 << 20);
      uint8_t* buf = Scratch(size);
      out->ret =
          r < 0
              ? r
              : Errno(::readlinkat(pn.dir(), pn.name.c_str(), reinterpret_cast<char*>(buf), size));
      if (options_.verify && out->ret > 0 && !Failed(ev.ret)) {
        if (const CapturedBuffer* b = FindBuffer(ev, at ? 2 : 1, 0, BufferDir::kOut)) {
          out->data_mismatch = CompareBytes(*b, buf, static_cast<size_t>(out->ret));
        }
      }
      return true;
    }
    case sysno::mkdir:
    case sysno::mkdirat: {
      bool at = nr == sysno::mkdirat;
      ParentAndName pn;
      int r = entry(at ? 0 : -1, at ? 1 : 0, &pn);
      if (emulate) return false;
      mode_t mode = static_cast<mode_t>(at ? a[2] : a[1]) & 07777 & ~proc.umask();
      out->ret = r < 0 ? r : Errno(::mkdirat(pn.dir(), pn.name.c_str(), mode));
      return true;
    }
    case sysno::rmdir:
    case sysno::unlink:
    case sysno::unlinkat: {
      bool at = nr == sysno::unlinkat;
      ParentAndName pn;
      int r = entry(at ? 0 : -1, at ? 1 : 0, &pn);
      if (emulate) return false;
      int flags = nr == sysno::rmdir ? AT_REMOVEDIR : at ? static_cast<int>(a[2]) : 0;
      out->ret = r < 0 ? r : Errno(::unlinkat(pn.dir(), pn.name.c_str(), flags));
      if (out->ret == 0) cache_.Changed(changed[0]);
      return true;
    }
    case sysno::rename:
    case sysno::renameat:
    case sysno::renameat2: {
      bool at = nr != sysno::rename;
      ParentAndName from, to;
      int r1 = entry(at ? 0 : -1, at ? 1 : 0, &from, 0);
      int r2 = entry(at ? 2 : -1, at ? 3 : 1, &to, 1);
      if (emulate) return false;
      unsigned flags = nr == sysno::renameat2 ? static_cast<unsigned>(a[4]) : 0;
      out->ret =
          r1 < 0 ? r1
          : r2 < 0
              ? r2
              : Errno(::renameat2(from.dir(), from.name.c_str(), to.dir(), to.name.c_str(), flags));
      if (out->ret == 0) {
        cache_.Changed(changed[0]);
        cache_.Changed(changed[1]);
      }
      return true;
    }
    case sysno::link:
    case sysno::linkat: {
      bool at = nr == sysno::linkat;
      int flags = at ? static_cast<int>(a[4]) : 0;
      ParentAndName to;
      int r2 = entry(at ? 2 : -1, at ? 3 : 1, &to);
      if (emulate) return false;
      if (flags & (AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)) {
        int fd = target(at ? 0 : -1, at ? 1 : 0, false, flags & AT_EMPTY_PATH);
        if (emulate) return false;
        out->ret = fd < 0   ? fd
                   : r2 < 0 ? r2
                            : Errno(::linkat(fd, "", to.dir(), to.name.c_str(), AT_EMPTY_PATH));
        return true;
      }
      ParentAndName from;
      int r1 = entry(at ? 0 : -1, at ? 1 : 0, &from);
      if (emulate) return false;
      out->ret = r1 < 0 ? r1
                 : r2 < 0
                     ? r2
                     : Errno(::linkat(from.dir(), from.name.c_str(), to.dir(), to.name.c_str(), 0));
      return true;
    }
    case sysno::mknod:
    case sysno::mknodat: {
      // A FIFO, a socket's name or a regular file is made; a device never is (emulated, and
      // named in the summary).
      bool at = nr == sysno::mknodat;
      mode_t mode = static_cast<mode_t>(at ? a[2] : a[1]);
      mode_t type = mode & S_IFMT;
      if (type != 0 && type != S_IFREG && type != S_IFIFO && type != S_IFSOCK) return false;
      ParentAndName pn;
      int r = entry(at ? 0 : -1, at ? 1 : 0, &pn);
      if (emulate) return false;
      mode_t perm = static_cast<mode_t>(Withhold(mode & 07777, out)) & ~proc.umask();
      if (type == S_IFIFO) sandbox_.SetMayHoldFifos(true);  // before it exists
      out->ret = r < 0 ? r : Errno(::mknodat(pn.dir(), pn.name.c_str(), type | perm, 0));
      return true;
    }
    case sysno::setxattr:
    case sysno::lsetxattr:
    case sysno::removexattr:
    case sysno::lremovexattr: {
      // cp -a gives a copied directory its mode through system.posix_acl_access on its path.
      bool l = nr == sysno::lsetxattr || nr == sysno::lremovexattr;
      bool set = nr == sysno::setxattr || nr == sysno::lsetxattr;
      std::string xname;
      const CapturedBuffer* value = nullptr;
      if (!XattrArgs(ev, set, &xname, &value)) return false;
      int fd = target(-1, 0, l, false);
      if (emulate) return false;
      if (fd < 0) {
        out->ret = fd;
        return true;
      }
      // An O_PATH fd takes no xattr call, but its /proc/self/fd link reaches the same inode.
      // A symlink's own xattrs (lsetxattr on one) cannot be reached so: emulated.
      struct stat st;
      if (::fstat(fd, &st) != 0 || S_ISLNK(st.st_mode)) return false;
      std::string via = fmt::format("/proc/self/fd/{}", fd);
      out->ret = set ? Errno(::setxattr(via.c_str(), xname.c_str(),
                                        a[3] > 0 ? value->View().data() : nullptr,
                                        static_cast<size_t>(a[3]), static_cast<int>(a[4])))
                     : Errno(::removexattr(via.c_str(), xname.c_str()));
      return true;
    }
    case sysno::symlink:
    case sysno::symlinkat: {
      bool at = nr == sysno::symlinkat;
      const CapturedBuffer* tb = FindBuffer(ev, 0);
      if (!tb || tb->not_captured || tb->truncated) return false;
      // The link's text is stored as recorded, wherever it points: resolving it later goes
      // through the sandbox like every other path.
      std::string text = CapturedString(tb);
      ParentAndName pn;
      int r = entry(at ? 1 : -1, at ? 2 : 1, &pn);
      if (emulate) return false;
      out->ret = r < 0 ? r : Errno(::symlinkat(text.c_str(), pn.dir(), pn.name.c_str()));
      return true;
    }
    default:
      return false;
  }
}

bool Executor::FastStat(const std::string& path, bool nofollow, bool is_statx,
                        const SyscallEvent& ev, Outcome* out) {
  if (path.empty() || path.back() == '/') return false;
  ParentAndName pn;
  if (sandbox_.Parent(path, &pn, &cache_) != 0) return false;
  if (is_statx) {
    struct statx stx;
    int sync = static_cast<int>(ev.args[2]) & AT_STATX_SYNC_TYPE;
    int64_t r = Errno(::statx(pn.dir(), pn.name.c_str(), AT_SYMLINK_NOFOLLOW | sync,
                              static_cast<unsigned>(ev.args[3]), &stx));
    if (r == 0 && !nofollow && S_ISLNK(stx.stx_mode)) return false;
    out->ret = r;
    if (options_.verify && r == 0 && !Failed(ev.ret)) {
      if (const CapturedBuffer* b = FindBuffer(ev, 4, 0, BufferDir::kOut)) {
        out->data_mismatch = CompareStatx(*b, stx, options_.prepared, &out->as_prepared);
      }
    }
    return true;
  }
  struct stat st;
  int64_t r = Errno(::fstatat(pn.dir(), pn.name.c_str(), &st, AT_SYMLINK_NOFOLLOW));
  if (r == 0 && !nofollow && S_ISLNK(st.st_mode)) return false;
  out->ret = r;
  int buf_arg = ev.nr == sysno::newfstatat ? 2 : 1;
  if (options_.verify && r == 0 && !Failed(ev.ret)) {
    if (const CapturedBuffer* b = FindBuffer(ev, buf_arg, 0, BufferDir::kOut)) {
      out->data_mismatch = CompareStat(*b, st, options_.prepared, &out->as_prepared);
    }
  }
  return true;
}

int Executor::FastOpen(const std::string& path, uint64_t flags, uint64_t mode, bool* fallback) {
  *fallback = true;
  if (path.empty() || path.back() == '/' || (flags & O_PATH)) return -EINVAL;
  ParentAndName pn;
  if (sandbox_.Parent(path, &pn, &cache_) != 0) return -EINVAL;
  int fd = ::openat(pn.dir(), pn.name.c_str(), static_cast<int>(flags | O_NOFOLLOW | O_CLOEXEC),
                    static_cast<mode_t>(mode));
  int r = fd < 0 ? -errno : fd;
  // ELOOP: the name is a symlink, to be followed through openat2 (unless the call said not to).
  *fallback = r == -ELOOP && !(flags & O_NOFOLLOW);
  return r;
}

}  // namespace fay::replay
