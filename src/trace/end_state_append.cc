// AppendEndState: the end state section added to a complete trace in place, without copying the
// recording (a trace may be gigabytes; the section and the footer are the file's last bytes).
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "trace/bytes.h"
#include "trace/crc32c.h"
#include "trace/end_state.h"

#include <algorithm>
#include "trace/file_io.h"
#include "trace/reader.h"
#include "trace/zstd_codec.h"

namespace fay::trace {
namespace {

// The level the writer uses for its footer: the section is written once, while the user waits.
constexpr int kZstdLevel = 3;

// The end state chunk, header and payload, as it will sit at `seq`.
Expected<Bytes> EndStateChunk(const EndState& s, uint32_t seq, const std::string& path) {
  std::string raw = EncodeEndState(s);
  const uint64_t n = s.entries.size();
  // What a reader holds the chunk to (FORMAT.md 4.1): a section it would refuse is not written.
  if (n > UINT32_MAX || raw.size() > UINT32_MAX || raw.size() > (n + 1) * kMaxEndEntryRaw)
    return Error(Code::kInvalidArgument,
                 fmt::format("{}: an end state of {} entries encodes to {} bytes, beyond what a "
                             "chunk may hold ({} bytes an entry, 4 GiB in all)",
                             path, n, raw.size(), kMaxEndEntryRaw));
  Compressor zstd(kZstdLevel);
  Bytes stored;
  FAY_RETURN_IF_ERROR(
      zstd.Compress(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), &stored));
  if (stored.size() > UINT32_MAX)
    return Error(Code::kInvalidArgument,
                 fmt::format("{}: the end state compresses to {} bytes, more than a chunk holds",
                             path, stored.size()));
  ChunkHeader h;
  h.type = ChunkType::kEndState;
  h.codec = Codec::kZstd;
  h.seq = seq;
  h.stored_length = static_cast<uint32_t>(stored.size());
  h.raw_length = static_cast<uint32_t>(raw.size());
  h.count = static_cast<uint32_t>(n);
  h.payload_crc = Crc32c(stored.data(), stored.size());
  Bytes chunk(kChunkHeaderSize);
  EncodeChunkHeader(h, chunk.data());
  PutRaw(chunk, stored.data(), stored.size());
  return chunk;
}

}  // namespace

Status AppendEndState(const std::string& path, const EndState& s) {
  FAY_RETURN_IF_ERROR(CheckEndState(s));
  int raw_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (raw_fd < 0) return ErrnoError("cannot open trace " + path + " for writing");
  OwnedFd fd(raw_fd);
  // Two appends at once would each write over the footer the other reads.
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK
               ? Error(Code::kInvalidArgument,
                       path + ": another process is adding an end state to this trace")
               : ErrnoError("cannot lock trace " + path);

  FAY_ASSIGN_OR_RETURN(Reader r, Reader::Open(path));
  if (!r.damage().ok())
    return Error(Code::kInvalidArgument,
                 fmt::format("{}; an end state is added only to a trace that reads whole",
                             r.damage().message()));
  if (!r.has_footer())
    return Error(Code::kInvalidArgument,
                 fmt::format("{}: no footer ({}); an end state is added only to a complete "
                             "trace",
                             path, r.truncated() ? r.TruncationMessage() : "not complete"));
  if (r.end_state() || !r.end_state_error().empty())
    return Error(Code::kInvalidArgument, path + ": the trace already has an end state");
  struct stat sb;
  if (::fstat(fd.get(), &sb) != 0) return ErrnoError("cannot stat trace " + path);
  if (static_cast<uint64_t>(sb.st_size) != r.stats().file_bytes)
    return Error(Code::kInvalidArgument, path + ": the trace changed while it was being read");

  // The footer as it is, renumbered: it indexes the same blob and events chunks, and a chunk of
  // a type it does not index takes its place.
  const uint64_t footer_at = r.last_chunk_offset();
  const uint32_t footer_seq = r.last_chunk_seq();
  const uint64_t footer_size = r.stats().file_bytes - kTrailerSize - footer_at;
  Bytes footer(footer_size);
  size_t got;
  FAY_RETURN_IF_ERROR(
      ReadAt(fd.get(), footer_at, footer.data(), footer.size(), &got, "reading " + path));
  ChunkHeader fh;
  if (got != footer.size() || DecodeChunkHeader(footer.data(), &fh) != HeaderCheck::kOk ||
      fh.type != ChunkType::kFooter || fh.seq != footer_seq)
    return Error(Code::kIo, path + ": the footer chunk changed while the trace was being read");
  // What the file ends with now, to put back should the new ending not fit.
  Bytes old_tail = footer;
  uint8_t trailer[kTrailerSize];
  EncodeTrailer(Trailer{footer_at, footer_seq + 1}, trailer);
  PutRaw(old_tail, trailer, sizeof(trailer));
  fh.seq = footer_seq + 1;
  EncodeChunkHeader(fh, footer.data());

  FAY_ASSIGN_OR_RETURN(Bytes tail, EndStateChunk(s, footer_seq, path));
  const uint64_t new_footer_at = footer_at + tail.size();
  PutRaw(tail, footer.data(), footer.size());
  EncodeTrailer(Trailer{new_footer_at, fh.seq + 1}, trailer);
  PutRaw(tail, trailer, sizeof(trailer));

  const std::string what = "adding the end state to " + path;
  // Step 1, to a footer-less trace: every state a crash can leave from here on is one the
  // recovery rules read (FORMAT.md 7.4), with every recorded event. Writing over the footer in
  // place instead could leave the old trailer pointing at the new chunk: damage, not a cut.
  bool kept =
      std::any_of(s.entries.begin(), s.entries.end(), [](const EndEntry& e) { return e.has_kept; });
  const uint16_t need = s.symlinks.empty() && !kept ? kEndStateMinor : kMetSymlinksMinor;
  if (r.version_minor() < need) {
    uint8_t minor[2];
    minor[0] = static_cast<uint8_t>(need);
    minor[1] = static_cast<uint8_t>(need >> 8);
    FAY_RETURN_IF_ERROR(PwriteAll(fd.get(), 10, minor, sizeof(minor), what));
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(footer_at)) != 0) return ErrnoError(what);
  Status st;
  if (::fsync(fd.get()) != 0) st = ErrnoError(what);
  // Step 2: the end state chunk, the footer and the trailer, appended.
  if (st.ok()) st = PwriteAll(fd.get(), footer_at, tail.data(), tail.size(), what);
  if (st.ok() && ::fsync(fd.get()) != 0) st = ErrnoError(what);
  if (st.ok()) return fd.Close(what);
  // A full disk, most likely: the old ending is smaller than the new one, and its blocks were
  // just freed. Put it back, so that a failed append costs nothing.
  bool restored = ::ftruncate(fd.get(), static_cast<off_t>(footer_at)) == 0 &&
                  PwriteAll(fd.get(), footer_at, old_tail.data(), old_tail.size(), what).ok() &&
                  ::fsync(fd.get()) == 0;
  return st.Append(restored ? "the trace is as it was, without an end state"
                            : "the trace is left without its footer: it reads as truncated "
                              "after its last events, none of them lost");
}

}  // namespace fay::trace
