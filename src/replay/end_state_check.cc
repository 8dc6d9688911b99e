#include "replay/end_state_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "common/unique_fd.h"

namespace fay::replay {
namespace {

trace::EndKind KindOf(mode_t m) {
  if (S_ISREG(m)) return trace::EndKind::kFile;
  if (S_ISDIR(m)) return trace::EndKind::kDir;
  if (S_ISLNK(m)) return trace::EndKind::kSymlink;
  return trace::EndKind::kOther;
}

const char* KindName(trace::EndKind k) {
  switch (k) {
    case trace::EndKind::kAbsent:
      return "absent";
    case trace::EndKind::kFile:
      return "a regular file";
    case trace::EndKind::kDir:
      return "a directory";
    case trace::EndKind::kSymlink:
      return "a symlink";
    default:
      return "another kind of file (FIFO, socket, device)";
  }
}

// XXH3-128 of a file's content, read through a descriptor of its own.
bool HashContent(int fd, trace::Hash128* out) {
  XXH3_state_t* st = XXH3_createState();
  if (!st) return false;
  XXH3_128bits_reset(st);
  std::vector<char> buf(1 << 20);
  bool ok = true;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    if (n == 0) break;
    XXH3_128bits_update(st, buf.data(), static_cast<size_t>(n));
  }
  XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  *out = trace::Hash128{h.low64, h.high64};
  return ok;
}

// The extended attributes of an open file, by name, security.* left out: those are the
// machine's (an SELinux label), not the program's.
bool Xattrs(int fd, std::vector<trace::EndXattr>* out) {
  std::string path = fmt::format("/proc/self/fd/{}", fd);
  ssize_t n = ::listxattr(path.c_str(), nullptr, 0);
  if (n < 0) return errno == ENOTSUP || errno == EOPNOTSUPP;
  std::string names(static_cast<size_t>(n), '\0');
  n = ::listxattr(path.c_str(), names.data(), names.size());
  if (n < 0) return false;
  names.resize(static_cast<size_t>(n));
  for (size_t at = 0; at < names.size();) {
    std::string name(names.c_str() + at);
    at += name.size() + 1;
    if (name.empty() || name.rfind("security.", 0) == 0) continue;
    ssize_t v = ::getxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (v < 0) return false;
    std::string value(static_cast<size_t>(v), '\0');
    v = ::getxattr(path.c_str(), name.c_str(), value.data(), value.size());
    if (v < 0) return false;
    value.resize(static_cast<size_t>(v));
    out->push_back({name, trace::HashBlob(value.data(), value.size()), value.size()});
  }
  std::sort(out->begin(), out->end(),
            [](const trace::EndXattr& a, const trace::EndXattr& b) { return a.name < b.name; });
  return true;
}

// One path's state; false when it could not be looked at.
bool Note(const Sandbox& sb, const std::string& path, uint8_t determined, trace::EndEntry* e) {
  e->path = path;
  e->determined = determined;
  int pfd = sb.OpenPath(path, /*nofollow=*/true);
  if (pfd == -ENOENT || pfd == -ENOTDIR) {
    e->kind = trace::EndKind::kAbsent;
    return true;
  }
  if (pfd < 0) return false;
  UniqueFd p(pfd);
  struct stat st;
  if (::fstatat(p.get(), "", &st, AT_EMPTY_PATH) != 0) return false;
  e->kind = KindOf(st.st_mode);
  e->mode = st.st_mode & 07777;
  if (e->kind == trace::EndKind::kSymlink) {
    char target[4096];
    ssize_t n = ::readlinkat(p.get(), "", target, sizeof target);
    if (n < 0) return false;
    e->target.assign(target, static_cast<size_t>(n));
    return true;
  }
  if ((determined & kEndXattrs) && !Xattrs(p.get(), &e->xattrs)) return false;
  if (e->kind != trace::EndKind::kFile) return true;
  e->size = static_cast<uint64_t>(st.st_size);
  if (!(determined & kEndContent)) return true;
  int fd = sb.OpenAt(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
  if (fd < 0) return false;
  UniqueFd f(fd);
  return HashContent(f.get(), &e->content);
}

// A file's whole content, when it is still `size` bytes.
bool ReadWhole(const Sandbox& sb, const std::string& path, uint64_t size, std::string* out) {
  int fd = sb.OpenAt(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
  if (fd < 0) return false;
  UniqueFd f(fd);
  out->assign(size, '\0');
  size_t at = 0;
  while (at < size) {
    ssize_t n = ::pread(f.get(), out->data() + at, size - at, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  char extra;
  if (at != size || ::pread(f.get(), &extra, 1, static_cast<off_t>(size)) != 0) {
    out->clear();
    return false;
  }
  return true;
}

std::string Hex(const trace::Hash128& h) {
  return trace::HashHex(h).substr(0, 12);
}

// What differs between what was noted and what is there now, where the recording determines it.
std::string Differences(const trace::EndEntry& want, const trace::EndEntry& got) {
  if (want.kind != got.kind)
    return fmt::format("{}, recorded {}", KindName(got.kind), KindName(want.kind));
  std::vector<std::string> d;
  // A replay never gives set-user-ID or set-group-ID bits, nor the sticky bit to anything but
  // a directory (--prepare and the replayed chmod both withhold them): their absence is fay's
  // choice, counted in `withheld`, not a difference.
  uint32_t withheld = S_ISUID | S_ISGID | (want.kind == trace::EndKind::kDir ? 0 : S_ISVTX);
  if ((want.determined & kEndMode) && want.kind != trace::EndKind::kSymlink &&
      want.mode != got.mode && got.mode != (want.mode & ~withheld))
    d.push_back(fmt::format("mode {:04o}, recorded {:04o}", got.mode, want.mode));
  if (want.kind == trace::EndKind::kSymlink && want.target != got.target)
    d.push_back(fmt::format("target \"{}\", recorded \"{}\"", got.target, want.target));
  if ((want.determined & kEndContent) && want.kind == trace::EndKind::kFile) {
    if (want.size != got.size)
      d.push_back(fmt::format("size {}, recorded {}", got.size, want.size));
    else if (!(want.content == got.content))
      d.push_back(
          fmt::format("content {}..., recorded {}...", Hex(got.content), Hex(want.content)));
  }
  if ((want.determined & kEndXattrs) && want.kind != trace::EndKind::kSymlink) {
    auto names = [](const std::vector<trace::EndXattr>& xs) {
      std::string s;
      for (const auto& x : xs) s += (s.empty() ? "" : ",") + x.name;
      return s.empty() ? std::string("none") : s;
    };
    bool same = want.xattrs.size() == got.xattrs.size();
    for (size_t i = 0; same && i < want.xattrs.size(); ++i)
      same = want.xattrs[i].name == got.xattrs[i].name &&
             want.xattrs[i].value_hash == got.xattrs[i].value_hash;
    if (!same)
      d.push_back(fmt::format("xattrs {}, recorded {}", names(got.xattrs), names(want.xattrs)));
  }
  std::string out;
  for (const std::string& s : d) out += (out.empty() ? "" : "; ") + s;
  return out;
}

}  // namespace

trace::EndState NoteEndState(const Sandbox& sb, const std::vector<ChangedPath>& paths) {
  trace::EndState s;
  for (const ChangedPath& c : paths) {
    uint8_t determined =
        static_cast<uint8_t>((c.content_known ? kEndContent : 0) | (c.mode_known ? kEndMode : 0) |
                             (c.xattrs_known ? kEndXattrs : 0));
    trace::EndEntry e;
    if (!Note(sb, c.path, determined, &e)) {
      ++s.skipped;
      continue;
    }
    if (c.mapped && e.kind == trace::EndKind::kFile && e.size <= trace::kMaxKeptContent)
      e.has_kept = ReadWhole(sb, c.path, e.size, &e.kept);
    s.entries.push_back(std::move(e));
  }
  return s;
}

uint64_t RestoreKept(const trace::EndState& recorded, const Sandbox& sb) {
  uint64_t restored = 0;
  for (const trace::EndEntry& e : recorded.entries) {
    if (!e.has_kept) continue;
    // Only over the file the replay left there: a path it did not make stays as it is, and
    // the comparison says so.
    int fd = sb.OpenAt(e.path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) continue;
    UniqueFd f(fd);
    struct stat st;
    if (::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::ftruncate(f.get(), static_cast<off_t>(e.kept.size())) != 0) continue;
    size_t at = 0;
    while (at < e.kept.size()) {
      ssize_t n = ::pwrite(f.get(), e.kept.data() + at, e.kept.size() - at, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    if (at == e.kept.size()) ++restored;
  }
  return restored;
}

EndStateReport CompareEndState(const trace::EndState& recorded, const Sandbox& sb,
                               size_t max_listed) {
  EndStateReport r;
  for (const trace::EndEntry& want : recorded.entries) {
    ++r.paths;
    trace::EndEntry got;
    std::string diff;
    if (!Note(sb, want.path, want.determined, &got))
      diff = "cannot be looked at in the replay's root";
    else
      diff = Differences(want, got);
    if (!diff.empty()) {
      ++r.differ;
      if (r.listed.size() < max_listed) r.listed.push_back(want.path + ": " + diff);
      continue;
    }
    // Absent paths, symlinks and others are whole in their kind (and target); a directory
    // needs its mode determined, a file its mode and content.
    bool all = true;
    if (want.kind == trace::EndKind::kDir) all = want.determined & kEndMode;
    if (want.kind == trace::EndKind::kFile)
      all = (want.determined & kEndMode) && (want.determined & kEndContent);
    if (all)
      ++r.identical;
    else
      ++r.undetermined;
  }
  return r;
}

}  // namespace fay::replay
