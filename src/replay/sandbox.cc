#include "replay/sandbox.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace fay::replay {
namespace {

constexpr uint64_t kAlwaysResolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

int Openat2(int dirfd, const std::string& path, uint64_t flags, uint64_t mode, uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.mode = mode;
  how.resolve = resolve;
  long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how));
  return fd < 0 ? -errno : static_cast<int>(fd);
}

}  // namespace

Expected<Sandbox> Sandbox::Open(const std::string& root) {
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR)
      return Error(Code::kInvalidArgument, "--root " + root + ": not a directory");
    return ErrnoError("--root " + root);
  }
  Sandbox s;
  s.root_.reset(fd);
  char buf[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return ErrnoError("readlink " + link);
  s.root_path_.assign(buf, static_cast<size_t>(n));
  if (s.root_path_ == "/") s.root_path_.clear();
  // openat2 must exist: without it there is no safe resolution, and replay must not fall back.
  int probe = Openat2(fd, ".", O_PATH | O_CLOEXEC, 0, kAlwaysResolve);
  if (probe < 0) {
    return Error(Code::kUnsupported,
                 "openat2 with RESOLVE_IN_ROOT is unavailable (" + std::string(strerror(-probe)) +
                     "): fay replay needs Linux 5.6 or later to keep paths inside --root");
  }
  ::close(probe);
  return s;
}

int Sandbox::OpenAt(std::string_view path, uint64_t flags, uint64_t mode, uint64_t resolve) const {
  if (path.empty()) return -ENOENT;
  return Openat2(root_.get(), std::string(path), flags | O_CLOEXEC, mode, resolve | kAlwaysResolve);
}

int Sandbox::OpenPath(std::string_view path, bool nofollow) const {
  return OpenAt(path, O_PATH | (nofollow ? O_NOFOLLOW : 0), 0);
}

int Sandbox::Parent(std::string_view path, ParentAndName* out, ParentCache* cache) const {
  if (path.empty()) return -ENOENT;
  std::string p(path);
  // "a/b/" names b: trailing slashes do not make an empty last component.
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  std::string parent = slash == std::string::npos ? "." : p.substr(0, slash);
  if (parent.empty()) parent = "/";
  std::string name = slash == std::string::npos ? p : p.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return -EINVAL;
  out->name = std::move(name);
  if (cache) {
    int fd = cache->Find(parent);
    if (fd >= 0) {
      out->fd = fd;
      return 0;
    }
  }
  int fd = OpenAt(parent, O_PATH | O_DIRECTORY, 0);
  if (fd < 0) return fd;
  if (cache) {
    out->fd = cache->Put(parent, UniqueFd(fd));
  } else {
    out->owned.reset(fd);
    out->fd = fd;
  }
  return 0;
}

int ParentCache::Find(const std::string& parent) {
  uint64_t now = generation_->load(std::memory_order_acquire);
  if (now != seen_) {
    Retire();
    seen_ = now;
    return -1;
  }
  auto it = fds_.find(parent);
  return it == fds_.end() ? -1 : it->second.get();
}

int ParentCache::Put(const std::string& parent, UniqueFd fd) {
  constexpr size_t kMaxEntries = 256;
  if (fds_.size() >= kMaxEntries) Retire();
  int raw = fd.get();
  fds_[parent] = std::move(fd);
  return raw;
}

void ParentCache::Retire() {
  for (auto& kv : fds_) retired_.push_back(std::move(kv.second));
  fds_.clear();
}

void ParentCache::Changed(const std::string& path) {
  uint64_t before = generation_->fetch_add(1, std::memory_order_acq_rel);
  if (before != seen_) {
    Retire();  // another worker changed something too
  } else {
    std::string norm = NormalizePath(path);
    for (auto it = fds_.begin(); it != fds_.end();) {
      // A key spelt with ".." may reach the changed path in a way no prefix shows.
      std::string k = NormalizePath(it->first);
      bool drop = it->first.find("..") != std::string::npos || k == norm ||
                  (k.size() > norm.size() && k.compare(0, norm.size(), norm) == 0 &&
                   (norm == "/" || k[norm.size()] == '/'));
      if (drop) {
        retired_.push_back(std::move(it->second));
        it = fds_.erase(it);
      } else {
        ++it;
      }
    }
  }
  seen_ = before + 1;
}

std::string Sandbox::PathOf(int fd) const {
  char buf[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  std::string p(buf, static_cast<size_t>(n));
  if (p == root_path_ || (root_path_.empty() && p == "/")) return "/";
  if (p.size() > root_path_.size() && p.compare(0, root_path_.size(), root_path_) == 0 &&
      p[root_path_.size()] == '/') {
    return p.substr(root_path_.size());
  }
  return {};
}

std::string JoinPath(std::string_view base, std::string_view path) {
  if (!path.empty() && path.front() == '/') return std::string(path);
  std::string out(base.empty() ? "/" : base);
  if (path.empty()) return out;
  if (out.back() != '/') out += '/';
  out += path;
  return out;
}

bool IsNormalPath(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path.size() == 1) return true;
  if (path.back() == '/') return false;
  for (size_t i = path.find('/'); i != std::string_view::npos; i = path.find('/', i + 1)) {
    std::string_view rest = path.substr(i + 1);
    if (rest.empty() || rest.front() == '/') return false;
    if (rest.front() == '.' && (rest.size() == 1 || rest[1] == '/' ||
                                (rest[1] == '.' && (rest.size() == 2 || rest[2] == '/'))))
      return false;
  }
  return true;
}

std::string NormalizePath(std::string_view path) {
  if (IsNormalPath(path)) return std::string(path);
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view c = path.substr(i, j - i);
    if (c == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!c.empty() && c != ".") {
      parts.push_back(c);
    }
    i = j + 1;
  }
  std::string out;
  for (std::string_view c : parts) {
    out += '/';
    out += c;
  }
  return out.empty() ? "/" : out;
}

}  // namespace fay::replay
