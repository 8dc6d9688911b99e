#include "engine/offline/fd_paths.h"

#include <fcntl.h>

#include <cstring>

#include "schema/syscall_table.h"

namespace fay {
namespace {

constexpr int64_t kAtFdcwd = AT_FDCWD;

bool Failed(const SyscallEvent& ev) {
  return (ev.flags & kEventNoExit) || (ev.ret < 0 && ev.ret >= -4095);
}

// The first argument the table types as a plain descriptor, or -1.
int FdArg(int nr) {
  const SyscallSignature& sig = Signature(nr);
  for (int i = 0; i < sig.nargs && i < 6; ++i)
    if (sig.args[i].type == ArgType::kFd) return i;
  return -1;
}

}  // namespace

std::string_view CapturedString(const SyscallEvent& ev, int arg) {
  for (const CapturedBuffer& b : ev.buffers) {
    if (b.arg != arg || b.sub != 0 || b.dir != BufferDir::kIn) continue;
    const char* p = reinterpret_cast<const char*>(b.bytes.data());
    return std::string_view(p, strnlen(p, b.bytes.size()));
  }
  return {};
}

void FdPaths::SetCwd(int32_t pid, std::string cwd) {
  procs_[pid].cwd = std::move(cwd);
}

std::string FdPaths::Resolve(const Proc& p, int64_t dirfd, std::string_view path) const {
  if (path.empty() || path[0] == '/') return std::string(path);
  const std::string* base = &p.cwd;
  if (dirfd != kAtFdcwd) {
    auto it = p.fds.find(dirfd);
    base = it == p.fds.end() ? nullptr : &it->second;
  }
  // A directory we cannot name leaves the path as the call spelled it.
  if (!base || base->empty()) return std::string(path);
  if (path == ".") return *base;
  std::string out = *base;
  if (out.back() != '/') out += '/';
  out.append(path);
  return out;
}

std::string_view FdPaths::Apply(const SyscallEvent& ev) {
  Proc& p = procs_[ev.pid];
  current_.clear();
  const auto fd_arg = [&](int i) { return static_cast<int64_t>(static_cast<int32_t>(ev.args[i])); };
  const bool ok = !Failed(ev);
  switch (ev.nr) {
    case sysno::open:
    case sysno::creat:
      current_ = Resolve(p, kAtFdcwd, CapturedString(ev, 0));
      if (ok) p.fds[ev.ret] = current_;
      return current_;
    case sysno::openat:
    case sysno::openat2:
      current_ = Resolve(p, fd_arg(0), CapturedString(ev, 1));
      if (ok) p.fds[ev.ret] = current_;
      return current_;
    case sysno::chdir:
      current_ = Resolve(p, kAtFdcwd, CapturedString(ev, 0));
      if (ok) p.cwd = current_;
      return current_;
    default:
      break;
  }
  int arg = FdArg(ev.nr);
  if (arg >= 0) {
    auto it = p.fds.find(fd_arg(arg));
    if (it != p.fds.end()) current_ = it->second;
  }
  if (!ok) return current_;
  switch (ev.nr) {
    case sysno::close:
      p.fds.erase(fd_arg(0));
      break;
    case sysno::dup:
      if (!current_.empty()) p.fds[ev.ret] = current_;
      break;
    case sysno::dup2:
    case sysno::dup3:
      if (current_.empty())
        p.fds.erase(fd_arg(1));
      else
        p.fds[fd_arg(1)] = current_;
      break;
    case sysno::fcntl:
      if ((ev.args[1] == F_DUPFD || ev.args[1] == F_DUPFD_CLOEXEC) && !current_.empty())
        p.fds[ev.ret] = current_;
      break;
    case sysno::fchdir:
      if (!current_.empty()) p.cwd = current_;
      break;
    default:
      break;
  }
  return current_;
}

void FdPaths::OnProcess(const ProcessEvent& ev) {
  switch (ev.kind) {
    case ProcessEventKind::kFork:
      // A thread shares its process's table (same pid key); a new process starts with a copy.
      if (!ev.is_thread && ev.pid != ev.parent_pid) {
        auto it = procs_.find(ev.parent_pid);
        if (it != procs_.end()) procs_[ev.pid] = it->second;
      }
      break;
    case ProcessEventKind::kExit:
      if (ev.pid == ev.tid) procs_.erase(ev.pid);
      break;
    case ProcessEventKind::kExec:
    case ProcessEventKind::kSignal:
      break;
  }
}

}  // namespace fay
