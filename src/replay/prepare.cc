#include "replay/prepare.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/core.h>

#include "replay/executor.h"
#include "schema/syscall_table.h"
#include "schema/syscall_values.h"

namespace fay::replay {
namespace {

// Where --prepare keeps the extra hard links of files recorded with st_nlink > 1.
constexpr const char* kLinkDir = "/.fay-prepare-links";

enum class State : uint8_t { kUnknown, kPre, kAbsent };
enum class Kind : uint8_t { kUnknown, kFile, kDir, kSymlink };

struct Node {
  State state = State::kUnknown;
  Kind kind = Kind::kUnknown;
  bool tentative = false;  // O_CREAT open of an unknown path: created, unless it held data
  bool modified = false;   // the trace changed it: later observations say nothing of the start
  // For the end-state check (ChangedPath): the trace changed it in any way, it emptied it
  // (O_TRUNC, a truncate to 0), set its mode, and, for a rename or link target, whether what
  // came there had contents and a mode the trace determines.
  bool changed = false;
  bool emptied = false;
  bool mode_set = false;
  bool borrowed = false;       // a rename or link target: its own state is its source's
  bool was_tentative = false;  // an O_CREAT open may have found it there: its start is unknown
  bool xattr_set = false;
  bool mapped_shared = false;  // mapped MAP_SHARED with PROT_WRITE: written through memory
  bool borrowed_content = false, borrowed_mode = false;
  // Byte ranges [first, second) the trace wrote in place (write or pwrite at a known offset,
  // nothing truncated or replaced): outside them, later reads still show the original bytes,
  // and a later stat its original type, mode and owner (sqlite, dd conv=notrunc).
  // Disjoint and merged, start -> end: a database writes pages by the hundred thousand.
  std::map<uint64_t, uint64_t> written;
  void Wrote(uint64_t from, uint64_t to) {
    if (from >= to) return;
    auto it = written.upper_bound(from);
    if (it != written.begin() && std::prev(it)->second >= from) --it;
    while (it != written.end() && it->first <= to) {
      from = std::min(from, it->first);
      to = std::max(to, it->second);
      it = written.erase(it);
    }
    written.emplace(from, to);
  }
  uint64_t WrittenEnd() const { return written.empty() ? 0 : written.rbegin()->second; }
  bool Overlaps(uint64_t from, uint64_t to) const {
    auto it = written.upper_bound(from);
    if (it != written.begin() && std::prev(it)->second > from) return true;
    return it != written.end() && it->first < to;
  }
  // The parts of [from, to) the trace did not write, in order.
  std::vector<std::pair<uint64_t, uint64_t>> Unwritten(uint64_t from, uint64_t to) const {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    auto it = written.upper_bound(from);
    if (it != written.begin()) --it;
    for (; it != written.end() && it->first < to && from < to; ++it) {
      if (it->second <= from) continue;
      if (it->first > from) out.emplace_back(from, it->first);
      from = std::max(from, it->second);
    }
    if (from < to) out.emplace_back(from, to);
    return out;
  }
  bool have_stat = false;
  bool executable = false;  // access(X_OK) found it so: a mode no stat result gave
  uint32_t mode = 0;
  uint32_t uid = 0, gid = 0;
  uint64_t size = 0;
  uint64_t nlink = 1;
  uint64_t data_end = 0;  // end of the furthest byte read
  // Offset -> bytes read there; the bytes stay in the schedule, which outlives Prepare, or, for
  // a lazy schedule, in the trace (`stored`).
  struct Piece {
    std::span<const uint8_t> bytes;
    std::optional<StoredBlob> stored;
    // The part of the buffer this piece is: a read over bytes the trace wrote in place keeps
    // only what lies around them.
    uint64_t skip = 0;
    uint64_t len = 0;
    uint64_t size() const { return len; }
  };
  std::map<uint64_t, Piece> content;
  std::string target;  // symlink
};

struct FileRef {
  std::string path;
  uint64_t offset = 0;
  bool append = false;  // O_APPEND: where a write lands is not known here
};

struct Proc {
  std::string cwd = "/";
  std::unordered_map<int, std::shared_ptr<FileRef>> fds;
};

bool Failed(int64_t ret) {
  return ret < 0 && ret >= -4095;
}

// Writes each run of back-to-back pieces with one pwritev: a file read in 4 KiB calls is a
// quarter of a million pieces per gigabyte. Pieces that overlap or leave a gap start a new run,
// so later offsets still land over earlier ones as they would one write at a time.
// Pieces a lazy schedule left in the trace are fetched a run at a time, and held while written.
Status WriteContent(int fd, const std::map<uint64_t, Node::Piece>& content, BlobFetcher* fetcher,
                    uint64_t* written) {
  constexpr size_t kMaxIov = 1024;  // IOV_MAX on Linux
  std::vector<iovec> iov;
  std::vector<CapturedBuffer::SharedBytes> held;
  auto it = content.begin();
  while (it != content.end()) {
    uint64_t start = it->first, end = start;
    iov.clear();
    held.clear();
    for (; it != content.end() && it->first == end && iov.size() < kMaxIov; ++it) {
      std::span<const uint8_t> bytes = it->second.bytes;
      if (it->second.stored) {
        if (!fetcher) return Error(Code::kInternal, "--prepare: no reader for the trace's data");
        CapturedBuffer ref;
        ref.stored = it->second.stored;
        FAY_RETURN_IF_ERROR(fetcher->Fetch(ref, &held.emplace_back()));
        bytes = std::span<const uint8_t>(held.back().data.get(), held.back().size);
      }
      if (it->second.skip + it->second.len > bytes.size())
        return Error(Code::kInternal, "--prepare: a piece lies outside its buffer");
      bytes = bytes.subspan(it->second.skip, it->second.len);
      iov.push_back({const_cast<uint8_t*>(bytes.data()), bytes.size()});
      end += bytes.size();
    }
    // A short write (a signal, a full disk) continues where it stopped.
    size_t first = 0;
    uint64_t at = start;
    while (first < iov.size()) {
      ssize_t n = ::pwritev(fd, iov.data() + first, static_cast<int>(iov.size() - first),
                            static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("pwritev");
      if (n == 0) return Error(Code::kIo, "pwritev wrote nothing");
      at += static_cast<uint64_t>(n);
      *written += static_cast<uint64_t>(n);
      for (size_t left = static_cast<size_t>(n); left > 0 && first < iov.size();) {
        size_t take = std::min(left, iov[first].iov_len);
        iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + take;
        iov[first].iov_len -= take;
        left -= take;
        if (iov[first].iov_len == 0) ++first;
      }
    }
  }
  return Status::Ok();
}

// Every directory above a path that existed existed too.
void MarkParents(std::unordered_map<std::string, Node>& nodes, const std::string& path) {
  std::string p = path;
  while (true) {
    size_t slash = p.rfind('/');
    if (slash == std::string::npos || slash == 0) return;
    p.resize(slash);
    Node& n = nodes[p];
    // Once a directory is known to have existed, so are its ancestors (marked with it).
    if (n.state == State::kPre && n.kind == Kind::kDir) return;
    if (n.state == State::kUnknown) n.state = State::kPre;
    if (n.kind == Kind::kUnknown || n.kind == Kind::kFile) n.kind = Kind::kDir;
  }
}

Kind KindOfMode(uint32_t mode) {
  if (S_ISDIR(mode)) return Kind::kDir;
  if (S_ISLNK(mode)) return Kind::kSymlink;
  return Kind::kFile;
}

// The flags of an open, openat, creat or openat2 call (openat2's from its struct open_how).
uint64_t OpenFlags(const SyscallEvent& ev) {
  const auto& a = ev.args;
  uint64_t flags = ev.nr == sysno::open ? a[1] : ev.nr == sysno::openat ? a[2] : 0;
  if (ev.nr == sysno::creat) flags = O_CREAT | O_TRUNC | O_WRONLY;
  if (ev.nr == sysno::openat2) {
    const CapturedBuffer* how = FindBuffer(ev, 2);
    if (how && how->View().size() >= 8) std::memcpy(&flags, how->View().data(), 8);
  }
  return flags;
}

// Whether a call follows a symlink in its path's last component (the man pages' "does not
// dereference" list, and the flags that say so).
bool FollowsLast(const SyscallEvent& ev) {
  const auto& a = ev.args;
  switch (ev.nr) {
    case sysno::lstat:
    case sysno::readlink:
    case sysno::readlinkat:
    case sysno::unlink:
    case sysno::unlinkat:
    case sysno::rmdir:
    case sysno::rename:
    case sysno::renameat:
    case sysno::renameat2:
    case sysno::link:
    case sysno::symlink:
    case sysno::symlinkat:
    case sysno::mknod:
    case sysno::mknodat:
    case sysno::mkdir:
    case sysno::mkdirat:
    case sysno::lchown:
    case sysno::lgetxattr:
    case sysno::lsetxattr:
    case sysno::llistxattr:
    case sysno::lremovexattr:
      return false;
    case sysno::newfstatat:
    case sysno::fchmodat2:
    case sysno::faccessat2:
    case sysno::utimensat:
      return !(a[3] & AT_SYMLINK_NOFOLLOW);
    case sysno::statx:
      return !(a[2] & AT_SYMLINK_NOFOLLOW);
    case sysno::fchownat:
    case sysno::execveat:
      return !(a[4] & AT_SYMLINK_NOFOLLOW);
    case sysno::linkat:
      return (a[4] & AT_SYMLINK_FOLLOW) != 0;
    case sysno::open:
    case sysno::openat:
    case sysno::creat:
    case sysno::openat2: {
      uint64_t flags = OpenFlags(ev);
      return !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL));
    }
    default:
      return true;
  }
}

class Simulator {
 public:
  // `parent_of` (pid -> parent, from fork events) may be null: a trace of one thread forks no
  // process that makes calls.
  // `follow_all_clones`: a live recording's calls, whose fork events are not known up front:
  // every successful clone copies the parent's descriptors and directory to the new id (a
  // thread's copy is never used: its calls name its process).
  Simulator(std::string cwd, const std::map<int32_t, int32_t>* parent_of,
            bool follow_all_clones = false)
      : cwd_(cwd.empty() ? std::string() : NormalizePath(cwd)),
        parent_of_(parent_of),
        follow_all_clones_(follow_all_clones) {
    if (!cwd_.empty()) Parents(cwd_ + "/x");
  }

  // The symlinks the recorder met (trace::EndState::symlinks), before the walk: a path through
  // one is the path it leads to, and the link itself a pre-existing symlink.
  void SetMetSymlinks(std::unordered_map<std::string, std::string> met) { met_ = std::move(met); }
  // The normalised absolute path of a path argument, as it was named (no link resolved).
  std::string NamedPath(const SyscallEvent& ev, int path_arg, int dirfd_arg) {
    bool was = resolving_;
    resolving_ = false;
    std::string p = PathOf(ev, path_arg, dirfd_arg);
    resolving_ = was;
    return p;
  }
  // Whether the trace made path (it was absent when the walk first met it).
  bool CreatedByTrace(const std::string& path) const {
    auto it = nodes_.find(path);
    return it != nodes_.end() && it->second.state == State::kAbsent;
  }
  // What a live recording's fd is, for ChangeTracker::FileOf.
  bool FileOf(int32_t pid, int fd, std::string* path, uint64_t* offset) const {
    auto p = procs_.find(pid);
    if (p == procs_.end()) return false;
    auto f = p->second.fds.find(fd);
    if (f == p->second.fds.end() || f->second->append) return false;
    *path = f->second->path;
    *offset = f->second->offset;
    return true;
  }

  // The calls in recorded start order.
  void Run(CallStream& calls) {
    while (const SyscallEvent* ev = calls.Next()) Call(*ev);
  }
  // One call; what it touched is in touched() until the next.
  void Call(const SyscallEvent& ev);
  // The paths the trace changed, with what of their end state the trace determines.
  std::vector<ChangedPath> Changed() const;
  std::unordered_map<std::string, Node>& nodes() { return nodes_; }

  // The paths the last call looked up, with their nodes (stable: the map is node-based).
  const std::vector<std::pair<const std::string*, Node*>>& touched() const { return touched_; }
  // The last call named a path the walk could not follow (not captured, an unknown dirfd, the
  // root itself): what it touches is unknown.
  bool unresolved() const { return unresolved_; }

 private:
  Node& Touch(const std::string& path) {
    auto it = nodes_.try_emplace(path).first;
    touched_.emplace_back(&it->first, &it->second);
    return it->second;
  }
  Node* TouchFind(const std::string& path) {
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return nullptr;
    touched_.emplace_back(&it->first, &it->second);
    return &it->second;
  }
  // A process first seen starts in the recording's working directory.
  Proc& P(int32_t pid) {
    auto [it, fresh] = procs_.try_emplace(pid);
    if (fresh && !cwd_.empty()) it->second.cwd = cwd_;
    return it->second;
  }
  // Normalised absolute path of a path argument, "" when unknown or virtual.
  std::string PathOf(const SyscallEvent& ev, int path_arg, int dirfd_arg);
  Node& Observe(const std::string& path, bool exists, Kind kind = Kind::kUnknown);
  void Created(const std::string& path, Kind kind);
  void Parents(const std::string& path);
  void StatResult(Node& n, const CapturedBuffer* b, bool statx);
  void Effect(const SyscallEvent& ev);
  void NoteChange(const SyscallEvent& ev);
  // buf_arg: where the bytes are, the buffer of a read (1), or, for an in-kernel copy, the
  // source fd's argument, where the recorder keeps what the copy moved.
  void ReadData(const SyscallEvent& ev, FileRef& ref, uint64_t offset, bool advance,
                int buf_arg = 1);

  // Resolves the met symlinks in an absolute normalised path: every component but the last,
  // and the last too when `follow_last`. Each link resolved gets its pre-existing node.
  std::string Resolve(std::string path, bool follow_last);

  std::unordered_map<std::string, std::string> met_;
  bool resolving_ = true;    // PathOf resolves met symlinks (not for NamedPath)
  bool follow_last_ = true;  // the current call follows its path's last component
  std::string cwd_;
  const std::map<int32_t, int32_t>* parent_of_;
  bool follow_all_clones_ = false;
  // Hashed: every path call looks its path up, and a sorted map compared whole paths at every
  // level of the tree (W3's 10,000 files). Prepare sorts the few pre-existing ones at the end.
  std::unordered_map<std::string, Node> nodes_;
  std::unordered_map<int32_t, Proc> procs_;
  std::vector<std::pair<const std::string*, Node*>> touched_;
  bool unresolved_ = false;
};

std::string Simulator::PathOf(const SyscallEvent& ev, int path_arg, int dirfd_arg) {
  const CapturedBuffer* b = FindBuffer(ev, path_arg);
  if (!b || b->not_captured || b->truncated) {
    unresolved_ = true;
    return {};
  }
  std::string_view path = CapturedView(b);
  if (path.empty()) return {};
  std::string base;
  if (path.front() != '/') {
    int dirfd = dirfd_arg < 0 ? AT_FDCWD : static_cast<int>(ev.args[dirfd_arg]);
    Proc& p = P(ev.pid);
    if (dirfd == AT_FDCWD) {
      base = p.cwd;
    } else {
      auto it = p.fds.find(dirfd);
      if (it == p.fds.end()) {
        unresolved_ = true;
        return {};
      }
      base = it->second->path;
    }
  }
  std::string full = NormalizePath(JoinPath(base, path));
  if (IsVirtualPath(full)) return {};
  return resolving_ && !met_.empty() ? Resolve(std::move(full), follow_last_) : full;
}

std::string Simulator::Resolve(std::string path, bool follow_last) {
  // Component by component: a link's target replaces the path up to it, and the walk starts
  // again from the top (a target may hold links itself). 40 links at most, as the kernel.
  for (int links = 0; links < 40;) {
    bool again = false;
    for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
      bool last = end == std::string::npos;
      if (last && !follow_last) return path;
      std::string prefix = path.substr(0, last ? path.size() : end);
      auto m = met_.find(prefix);
      if (m != met_.end()) {
        Node& link = Touch(prefix);
        // Only the link as it was: one the trace made, removed or replaced is the trace's.
        if (link.state == State::kUnknown) link.state = State::kPre;
        if (link.state == State::kPre && !link.modified) {
          link.kind = Kind::kSymlink;
          link.target = m->second;
          Parents(prefix);
          size_t slash = prefix.rfind('/');
          std::string dir = slash == 0 ? "/" : prefix.substr(0, slash);
          std::string to = m->second.front() == '/' ? m->second : JoinPath(dir, m->second);
          path = NormalizePath(last ? to : JoinPath(to, path.substr(end + 1)));
          ++links;
          again = true;
          break;
        }
      }
      if (last) break;
    }
    if (!again) return path;
  }
  return path;
}

void Simulator::Parents(const std::string& path) {
  MarkParents(nodes_, path);
}

Node& Simulator::Observe(const std::string& path, bool exists, Kind kind) {
  Node& n = Touch(path);
  if (n.state == State::kUnknown) n.state = exists ? State::kPre : State::kAbsent;
  if (exists && n.state == State::kPre && !n.modified && n.kind == Kind::kUnknown) n.kind = kind;
  // ENOENT says some component is missing, not which: the parents are known to have existed
  // only from a call that found the path.
  if (exists || n.state == State::kPre) Parents(path);
  return n;
}

void Simulator::Created(const std::string& path, Kind kind) {
  Node& n = Touch(path);
  if (n.state == State::kUnknown) n.state = State::kAbsent;
  n.modified = true;
  Parents(path);
}

void Simulator::StatResult(Node& n, const CapturedBuffer* b, bool statx) {
  if (!b || b->not_captured || n.modified || n.have_stat) return;
  if (n.state != State::kPre && !n.tentative) return;
  if (statx) {
    struct statx st;
    if (b->View().size() < sizeof(st)) return;
    std::memcpy(&st, b->View().data(), sizeof(st));
    n.mode = st.stx_mode;
    n.uid = st.stx_uid;
    n.gid = st.stx_gid;
    n.size = st.stx_size;
    n.nlink = st.stx_nlink;
  } else {
    struct stat st;
    if (b->View().size() < sizeof(st)) return;
    std::memcpy(&st, b->View().data(), sizeof(st));
    n.mode = st.st_mode;
    n.uid = st.st_uid;
    n.gid = st.st_gid;
    n.size = static_cast<uint64_t>(st.st_size);
    n.nlink = st.st_nlink;
  }
  if (n.tentative) {
    // Larger than anything the trace wrote: the file was there, this large.
    if (n.size <= n.WrittenEnd()) return;
    n.state = State::kPre;
    n.tentative = false;
  }
  n.have_stat = true;
  n.kind = KindOfMode(n.mode);
}

void Simulator::ReadData(const SyscallEvent& ev, FileRef& ref, uint64_t offset, bool advance,
                         int buf_arg) {
  if (Failed(ev.ret)) return;
  uint64_t n = static_cast<uint64_t>(ev.ret);
  if (advance) ref.offset += n;
  Node* found = TouchFind(ref.path);
  if (!found) return;
  Node& node = *found;
  // Data the trace did not write itself: the file held it before.
  if (node.tentative && n > 0 && !node.modified && !node.Overlaps(offset, offset + n)) {
    node.state = State::kPre;
    node.tentative = false;
  }
  if (node.state != State::kPre || node.modified) return;
  if (node.kind == Kind::kUnknown) node.kind = Kind::kFile;
  node.data_end = std::max(node.data_end, offset + n);
  // A live recording's walk (ChangeTracker) keeps no content: its events are gone once fed.
  if (follow_all_clones_) return;
  // Element by element for readv: sub 1 + i, laid out back to back.
  uint64_t at = offset;
  for (const CapturedBuffer& b : ev.buffers) {
    if (b.dir != BufferDir::kOut || b.arg != buf_arg || b.not_captured) continue;
    bool vec = ev.nr == sysno::readv || ev.nr == sysno::preadv || ev.nr == sysno::preadv2;
    if (vec && b.sub == 0) continue;
    Node::Piece piece;
    if (b.stored) {
      piece.stored = b.stored;
    } else {
      piece.bytes = b.View();
    }
    // What the trace wrote itself is not the original content: only the bytes around it are.
    for (const auto& [from, to] : node.Unwritten(at, at + b.Size())) {
      piece.skip = from - at;
      piece.len = to - from;
      // Two reads from one offset (cat, then head, of the same file) hold the same bytes: the
      // longer one says more. Replacing it with the shorter left a hole of zeros past it.
      auto [it, fresh] = node.content.try_emplace(from, piece);
      if (!fresh && piece.len > it->second.len) it->second = piece;
    }
    at += b.length;
  }
}

void Simulator::Call(const SyscallEvent& ev) {
  follow_last_ = FollowsLast(ev);
  Effect(ev);
  NoteChange(ev);
}

// What a successful call changed, for the end-state check: the paths and files it names
// itself, never their parents. Runs after Effect, so a created path's node is there.
void Simulator::NoteChange(const SyscallEvent& ev) {
  if (ev.exit_ns == 0 || (ev.flags & kEventNoExit) || Failed(ev.ret)) return;
  const auto& a = ev.args;
  Proc& p = P(ev.pid);
  auto by_fd = [&](uint64_t fd) -> Node* {
    auto it = p.fds.find(static_cast<int>(fd));
    if (it == p.fds.end()) return nullptr;
    auto n = nodes_.find(it->second->path);
    return n == nodes_.end() ? nullptr : &n->second;
  };
  auto by_path = [&](int path_arg, int dirfd_arg) -> Node* {
    std::string path = PathOf(ev, path_arg, dirfd_arg);
    if (path.empty() || path == "/") return nullptr;
    auto n = nodes_.find(path);
    return n == nodes_.end() ? nullptr : &n->second;
  };
  auto mark = [](Node* n) {
    if (n) n->changed = true;
    return n;
  };
  auto borrow = [&](Node* to, const Node* from) {
    if (!to) return;
    to->changed = true;
    to->borrowed = true;
    to->borrowed_content =
        from && ((from->state == State::kAbsent && !from->was_tentative) || from->emptied);
    to->borrowed_mode =
        from && (from->mode_set || (from->state == State::kAbsent && !from->was_tentative));
  };
  switch (ev.nr) {
    case sysno::open:
    case sysno::openat:
    case sysno::creat:
    case sysno::openat2: {
      Node* n = by_fd(static_cast<uint64_t>(ev.ret));
      if (!n) return;
      uint64_t flags = OpenFlags(ev);
      if (n->state == State::kAbsent && (flags & O_CREAT)) n->changed = true;
      if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
        n->changed = n->emptied = true;
      }
      return;
    }
    case sysno::write:
    case sysno::writev:
    case sysno::pwrite64:
    case sysno::pwritev:
    case sysno::pwritev2:
    case sysno::fallocate:
      mark(by_fd(a[0]));
      return;
    case sysno::fsetxattr:
    case sysno::fremovexattr:
      if (Node* n = mark(by_fd(a[0]))) n->xattr_set = true;
      return;
    case sysno::ftruncate:
      if (Node* n = mark(by_fd(a[0])); n && a[1] == 0) n->emptied = true;
      return;
    case sysno::fchmod:
      if (Node* n = mark(by_fd(a[0]))) n->mode_set = true;
      return;
    case sysno::truncate:
      if (Node* n = mark(by_path(0, -1)); n && a[1] == 0) n->emptied = true;
      return;
    case sysno::chmod:
      if (Node* n = mark(by_path(0, -1))) n->mode_set = true;
      return;
    case sysno::fchmodat:
      if (Node* n = mark(by_path(1, 0))) n->mode_set = true;
      return;
    case sysno::setxattr:
    case sysno::lsetxattr:
    case sysno::removexattr:
    case sysno::lremovexattr:
      if (Node* n = mark(by_path(0, -1))) n->xattr_set = true;
      return;
    case sysno::mkdir:
    case sysno::rmdir:
    case sysno::unlink:
    case sysno::symlink:
      mark(by_path(ev.nr == sysno::symlink ? 1 : 0, -1));
      return;
    case sysno::mkdirat:
    case sysno::unlinkat:
      mark(by_path(1, 0));
      return;
    case sysno::symlinkat:
      mark(by_path(2, 1));
      return;
    case sysno::mknod:
      mark(by_path(0, -1));
      return;
    case sysno::mknodat:
      mark(by_path(1, 0));
      return;
    case sysno::copy_file_range:
    case sysno::splice:
      if (ev.ret > 0) mark(by_fd(a[2]));
      return;
    case sysno::sendfile:
      if (ev.ret > 0) mark(by_fd(a[0]));
      return;
    case sysno::ioctl:
      if (a[1] == kFiClone || a[1] == kFiCloneRange) mark(by_fd(a[0]));
      return;
    case sysno::fchmodat2:
      if (Node* n = mark(by_path(1, 0))) n->mode_set = true;
      return;
    case sysno::mmap:
      // a[2] prot, a[3] flags, a[4] fd: a shared writable mapping of a file.
      if ((a[2] & PROT_WRITE) && (a[3] & 0x0f) != MAP_PRIVATE && (a[3] & 0x0f) != 0 &&
          !(a[3] & MAP_ANONYMOUS) && static_cast<int32_t>(a[4]) >= 0)
        if (Node* n = mark(by_fd(a[4]))) n->mapped_shared = true;
      return;
    case sysno::rename:
    case sysno::link: {
      Node* from = by_path(0, -1);
      borrow(by_path(1, -1), from);
      if (ev.nr == sysno::rename) mark(from);
      return;
    }
    case sysno::renameat:
    case sysno::renameat2:
    case sysno::linkat: {
      Node* from = by_path(1, 0);
      borrow(by_path(3, 2), from);
      if (ev.nr != sysno::linkat) mark(from);
      return;
    }
    default:
      return;
  }
}

void Simulator::Effect(const SyscallEvent& ev) {
  touched_.clear();
  unresolved_ = false;
  // A call that did not return may still have acted: its effect is unknown.
  if (ev.exit_ns == 0 || (ev.flags & kEventNoExit)) {
    if (ev.nr != sysno::exit && ev.nr != sysno::exit_group) unresolved_ = true;
    return;
  }
  const auto& a = ev.args;
  Proc& p = P(ev.pid);
  bool ok = !Failed(ev.ret);
  bool enoent = ev.ret == -ENOENT;
  auto fd_ref = [&](int fd) -> FileRef* {
    auto it = p.fds.find(fd);
    return it == p.fds.end() ? nullptr : it->second.get();
  };
  auto node_of = [&](int fd) -> Node* {
    FileRef* r = fd_ref(fd);
    if (!r) return nullptr;
    return TouchFind(r->path);
  };
  auto path_call = [&](int path_arg, int dirfd_arg, Kind kind) -> Node* {
    std::string path = PathOf(ev, path_arg, dirfd_arg);
    if (path == "/") unresolved_ = true;  // the root: it is there, but not the recorded one
    if (path.empty() || path == "/") return nullptr;
    if (!ok && !enoent) return nullptr;
    return &Observe(path, ok, kind);
  };
  switch (ev.nr) {
    case sysno::open:
    case sysno::openat:
    case sysno::creat:
    case sysno::openat2: {
      bool at = ev.nr == sysno::openat || ev.nr == sysno::openat2;
      uint64_t flags = OpenFlags(ev);
      std::string path = PathOf(ev, at ? 1 : 0, at ? 0 : -1);
      if (ok && !Failed(ev.ret)) p.fds.erase(static_cast<int>(ev.ret));
      if (path.empty()) return;
      if (!ok) {
        if (enoent && !(flags & O_CREAT)) Observe(path, false);
        if (ev.ret == -EEXIST) Observe(path, true);
        return;
      }
      Node& n = Touch(path);
      if (n.state == State::kUnknown) {
        if (flags & O_CREAT) {
          n.state = State::kAbsent;
          n.tentative = !(flags & (O_EXCL | O_TRUNC));
          n.was_tentative = n.tentative;
          if (!n.tentative) n.modified = true;
        } else {
          n.state = State::kPre;
          n.kind = (flags & O_DIRECTORY) ? Kind::kDir : Kind::kUnknown;
        }
      }
      Parents(path);
      if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) n.modified = true;
      p.fds[static_cast<int>(ev.ret)] =
          std::make_shared<FileRef>(FileRef{path, 0, (flags & O_APPEND) != 0});
      return;
    }
    case sysno::close:
      p.fds.erase(static_cast<int>(a[0]));
      return;
    case sysno::dup:
    case sysno::dup2:
    case sysno::dup3:
    case sysno::fcntl: {
      if (!ok) return;
      if (ev.nr == sysno::fcntl && a[1] != F_DUPFD && a[1] != F_DUPFD_CLOEXEC) return;
      auto it = p.fds.find(static_cast<int>(a[0]));
      if (it == p.fds.end()) {
        p.fds.erase(static_cast<int>(ev.ret));
      } else {
        auto ref = it->second;
        p.fds[static_cast<int>(ev.ret)] = ref;
      }
      return;
    }
    case sysno::read:
    case sysno::readv:
      if (FileRef* r = fd_ref(static_cast<int>(a[0]))) ReadData(ev, *r, r->offset, true);
      return;
    case sysno::pread64:
    case sysno::preadv:
    case sysno::preadv2:
      if (FileRef* r = fd_ref(static_cast<int>(a[0]))) ReadData(ev, *r, a[3], false);
      return;
    case sysno::write:
    case sysno::writev:
    case sysno::pwrite64:
    case sysno::pwritev:
    case sysno::pwritev2:
    case sysno::ftruncate:
    case sysno::fallocate: {
      FileRef* r = fd_ref(static_cast<int>(a[0]));
      if (!r) return;
      bool positional = ev.nr == sysno::pwrite64 || ev.nr == sysno::pwritev ||
                        (ev.nr == sysno::pwritev2 && static_cast<int64_t>(a[3]) != -1);
      bool sequential = ev.nr == sysno::write || ev.nr == sysno::writev;
      bool sized = ev.nr == sysno::ftruncate || ev.nr == sysno::fallocate;
      if (Node* n = node_of(static_cast<int>(a[0]))) {
        // A file opened with O_CREAT and not yet known to have existed (tentative) may still
        // turn out to have: a later stat larger than what was written, a read past it.
        bool in_place = (positional || sized || (sequential && !r->append)) && !n->modified &&
                        (n->state == State::kPre || n->tentative);
        if (in_place && !ok) {
          // Nothing changed.
        } else if (ev.nr == sysno::ftruncate && in_place) {
          n->Wrote(a[1], UINT64_MAX);  // what lies below the new size is as it was
        } else if (ev.nr == sysno::fallocate && in_place) {
          n->Wrote(a[2], a[2] + a[3]);
        } else if (in_place) {
          uint64_t at = positional ? a[3] : r->offset;
          n->Wrote(at, at + static_cast<uint64_t>(ev.ret));
        } else {
          n->modified = true;
          n->tentative = false;
        }
      }
      if (ok && sequential) r->offset += ev.ret;
      return;
    }
    case sysno::lseek:
      if (FileRef* r = fd_ref(static_cast<int>(a[0])); r && ok) r->offset = ev.ret;
      return;
    case sysno::fstat:
      if (Node* n = node_of(static_cast<int>(a[0])); n && ok) {
        StatResult(*n, FindBuffer(ev, 1, 0, BufferDir::kOut), false);
      }
      return;
    case sysno::stat:
    case sysno::lstat:
      if (Node* n = path_call(0, -1, Kind::kUnknown); n && ok) {
        StatResult(*n, FindBuffer(ev, 1, 0, BufferDir::kOut), false);
      }
      return;
    case sysno::newfstatat:
    case sysno::statx: {
      bool sx = ev.nr == sysno::statx;
      uint64_t flags = sx ? a[2] : a[3];
      const CapturedBuffer* pb = FindBuffer(ev, 1);
      bool empty = a[1] == 0 || (pb && (pb->View().empty() || pb->View()[0] == 0));
      const CapturedBuffer* out = FindBuffer(ev, sx ? 4 : 2, 0, BufferDir::kOut);
      if (empty && (flags & AT_EMPTY_PATH)) {
        if (Node* n = node_of(static_cast<int>(a[0])); n && ok) StatResult(*n, out, sx);
        return;
      }
      if (Node* n = path_call(1, 0, Kind::kUnknown); n && ok) StatResult(*n, out, sx);
      return;
    }
    case sysno::access:
    case sysno::faccessat:
    case sysno::faccessat2: {
      bool at = ev.nr != sysno::access;
      Node* n = path_call(at ? 1 : 0, at ? 0 : -1, Kind::kUnknown);
      if (n && ok && (a[at ? 2 : 1] & X_OK) && n->state == State::kPre && !n->modified)
        n->executable = true;
      return;
    }
    case sysno::truncate:
      if (Node* n = path_call(0, -1, Kind::kFile); n && ok) {
        if (!n->modified && (n->state == State::kPre || n->tentative)) {
          n->Wrote(a[1], UINT64_MAX);  // what lies below the new size is as it was
        } else {
          n->modified = true;
        }
      }
      return;
    case sysno::chmod:
    case sysno::chown:
    case sysno::lchown:
      path_call(0, -1, Kind::kUnknown);
      return;
    case sysno::fchmodat:
    case sysno::fchmodat2:
    case sysno::fchownat:
    case sysno::utimensat:
      if (a[1] != 0) path_call(1, 0, Kind::kUnknown);
      return;
    case sysno::readlink:
    case sysno::readlinkat: {
      bool at = ev.nr == sysno::readlinkat;
      std::string path = PathOf(ev, at ? 1 : 0, at ? 0 : -1);
      if (path.empty()) return;
      if (ok) {
        Node& n = Observe(path, true, Kind::kSymlink);
        const CapturedBuffer* b = FindBuffer(ev, at ? 2 : 1, 0, BufferDir::kOut);
        if (b && n.state == State::kPre && !n.modified && n.target.empty()) {
          n.kind = Kind::kSymlink;
          n.target.assign(b->View().begin(), b->View().end());
        }
      } else if (enoent) {
        Observe(path, false);
      } else if (ev.ret == -EINVAL) {
        Observe(path, true);  // exists, not a symlink
      }
      return;
    }
    case sysno::mkdir:
    case sysno::mkdirat:
    case sysno::mknod:
    case sysno::mknodat: {
      // mknod: a FIFO, socket or regular file the trace made (a device is never replayed).
      bool at = ev.nr == sysno::mkdirat || ev.nr == sysno::mknodat;
      Kind kind = ev.nr == sysno::mkdir || ev.nr == sysno::mkdirat ? Kind::kDir : Kind::kFile;
      std::string path = PathOf(ev, at ? 1 : 0, at ? 0 : -1);
      if (path.empty()) return;
      if (ok) Created(path, kind);
      // EEXIST says something is there; only mkdir's guess of a directory was ever kept.
      if (ev.ret == -EEXIST) Observe(path, true, kind == Kind::kDir ? kind : Kind::kUnknown);
      return;
    }
    case sysno::rmdir:
    case sysno::unlink:
    case sysno::unlinkat: {
      bool at = ev.nr == sysno::unlinkat;
      bool dir = ev.nr == sysno::rmdir || (at && (a[2] & AT_REMOVEDIR));
      if (Node* n = path_call(at ? 1 : 0, at ? 0 : -1, dir ? Kind::kDir : Kind::kFile); n && ok) {
        n->modified = true;
      }
      return;
    }
    case sysno::rename:
    case sysno::renameat:
    case sysno::renameat2: {
      bool at = ev.nr != sysno::rename;
      if (Node* n = path_call(at ? 1 : 0, at ? 0 : -1, Kind::kUnknown); n && ok) n->modified = true;
      std::string to = PathOf(ev, at ? 3 : 1, at ? 2 : -1);
      if (!to.empty() && ok) Created(to, Kind::kUnknown);
      return;
    }
    case sysno::link:
    case sysno::linkat: {
      bool at = ev.nr == sysno::linkat;
      path_call(at ? 1 : 0, at ? 0 : -1, Kind::kFile);
      std::string to = PathOf(ev, at ? 3 : 1, at ? 2 : -1);
      if (!to.empty() && ok) Created(to, Kind::kFile);
      return;
    }
    case sysno::copy_file_range:
    case sysno::sendfile:
    case sysno::splice: {
      // In-kernel copies: the source is read (its data, when the recorder captured it, is the
      // file's as a read's would be), the destination written where the walk cannot follow.
      bool sf = ev.nr == sysno::sendfile;
      int in = static_cast<int>(sf ? a[1] : a[0]), to = static_cast<int>(sf ? a[0] : a[2]);
      uint64_t in_off_ptr = sf ? a[2] : a[1];
      bool out_positional = !sf && a[3] != 0;
      if (FileRef* r = fd_ref(in); r && ok) {
        // Where the source was read from: the offset argument's value before the call, or the
        // fd's own offset, which the call advances.
        uint64_t from = r->offset;
        const CapturedBuffer* off = in_off_ptr ? FindBuffer(ev, sf ? 2 : 1) : nullptr;
        if (off && !off->not_captured && off->View().size() == 8)
          std::memcpy(&from, off->View().data(), 8);
        ReadData(ev, *r, from, in_off_ptr == 0, sf ? 1 : 0);
      }
      if (FileRef* r = fd_ref(to); r && ok && ev.ret > 0) {
        if (Node* n = node_of(to)) {
          n->modified = true;
          n->tentative = false;
        }
        if (!out_positional) r->offset += static_cast<uint64_t>(ev.ret);
      }
      return;
    }
    case sysno::ioctl:
      // A reflink (cp --reflink, cp -a on btrfs or XFS) replaces the destination's data.
      if (ok && (a[1] == kFiClone || a[1] == kFiCloneRange)) {
        if (Node* n = node_of(static_cast<int>(a[0]))) {
          n->modified = true;
          n->tentative = false;
        }
      }
      return;
    case sysno::symlink:
    case sysno::symlinkat: {
      bool at = ev.nr == sysno::symlinkat;
      std::string to = PathOf(ev, at ? 2 : 1, at ? 1 : -1);
      if (!to.empty() && ok) Created(to, Kind::kSymlink);
      if (!to.empty() && ev.ret == -EEXIST) Observe(to, true);
      return;
    }
    case sysno::getdents64: {
      FileRef* r = fd_ref(static_cast<int>(a[0]));
      if (!r || !ok) return;
      Node& dir = Touch(r->path);
      if (dir.state == State::kUnknown) dir.state = State::kPre;
      dir.kind = Kind::kDir;
      const CapturedBuffer* b = FindBuffer(ev, 1, 0, BufferDir::kOut);
      if (!b) return;
      ForEachDirent(b->View(), [&](std::string_view name, uint8_t type) {
        if (name == "." || name == ".." || name.empty()) return;
        Kind kind = type == DT_DIR ? Kind::kDir : type == DT_LNK ? Kind::kSymlink : Kind::kFile;
        Node& c = Touch(JoinPath(r->path, name));
        if (c.state == State::kUnknown) {
          c.state = State::kPre;
          c.kind = kind;
        }
      });
      return;
    }
    case sysno::chdir:
      if (ok) {
        std::string path = PathOf(ev, 0, -1);
        if (!path.empty()) {
          Observe(path, true, Kind::kDir).kind = Kind::kDir;
          p.cwd = path;
        }
      }
      return;
    case sysno::fchdir:
      if (FileRef* r = fd_ref(static_cast<int>(a[0])); r && ok) p.cwd = r->path;
      return;
    case sysno::clone:
    case sysno::clone3:
    case sysno::fork:
    case sysno::vfork:
      if (ok && ev.ret > 0 &&
          (follow_all_clones_ || (parent_of_ && parent_of_->count(static_cast<int32_t>(ev.ret))))) {
        Proc child = p;  // shares the FileRefs: the offsets are shared, as after fork
        procs_[static_cast<int32_t>(ev.ret)] = std::move(child);
      }
      return;
    default:
      return;
  }
}

// What Make was asked for, and what it tells --verify.
struct MakeContext {
  const Sandbox& sb;
  BlobFetcher* fetcher;
  const PrepareOptions& options;
  PreparedDiffs* diffs;
  PrepareStats* st;
};

// The bits a trace from someone else does not get: set-user-ID and set-group-ID everywhere,
// and the sticky bit of anything but a directory (where it is /tmp's, and harmless).
uint32_t StrippedBits(const Node& n) {
  return S_ISUID | S_ISGID | (n.kind == Kind::kDir ? 0 : S_ISVTX);
}

// After `name` was made (or found already there): the owner if asked for (a refusal, when not
// root, is counted and carried on from), then what it holds that the recording does not, for
// --verify and the summary.
Status Finish(const MakeContext& cx, int dir, const char* name, const std::string& path,
              const Node& n, uint32_t perm, bool made) {
  bool symlink = n.kind == Kind::kSymlink;
  if (made && n.have_stat && cx.options.keep_owners &&
      ::fchownat(dir, name, n.uid, n.gid, AT_SYMLINK_NOFOLLOW) != 0) {
    // Not root (EPERM), or an owner a user namespace does not map (EINVAL): carry on.
    int e = errno;
    if (e != EPERM && e != EINVAL) return ErrnoError("--prepare: chown " + path, e);
    if (cx.st->chown_refused++ == 0) {
      cx.st->chown_error = fmt::format("chown {} to {}:{}: {}", path, n.uid, n.gid, strerror(e));
    }
  }
  // The mode after the owner: chown clears set-id bits.
  if (made && !symlink && ::fchmodat(dir, name, perm, 0) != 0) {
    return ErrnoError("--prepare: chmod " + path);
  }
  if (!n.have_stat) return Status::Ok();
  struct stat live;
  if (::fstatat(dir, name, &live, AT_SYMLINK_NOFOLLOW) != 0) return Status::Ok();
  PreparedDiffs::Diff d;
  d.mode_bits = n.mode & StrippedBits(n) & ~live.st_mode;
  d.owner = live.st_uid != n.uid || live.st_gid != n.gid;
  if (made) {
    if (d.mode_bits) ++cx.st->setid_stripped;
    if (d.owner) ++cx.st->owners_not_kept;
  } else {
    // Already there (a tree prepared before): the same differences are an earlier --prepare's
    // when the rest of the mode is as recorded.
    if (cx.options.keep_owners) d.owner = false;
    if (((live.st_mode ^ n.mode) & 07777 & ~d.mode_bits) != 0) return Status::Ok();
  }
  if ((d.mode_bits || d.owner) && cx.diffs) cx.diffs->Add(live.st_dev, live.st_ino, d);
  return Status::Ok();
}

// Creates one entry (parents first: the map is ordered so "/a" precedes "/a/b").
Status Make(const MakeContext& cx, const std::string& path, const Node& n, bool made_early) {
  const Sandbox& sb = cx.sb;
  PrepareStats* st = cx.st;
  ParentAndName pn;
  int r = sb.Parent(path, &pn);
  if (r < 0) return ErrnoError("--prepare: " + path + ": parent directory", -r);
  int dir = pn.dir();
  const char* name = pn.name.c_str();
  uint32_t perm = n.have_stat ? (n.mode & 07777) : (n.kind == Kind::kDir ? 0755 : 0644);
  if (!n.have_stat && n.executable) perm |= 0111;
  perm &= ~StrippedBits(n);
  if (n.have_stat && (S_ISCHR(n.mode) || S_ISBLK(n.mode))) {
    ++st->devices_skipped;  // never: a device node is access to the hardware
    return Status::Ok();
  }
  if (n.have_stat && n.kind != Kind::kDir && (S_ISFIFO(n.mode) || S_ISSOCK(n.mode))) {
    // A FIFO or a socket's name: harmless to make, and the replay opens a FIFO without
    // blocking (Executor::Open).
    if (S_ISFIFO(n.mode)) sb.SetMayHoldFifos(true);
    if (::mknodat(dir, name, (n.mode & S_IFMT) | 0600, 0) != 0) {
      if (errno != EEXIST) return ErrnoError("--prepare: mknod " + path);
      ++st->existing;
      return Finish(cx, dir, name, path, n, perm, false);
    }
    ++st->files;
    return Finish(cx, dir, name, path, n, perm, true);
  }
  switch (n.kind) {
    case Kind::kDir:
      if (made_early) {
        ++st->dirs;  // made while the trace loaded; its owner and mode only now known
        break;
      }
      if (::mkdirat(dir, name, 0700) != 0) {
        if (errno != EEXIST) return ErrnoError("--prepare: mkdir " + path);
        ++st->existing;
        return Finish(cx, dir, name, path, n, perm, false);
      }
      ++st->dirs;
      break;
    case Kind::kSymlink: {
      std::string target = n.target.empty() ? std::string("(target not recorded)") : n.target;
      if (::symlinkat(target.c_str(), dir, name) != 0) {
        if (errno != EEXIST) return ErrnoError("--prepare: symlink " + path);
        ++st->existing;
        return Finish(cx, dir, name, path, n, perm, false);
      }
      ++st->symlinks;
      break;
    }
    default: {
      int fd = ::openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) {
        if (errno != EEXIST) return ErrnoError("--prepare: create " + path);
        ++st->existing;
        return Finish(cx, dir, name, path, n, perm, false);
      }
      UniqueFd f(fd);
      if (Status w = WriteContent(fd, n.content, cx.fetcher, &st->bytes); !w.ok())
        return Status(w.code(), "--prepare: write " + path + ": " + w.message());
      uint64_t size = n.have_stat ? n.size : n.data_end;
      if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
        return ErrnoError("--prepare: truncate " + path);
      }
      ++st->files;
      // Links the trace never saw still count in st_nlink: give the file as many, kept under
      // kLinkDir, so the stat results verify exactly.
      uint64_t nlink = n.have_stat ? n.nlink : 1;
      for (uint64_t k = 1; k < nlink && k < 64; ++k) {
        std::string name = fmt::format("{}", st->extra_links++);
        ParentAndName links;
        if (sb.Parent(std::string(kLinkDir) + "/" + name, &links) < 0) {
          if (::mkdirat(sb.root_fd(), kLinkDir + 1, 0700) != 0 && errno != EEXIST) {
            return ErrnoError(std::string("--prepare: mkdir ") + kLinkDir);
          }
          int r2 = sb.Parent(std::string(kLinkDir) + "/" + name, &links);
          if (r2 < 0) return ErrnoError(std::string("--prepare: ") + kLinkDir, -r2);
        }
        if (::linkat(fd, "", links.dir(), links.name.c_str(), AT_EMPTY_PATH) != 0) {
          return ErrnoError("--prepare: link " + path);
        }
      }
      break;
    }
  }
  return Finish(cx, dir, name, path, n, perm, true);
}

// What the trace learned by following a symlink (a stat, a read through an fd it opened, an
// access(X_OK)) describes the file it leads to, not the link: readlink or lstat told the
// walk the path is a link only at some point, and /usr/bin/gcc is two links from the file a
// stat of it measures. The final target (a pre-existing file the trace may never have named)
// gets what it does not know yet.
void FollowSymlinks(std::unordered_map<std::string, Node>& nodes) {
  constexpr int kMaxHops = 8;
  std::vector<std::string> links;
  for (const auto& [path, n] : nodes)
    if (n.kind == Kind::kSymlink && n.state == State::kPre && !n.target.empty())
      links.push_back(path);
  for (const std::string& link : links) {
    const Node& from = nodes.at(link);
    bool followed_stat = from.have_stat && !S_ISLNK(from.mode);
    if (!followed_stat && from.content.empty() && !from.executable) continue;
    std::string at = link;
    const Node* hop = &from;
    for (int i = 0; i < kMaxHops && hop && hop->kind == Kind::kSymlink && !hop->target.empty();
         ++i) {
      size_t slash = at.rfind('/');
      std::string dir = slash == std::string::npos || slash == 0 ? "/" : at.substr(0, slash);
      at = NormalizePath(JoinPath(dir, hop->target));
      auto it = nodes.find(at);
      hop = it == nodes.end() ? nullptr : &it->second;
    }
    if (hop && hop->kind == Kind::kSymlink) continue;  // a loop, or too long a chain
    if (at.empty() || IsVirtualPath(at)) continue;
    Node copy = nodes.at(link);  // `nodes` may rehash below
    Node& to = nodes[at];
    if (to.state == State::kUnknown) to.state = State::kPre;
    if (to.state != State::kPre || to.modified) continue;
    MarkParents(nodes, at);  // a link may lead anywhere (/etc/alternatives/...)
    Node& target = nodes[at];
    if (followed_stat && !target.have_stat) {
      target.have_stat = true;
      target.mode = copy.mode;
      target.uid = copy.uid;
      target.gid = copy.gid;
      target.size = copy.size;
      target.nlink = copy.nlink;
      target.kind = KindOfMode(copy.mode);
    }
    if (target.kind == Kind::kUnknown) target.kind = Kind::kFile;
    if (target.content.empty() && !copy.content.empty()) {
      target.content = copy.content;
      target.data_end = std::max(target.data_end, copy.data_end);
    }
    target.executable = target.executable || copy.executable;
  }
}

Expected<PrepareStats> Make(Simulator& sim, const Sandbox& sandbox, BlobFetcher* fetcher,
                            const std::unordered_set<std::string>& made_early,
                            const PrepareOptions& options, PreparedDiffs* diffs) {
  PrepareStats st;
  MakeContext cx{sandbox, fetcher, options, diffs, &st};
  FollowSymlinks(sim.nodes());
  std::vector<std::pair<const std::string*, Node*>> pre;
  for (auto& [path, n] : sim.nodes()) {
    if (n.state != State::kPre || path == "/" || path.empty()) continue;
    pre.emplace_back(&path, &n);
  }
  // In path order, so a directory is made before what it holds.
  std::sort(pre.begin(), pre.end(),
            [](const auto& a, const auto& b) { return *a.first < *b.first; });
  for (auto [path, n] : pre) {
    if (n->kind == Kind::kUnknown) n->kind = Kind::kFile;
    bool early = made_early.count(*path) > 0;
    if (early && n->kind != Kind::kDir) {
      // Calls that ran while the trace loaded used it as the directory it then seemed to be.
      return Error(Code::kInvalidArgument,
                   "--prepare: " + *path +
                       " was made a directory for the calls replayed while the trace loaded, "
                       "and the rest of the trace shows it was not one; replay again with "
                       "--stream off");
    }
    FAY_RETURN_IF_ERROR(Make(cx, *path, *n, early));
  }
  // What was written here must not be written back to disk while the replay runs and is timed.
  if (st.bytes > 0) {
    int fd = sandbox.OpenAt("/", O_RDONLY | O_DIRECTORY, 0);  // syncfs refuses O_PATH fds
    if (fd < 0) return ErrnoError("--prepare: open the root", -fd);
    UniqueFd root(fd);
    if (::syncfs(fd) != 0) return ErrnoError("--prepare: syncfs");
  }
  return st;
}

}  // namespace

struct Preparer::Impl {
  std::unique_ptr<Simulator> sim;
  std::unordered_map<std::string, std::string> met;
  const Sandbox* sandbox = nullptr;
  CallGate* gate = nullptr;
  // Pre-existing directories made while the trace loaded, for the calls allowed early.
  std::unordered_set<std::string> made_early;
  std::string last_parent;  // its ancestors are all there

  // Whether the walk's last call may run before the preparation is complete: it touched only
  // paths the trace shows were absent when it started (created by it, or not found), whose
  // state at the start nothing the walk learns later can change, and --prepare has nothing to
  // make for. The directories above them that did exist are made now.
  bool MayRunEarly();
  bool MakeAncestors(const std::string& path);
};

bool Preparer::Impl::MayRunEarly() {
  if (sim->unresolved()) return false;
  for (const auto& [path, n] : sim->touched()) {
    if (n->state != State::kAbsent || n->tentative) return false;
  }
  for (const auto& [path, n] : sim->touched()) {
    if (!MakeAncestors(*path)) return false;
  }
  return true;
}

bool Preparer::Impl::MakeAncestors(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return true;
  std::string_view parent(path.data(), slash);
  if (parent == last_parent) return true;
  // Upwards to the first directory that is there (made here, made by the trace, or "/"), then
  // down again making the pre-existing ones.
  std::vector<std::string> make;
  std::string p(parent);
  while (!p.empty() && p != "/") {
    auto it = sim->nodes().find(p);
    if (it == sim->nodes().end()) return false;  // nothing says it existed
    const Node& n = it->second;
    if (n.state == State::kAbsent) break;  // the trace made it before this call
    if (n.state != State::kPre || n.kind != Kind::kDir) return false;
    if (made_early.count(p)) break;
    make.push_back(p);
    size_t s = p.rfind('/');
    p.resize(s == 0 ? 1 : s);
  }
  for (auto it = make.rbegin(); it != make.rend(); ++it) {
    ParentAndName pn;
    if (sandbox->Parent(*it, &pn) < 0) return false;
    if (::mkdirat(pn.dir(), pn.name.c_str(), 0700) != 0) return false;  // there already: later
    made_early.insert(*it);
  }
  last_parent.assign(parent);
  return true;
}

std::vector<ChangedPath> Simulator::Changed() const {
  std::vector<ChangedPath> out;
  for (const auto& [path, n] : nodes_) {
    if (!n.changed) continue;
    ChangedPath c;
    c.path = path;
    // Created by the trace (and not found to have held data after all), or emptied by it:
    // every byte it holds at the end came from the trace. Likewise its mode, set at creation
    // or by a chmod. A rename or link target has its source's.
    bool created = n.state == State::kAbsent && !n.was_tentative;
    c.content_known = n.borrowed ? n.borrowed_content || n.emptied : created || n.emptied;
    c.mode_known = n.borrowed ? n.borrowed_mode || n.mode_set : created || n.mode_set;
    c.xattrs_known = (created && !n.borrowed) || n.xattr_set;
    c.mapped = n.mapped_shared;
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(),
            [](const ChangedPath& a, const ChangedPath& b) { return a.path < b.path; });
  return out;
}

std::vector<ChangedPath> Preparer::Changed() const {
  return impl_->sim ? impl_->sim->Changed() : std::vector<ChangedPath>{};
}

struct ChangeTracker::Impl {
  std::mutex mu;
  Simulator sim;
  // The symlinks met so far (path -> the link's device, inode and change time), and every path
  // already looked at for one. Their targets are read at the end (MetSymlinks): readlink sets
  // a link's access time, which the program could see (cp -a copies it), and lstat does not.
  struct Met {
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
  };
  std::map<std::string, Met> met;
  // Looked up by string_view: every call's path prefixes are asked for, nearly all seen before,
  // and none of those should cost an allocation.
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_set<std::string, ViewHash, std::equal_to<>> looked;
  explicit Impl(const std::string& cwd) : sim(cwd, nullptr, /*follow_all_clones=*/true) {}

  void Look(std::string_view path) {
    if (path.empty() || path == "/" || looked.find(path) != looked.end()) return;
    // A bound on what a long recording keeps: past it, paths are no longer looked at.
    if (looked.size() >= (1u << 20)) return;
    std::string p(path);
    looked.insert(p);
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return;
    met.emplace(std::move(p), Met{st.st_dev, st.st_ino, st.st_ctim});
  }

  // The links a call's paths go through, and those a listing shows (DT_LNK), looked at once
  // each, before the call's own effect is followed. The recorder sees the call once it has
  // returned: a link it made, removed or replaced is the trace's own, which --prepare knows.
  void NoteSymlinks(const SyscallEvent& ev) {
    if (ev.nr == sysno::getdents64) {
      std::string dir;
      uint64_t offset;
      const CapturedBuffer* b = FindBuffer(ev, 1, 0, BufferDir::kOut);
      if (!b || Failed(ev.ret) || !sim.FileOf(ev.pid, static_cast<int>(ev.args[0]), &dir, &offset))
        return;
      ForEachDirent(b->View(), [&](std::string_view name, uint8_t type) {
        if (type == DT_LNK && !name.empty()) Look(JoinPath(dir, name));
      });
      return;
    }
    const SyscallSignature& sig = Signature(ev.nr);
    for (int i = 0; i < sig.nargs; ++i) {
      if (sig.args[i].type != ArgType::kPath) continue;
      // symlink's first argument is the link's text, not a path it goes through.
      if ((ev.nr == sysno::symlink || ev.nr == sysno::symlinkat) && i == 0) continue;
      int dirfd = i > 0 && sig.args[i - 1].type == ArgType::kDirfd ? i - 1 : -1;
      std::string path = sim.NamedPath(ev, i, dirfd);
      for (size_t end = path.find('/', 1); end != std::string::npos; end = path.find('/', end + 1))
        Look(std::string_view(path).substr(0, end));
      Look(path);
    }
  }
};

ChangeTracker::ChangeTracker(const std::string& cwd) : impl_(std::make_unique<Impl>(cwd)) {}
ChangeTracker::~ChangeTracker() = default;

namespace {

bool TakesPath(int nr) {
  const SyscallSignature& sig = Signature(nr);
  for (int i = 0; i < sig.nargs; ++i)
    if (sig.args[i].type == ArgType::kPath) return true;
  return false;
}

// The calls the walk itself follows: paths and descriptors, and every call that changes a path.
bool Walked(int nr) {
  // What the walk needs to follow paths and descriptors, and every call that changes a path:
  // not stats or listings, which tell --prepare what was there, not what changed. Reads and
  // seeks only move offsets, for FileOf (where an in-kernel copy read its source from).
  static const std::vector<bool> wanted = [] {
    std::vector<bool> w(1024, false);
    for (int n : {sysno::open,      sysno::openat,      sysno::openat2,      sysno::creat,
                  sysno::close,     sysno::dup,         sysno::dup2,         sysno::dup3,
                  sysno::fcntl,     sysno::chdir,       sysno::fchdir,       sysno::clone,
                  sysno::clone3,    sysno::fork,        sysno::vfork,        sysno::write,
                  sysno::writev,    sysno::pwrite64,    sysno::pwritev,      sysno::pwritev2,
                  sysno::ftruncate, sysno::fallocate,   sysno::truncate,     sysno::chmod,
                  sysno::fchmod,    sysno::fchmodat,    sysno::setxattr,     sysno::lsetxattr,
                  sysno::fsetxattr, sysno::removexattr, sysno::lremovexattr, sysno::fremovexattr,
                  sysno::mkdir,     sysno::mkdirat,     sysno::rmdir,        sysno::unlink,
                  sysno::unlinkat,  sysno::rename,      sysno::renameat,     sysno::renameat2,
                  sysno::link,      sysno::linkat,      sysno::symlink,      sysno::symlinkat,
                  sysno::mknod,     sysno::mknodat,     sysno::fchmodat2,    sysno::copy_file_range,
                  sysno::sendfile,  sysno::splice,      sysno::ioctl,        sysno::read,
                  sysno::readv,     sysno::lseek,       sysno::mmap})
      w[static_cast<size_t>(n)] = true;
    return w;
  }();
  return nr >= 0 && static_cast<size_t>(nr) < wanted.size() && wanted[static_cast<size_t>(nr)];
}

}  // namespace

bool ChangeTracker::Wants(int nr) {
  // What the walk follows (Walked), and every call that names a path or lists a directory, for
  // the symlinks met on the way.
  static const std::vector<bool> wanted = [] {
    std::vector<bool> w(1024, false);
    for (size_t n = 0; n < w.size(); ++n) {
      int nr = static_cast<int>(n);
      w[n] = Walked(nr) || nr == sysno::getdents64 || TakesPath(nr);
    }
    return w;
  }();
  return nr >= 0 && static_cast<size_t>(nr) < wanted.size() && wanted[static_cast<size_t>(nr)];
}

void ChangeTracker::Observe(const SyscallEvent& ev) {
  std::lock_guard lk(impl_->mu);
  if (ev.nr == sysno::getdents64 || TakesPath(ev.nr)) impl_->NoteSymlinks(ev);
  if (Walked(ev.nr)) impl_->sim.Call(ev);
}

std::vector<trace::MetSymlink> ChangeTracker::MetSymlinks(size_t max_bytes) const {
  std::lock_guard lk(impl_->mu);
  std::vector<trace::MetSymlink> out;
  size_t bytes = 0;
  for (const auto& [path, m] : impl_->met) {
    // A link the program made itself (or renamed there) is the trace's own: the eBPF recorder
    // may look at a path only after a later call made it.
    if (impl_->sim.CreatedByTrace(path)) continue;
    // Still the link that was met (not replaced or retargeted since): its target then is its
    // target now.
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode) || st.st_dev != m.dev ||
        st.st_ino != m.ino || st.st_ctim.tv_sec != m.ctime.tv_sec ||
        st.st_ctim.tv_nsec != m.ctime.tv_nsec)
      continue;
    char buf[4096];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) continue;
    bytes += path.size() + static_cast<size_t>(n) + 4;
    if (bytes > max_bytes) break;
    out.push_back({path, std::string(buf, static_cast<size_t>(n))});
  }
  return out;
}

bool ChangeTracker::FileOf(int32_t pid, int fd, std::string* path, uint64_t* offset) const {
  std::lock_guard lk(impl_->mu);
  return impl_->sim.FileOf(pid, fd, path, offset);
}

std::vector<ChangedPath> ChangeTracker::Changed() const {
  std::lock_guard lk(impl_->mu);
  return impl_->sim.Changed();
}

Preparer::Preparer() : impl_(std::make_unique<Impl>()) {}
Preparer::~Preparer() = default;

void Preparer::StreamTo(const Sandbox& sandbox, CallGate* gate) {
  impl_->sandbox = &sandbox;
  impl_->gate = gate;
}

void Preparer::SetMetSymlinks(const std::vector<trace::MetSymlink>& links) {
  impl_->met.clear();
  for (const trace::MetSymlink& l : links) impl_->met.emplace(l.path, l.target);
}

void Preparer::Walk(CallStream& calls) {
  Impl& im = *impl_;
  im.sim = std::make_unique<Simulator>(calls.info().cwd, calls.parent_of());
  im.sim->SetMetSymlinks(im.met);
  if (!im.gate || !calls.streaming()) {
    im.sim->Run(calls);
    return;
  }
  uint64_t k = 0;
  bool early = true;
  while (const SyscallEvent* ev = calls.Next()) {
    im.sim->Call(*ev);
    ++k;
    if (early && !(early = im.MayRunEarly())) continue;
    if (early) im.gate->Allow(k, calls.calls());
  }
}

Expected<PrepareStats> Preparer::Apply(const Sandbox& sandbox, const Schedule& schedule,
                                       const PrepareOptions& options, PreparedDiffs* diffs) {
  if (!impl_->sim) return Error(Code::kInternal, "--prepare: nothing was walked");
  std::optional<BlobFetcher> fetcher;
  if (schedule.lazy) {
    FAY_ASSIGN_OR_RETURN(BlobFetcher f, BlobFetcher::Open(schedule.path));
    fetcher.emplace(std::move(f));
  }
  return Make(*impl_->sim, sandbox, fetcher ? &*fetcher : nullptr, impl_->made_early, options,
              diffs);
}

Expected<PrepareStats> Prepare(const Schedule& schedule, const Sandbox& sandbox,
                               const PrepareOptions& options, PreparedDiffs* diffs) {
  Preparer p;
  CallStream calls(schedule);
  p.Walk(calls);
  return p.Apply(sandbox, schedule, options, diffs);
}

}  // namespace fay::replay
