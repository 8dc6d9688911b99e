// The end state payload (docs/FORMAT.md 4.7): encoding, decoding, and the checks both sides hold
// an EndState to.
#include "trace/end_state.h"

#include <fmt/core.h>

#include "trace/bytes.h"

namespace fay::trace {
namespace {

constexpr uint32_t kModeBits = 07777;

bool CarriesMode(EndKind k) {
  return k != EndKind::kAbsent;
}

bool KnownKind(uint64_t k) {
  return k <= static_cast<uint64_t>(EndKind::kOther);
}

// Into a std::string, the payload's type: the bytes.h helpers append to a Bytes.
void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void PutString(std::string& out, std::string_view s) {
  PutVarint(out, s.size());
  out.append(s);
}
void PutHash(std::string& out, const Hash128& h) {
  char b[16];
  StoreU64(reinterpret_cast<uint8_t*>(b), h.lo);
  StoreU64(reinterpret_cast<uint8_t*>(b) + 8, h.hi);
  out.append(b, sizeof(b));
}

// What a path must be for a verifier to look it up again: absolute, and a name the kernel takes.
bool GoodPath(std::string_view p) {
  return !p.empty() && p[0] == '/' && p.find('\0') == std::string_view::npos;
}

}  // namespace

std::string_view EndKindName(EndKind k) {
  switch (k) {
    case EndKind::kAbsent:
      return "absent";
    case EndKind::kFile:
      return "file";
    case EndKind::kDir:
      return "dir";
    case EndKind::kSymlink:
      return "symlink";
    case EndKind::kOther:
      return "other";
  }
  return "unknown";
}

Status CheckEndState(const EndState& s) {
  auto bad = [](size_t i, const EndEntry& e, std::string_view why) {
    return Error(Code::kInvalidArgument,
                 fmt::format("end state entry {} ({:?}): {}", i, e.path, why));
  };
  for (size_t i = 0; i < s.entries.size(); ++i) {
    const EndEntry& e = s.entries[i];
    if (!GoodPath(e.path)) return bad(i, e, "not an absolute path without NUL bytes");
    // Sorted and unique, so a verifier can look a path up and never sees two answers for one.
    if (i > 0 && !(s.entries[i - 1].path < e.path))
      return bad(i, e, "paths must be strictly ascending (sorted, each once)");
    if (!KnownKind(static_cast<uint64_t>(e.kind))) return bad(i, e, "unknown kind");
    if (e.mode > kModeBits) return bad(i, e, "mode beyond 07777");
    if (e.determined > 7) return bad(i, e, "unknown determined bits");
    if (!CarriesMode(e.kind) && (e.mode != 0 || !e.xattrs.empty()))
      return bad(i, e, "an absent path has no mode or xattrs");
    if (e.kind != EndKind::kFile && (e.size != 0 || e.content != Hash128{}))
      return bad(i, e, "only a regular file has a size and content");
    if (e.kind != EndKind::kSymlink && !e.target.empty())
      return bad(i, e, "only a symlink has a target");
    if ((e.has_kept || !e.kept.empty()) &&
        (e.kind != EndKind::kFile || !e.has_kept || e.kept.size() != e.size ||
         e.kept.size() > kMaxKeptContent))
      return bad(i, e, "kept content only for a file, its whole size, at most 512 KiB");
    for (size_t j = 0; j < e.xattrs.size(); ++j) {
      if (e.xattrs[j].name.empty()) return bad(i, e, "an xattr without a name");
      if (j > 0 && !(e.xattrs[j - 1].name < e.xattrs[j].name))
        return bad(i, e, "xattr names must be strictly ascending");
    }
  }
  for (size_t i = 0; i < s.symlinks.size(); ++i) {
    const MetSymlink& m = s.symlinks[i];
    auto why = [&](std::string_view w) {
      return Error(Code::kInvalidArgument, fmt::format("met symlink {} ({:?}): {}", i, m.path, w));
    };
    if (!GoodPath(m.path)) return why("not an absolute path without NUL bytes");
    if (i > 0 && !(s.symlinks[i - 1].path < m.path))
      return why("paths must be strictly ascending (sorted, each once)");
    if (m.target.empty() || m.target.find('\0') != std::string::npos)
      return why("a target must be non-empty, without NUL bytes");
  }
  return Status::Ok();
}

std::string EncodeEndState(const EndState& s) {
  std::string out;
  PutVarint(out, s.entries.size());
  PutVarint(out, s.skipped);
  std::string body;
  for (const EndEntry& e : s.entries) {
    body.clear();
    PutString(body, e.path);
    if (CarriesMode(e.kind)) PutVarint(body, e.mode);
    if (e.kind == EndKind::kFile) {
      PutVarint(body, e.size);
      PutHash(body, e.content);
    }
    if (e.kind == EndKind::kSymlink) PutString(body, e.target);
    if (CarriesMode(e.kind)) {
      PutVarint(body, e.xattrs.size());
      for (const EndXattr& x : e.xattrs) {
        PutString(body, x.name);
        PutHash(body, x.value_hash);
        PutVarint(body, x.size);
      }
    }
    PutVarint(body, e.determined);
    // Minor 5, after what a minor 4 reader reads: the kept content.
    if (e.has_kept) {
      PutVarint(body, 1);
      PutString(body, e.kept);
    }
    // Kind and length first, as event records have them: a later minor may add kinds and
    // append fields, and a reader steps over what it does not know.
    PutVarint(out, static_cast<uint64_t>(e.kind));
    PutVarint(out, body.size());
    out += body;
  }
  // Minor 5: the symlinks met, after the entries, where a minor 4 reader stops reading.
  if (!s.symlinks.empty()) {
    PutVarint(out, s.symlinks.size());
    for (const MetSymlink& m : s.symlinks) {
      PutString(out, m.path);
      PutString(out, m.target);
    }
  }
  return out;
}

Expected<EndState> DecodeEndState(std::string_view payload) {
  ByteReader r(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  EndState s;
  size_t index = 0;
  size_t entry_at = 0;
  auto bad = [&](std::string_view what) {
    return Error(Code::kIo,
                 fmt::format("end state: entry {} (payload byte {}): {}", index, entry_at, what));
  };
  uint64_t n;
  if (!r.Varint(&n) || !r.Varint(&s.skipped))
    return Error(Code::kIo, "end state: malformed counts at the start of the payload");
  if (n > r.remaining() / kMinEndEntryRaw)
    return Error(Code::kIo, fmt::format("end state: {} entries cannot fit in the {} bytes left", n,
                                        r.remaining()));
  s.entries.reserve(n);
  for (index = 0; index < n; ++index) {
    entry_at = r.pos();
    uint64_t kind, body_length;
    const uint8_t* body_bytes;
    if (!r.Varint(&kind) || !r.Varint(&body_length) || body_length > r.remaining() ||
        !r.Raw(body_length, &body_bytes))
      return bad("cut short");
    ByteReader b(body_bytes, body_length);
    EndEntry& e = s.entries.emplace_back();
    if (!b.String(&e.path)) return bad("malformed path");
    if (!GoodPath(e.path)) return bad("not an absolute path without NUL bytes");
    if (index > 0 && !(s.entries[index - 1].path < e.path))
      return bad("path not after the one before it (entries are sorted, each path once)");
    // A kind from a later minor: its body starts with the path too; the rest is not ours to
    // read. It is some kind of object, which a verifier can still tell apart from absence.
    if (!KnownKind(kind)) {
      e.kind = EndKind::kOther;
      continue;
    }
    e.kind = static_cast<EndKind>(kind);
    if (CarriesMode(e.kind)) {
      uint64_t mode;
      if (!b.Varint(&mode) || mode > kModeBits) return bad("malformed mode");
      e.mode = static_cast<uint32_t>(mode);
    }
    if (e.kind == EndKind::kFile &&
        (!b.Varint(&e.size) || !b.U64(&e.content.lo) || !b.U64(&e.content.hi)))
      return bad("malformed size or content hash");
    if (e.kind == EndKind::kSymlink && !b.String(&e.target)) return bad("malformed link target");
    if (CarriesMode(e.kind)) {
      uint64_t nx;
      // An xattr takes at least 18 bytes: a name's length and byte, its hash, its size.
      if (!b.Varint(&nx) || nx > b.remaining() / 18) return bad("malformed xattr count");
      e.xattrs.resize(nx);
      for (size_t j = 0; j < nx; ++j) {
        EndXattr& x = e.xattrs[j];
        if (!b.String(&x.name) || x.name.empty() || !b.U64(&x.value_hash.lo) ||
            !b.U64(&x.value_hash.hi) || !b.Varint(&x.size))
          return bad(fmt::format("malformed xattr {}", j));
        if (j > 0 && !(e.xattrs[j - 1].name < x.name))
          return bad(fmt::format("xattr {} not after the one before it", j));
      }
    }
    uint64_t determined = 0;
    if (!b.Varint(&determined) || determined > 7) return bad("malformed determined bits");
    e.determined = static_cast<uint8_t>(determined);
    uint64_t kept = 0;
    if (b.remaining() > 0) {
      if (!b.Varint(&kept)) return bad("malformed kept content");
      if (kept == 1) {
        if (e.kind != EndKind::kFile || !b.String(&e.kept) || e.kept.size() != e.size ||
            e.kept.size() > kMaxKeptContent)
          return bad("malformed kept content");
        e.has_kept = true;
      }
    }
    // Bytes left in the body are fields a later minor appended.
  }
  // Minor 5: the symlinks met (none when the payload ends here).
  if (r.remaining() > 0) {
    uint64_t m;
    entry_at = r.pos();
    // A symlink takes at least 4 bytes: two lengths, a path's '/' and a target's byte.
    if (!r.Varint(&m) || m > r.remaining() / 4)
      return Error(Code::kIo, fmt::format("end state: malformed met symlink count at payload "
                                          "byte {}",
                                          entry_at));
    s.symlinks.resize(m);
    for (size_t i = 0; i < m; ++i) {
      MetSymlink& l = s.symlinks[i];
      size_t at = r.pos();
      if (!r.String(&l.path) || !r.String(&l.target) || !GoodPath(l.path) || l.target.empty() ||
          l.target.find('\0') != std::string::npos || (i > 0 && !(s.symlinks[i - 1].path < l.path)))
        return Error(Code::kIo,
                     fmt::format("end state: met symlink {} (payload byte {}): malformed or out "
                                 "of order",
                                 i, at));
    }
  }
  // Bytes after them are reserved for later minors.
  return s;
}

}  // namespace fay::trace
