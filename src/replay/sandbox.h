// The replay sandbox: the one place where a recorded path becomes a live file. Every path is
// resolved by openat2(2) with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS relative to the root
// directory's fd, so "..", absolute paths and symlinks (absolute or relative) all stay beneath
// the root: the kernel clamps them there, not a string check of ours.
//
// Paths handed in are root-relative strings, already joined with the process's working
// directory or the dirfd's path ("/tmp/x" + "/" + "../y"); the kernel does the rest. Calls that
// act on a name in a directory (mkdir, unlink, rename...) resolve the parent the same way and
// then name the last component relative to that parent's fd, never following it; calls that
// follow the last component (stat, chmod, truncate...) open it O_PATH through openat2 and act on
// that fd with AT_EMPTY_PATH.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace fay::replay {

// A directory fd plus a name in it, for the calls that act on a directory entry. The fd is
// owned here, or borrowed from a ParentCache.
struct ParentAndName {
  UniqueFd owned;
  int fd = -1;
  std::string name;
  int dir() const { return fd; }
};

// One worker's cache of parent-directory fds by (root-relative) path, so a run of calls in one
// directory resolves it once. Every rename, unlink and rmdir anywhere bumps a generation shared
// by all workers; a worker that sees another's bump drops its cache, and after its own it drops
// only the entries at or below the changed path. A stale entry could only ever name a directory
// inside the root: the cache trades nothing of the sandbox, only work.
class ParentCache {
 public:
  explicit ParentCache(std::atomic<uint64_t>* generation) : generation_(generation) {}
  int Find(const std::string& parent);
  int Put(const std::string& parent, UniqueFd fd);
  // After this worker removed or renamed path.
  void Changed(const std::string& path);
  // Between calls: closes the fds dropped during the last one. A call may hold two borrowed
  // fds (rename), so none is closed while a call could still be using it.
  void EndOfCall() { retired_.clear(); }

 private:
  void Retire();  // drops every entry

  std::atomic<uint64_t>* generation_;
  uint64_t seen_ = 0;
  std::unordered_map<std::string, UniqueFd> fds_;
  std::vector<UniqueFd> retired_;
};

class Sandbox {
 public:
  // Opens root (which must be an existing directory) and remembers it.
  static Expected<Sandbox> Open(const std::string& root);

  Sandbox(Sandbox&&) noexcept = default;
  Sandbox& operator=(Sandbox&&) noexcept = default;

  int root_fd() const { return root_.get(); }
  const std::string& root_path() const { return root_path_; }

  // openat2 inside the root. flags/mode as for open(2); resolve adds to RESOLVE_IN_ROOT |
  // RESOLVE_NO_MAGICLINKS (never removes them). Returns the fd or -errno.
  int OpenAt(std::string_view path, uint64_t flags, uint64_t mode, uint64_t resolve = 0) const;
  // An O_PATH fd of path, following the last component unless nofollow. fd or -errno.
  int OpenPath(std::string_view path, bool nofollow) const;
  // Resolves the parent directory of path inside the root and returns it with the last
  // component. -errno when the parent does not resolve. A last component of "." or ".." (which
  // would name the parent itself or the directory above it) is refused with EINVAL: the callers
  // turn that into the error the kernel would give for their call.
  int Parent(std::string_view path, ParentAndName* out, ParentCache* cache = nullptr) const;
  // The generation ParentCaches share.
  std::atomic<uint64_t>* generation() const { return generation_.get(); }
  // Whether the root may hold a FIFO, whose open the replay must not block on (Executor::Open
  // looks before every open then). True unless the caller knows the root started empty; then
  // --prepare and a replayed mknod say when they make one.
  bool MayHoldFifos() const { return fifos_->load(std::memory_order_relaxed); }
  void SetMayHoldFifos(bool may) const { fifos_->store(may, std::memory_order_relaxed); }

  // The root-relative path of a live fd (from /proc/self/fd), "/" for the root itself; empty
  // when the fd is not beneath the root (which cannot happen for fds opened through this class).
  std::string PathOf(int fd) const;

 private:
  Sandbox() = default;
  UniqueFd root_;
  std::string root_path_;
  std::unique_ptr<std::atomic<uint64_t>> generation_ = std::make_unique<std::atomic<uint64_t>>(
      0);  // canonical absolute path of the root, no trailing slash
  std::unique_ptr<std::atomic<bool>> fifos_ = std::make_unique<std::atomic<bool>>(true);
};

// Joins base (root-relative, e.g. the cwd) with path: absolute paths stand alone. No
// normalisation: ".." is left to openat2, which clamps it at the root.
std::string JoinPath(std::string_view base, std::string_view path);

// Lexically normalised form ("/a/./b/../c" -> "/a/c"), clamped at "/". Used only to classify
// paths (is it under /proc?) and by --prepare to name files, never to resolve them.
std::string NormalizePath(std::string_view path);
// Absolute, with no empty, "." or ".." component and no trailing slash: what NormalizePath
// returns unchanged, as nearly every path a program passes is.
bool IsNormalPath(std::string_view path);

}  // namespace fay::replay
