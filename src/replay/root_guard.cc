#include "replay/root_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <fmt/core.h>

namespace fay::replay {
namespace {

// What the running system needs: a replay there would change the machine itself.
constexpr const char* kSystemDirs[] = {
    "/",    "/bin",  "/boot", "/dev", "/etc",  "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/opt", "/proc", "/root", "/run", "/sbin", "/srv",  "/sys", "/usr",   "/var",
};

// The user's home directories (fay's, and the one sudo came from) and every directory above them.
std::vector<std::string> HomesAndAbove() {
  std::vector<std::string> homes;
  if (const char* h = std::getenv("HOME"); h && *h == '/') homes.emplace_back(h);
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) homes.emplace_back(pw->pw_dir);
  if (const char* u = std::getenv("SUDO_USER"); u && *u) {
    if (const passwd* pw = ::getpwnam(u); pw && pw->pw_dir) homes.emplace_back(pw->pw_dir);
  }
  std::vector<std::string> out;
  for (std::string h : homes) {
    h = NormalizePath(h);
    while (h.size() > 1) {
      out.push_back(h);
      h.resize(h.rfind('/'));
    }
  }
  return out;
}

std::string Fix() {
  return "give an empty directory instead, e.g. --root \"$(mktemp -d)\"";
}

}  // namespace

Expected<RootVerdict> CheckRoot(const Sandbox& sandbox, const std::string& given,
                                bool allow_nonempty) {
  struct stat root;
  if (::fstat(sandbox.root_fd(), &root) != 0) return ErrnoError("--root " + given);
  std::string where = sandbox.root_path().empty() ? "/" : sandbox.root_path();
  auto same = [&](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && st.st_dev == root.st_dev && st.st_ino == root.st_ino;
  };
  auto refuse = [&](const std::string& what, const std::string& why) {
    return Error(Code::kInvalidArgument,
                 fmt::format("--root {}: refused: {} {} ({}), where the trace's creates, unlinks, "
                             "renames and truncations would run for real, and no flag allows "
                             "that; {}",
                             given, given == what ? "it is" : "it resolves to", what, why, Fix()));
  };
  if (same("/")) {
    return refuse("/", "the machine's own file system");
  }
  for (const char* dir : kSystemDirs) {
    if (same(dir)) return refuse(dir, "the running system needs it");
  }
  for (const std::string& dir : HomesAndAbove()) {
    if (same(dir)) return refuse(dir, "a home directory or one above it");
  }

  int fd = ::openat(sandbox.root_fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("--root " + given + ": list it");
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return ErrnoError("--root " + given + ": list it");
  }
  uint64_t entries = 0;
  bool marked = false;
  std::string example;
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    ++entries;
    if (name == kRootMarker) {
      struct stat st;
      marked =
          ::fstatat(::dirfd(d), kRootMarker, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    } else if (example.empty()) {
      example = std::string(name);
    }
  }
  ::closedir(d);
  if (entries == 0 || marked) return RootVerdict{true, entries == 0};
  if (allow_nonempty) return RootVerdict{false, false};
  return Error(Code::kInvalidArgument,
               fmt::format("--root {}: refused: it is not empty ({} entr{}, such as '{}') and has "
                           "no {}, the mark fay replay leaves in a root it replayed into; the "
                           "trace's creates, unlinks, renames and truncations would change what is "
                           "in it. Give an empty directory (e.g. --root \"$(mktemp -d)\"), or pass "
                           "--allow-nonempty-root to replay into it anyway",
                           given, entries, entries == 1 ? "y" : "ies", example, kRootMarker));
}

Status MarkRoot(const Sandbox& sandbox) {
  int fd = ::openat(sandbox.root_fd(), kRootMarker,
                    O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_APPEND, 0644);
  if (fd < 0) return ErrnoError(std::string("create ") + kRootMarker);
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size == 0) {
    static constexpr std::string_view kText =
        "fay replay made this tree: a later `fay replay --root` here is accepted.\n";
    if (::write(fd, kText.data(), kText.size()) < 0) {
      int e = errno;
      ::close(fd);
      return ErrnoError(std::string("write ") + kRootMarker, e);
    }
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace fay::replay
