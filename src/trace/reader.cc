#include "trace/reader.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <variant>

#include "trace/crc32c.h"
#include "trace/event_codec.h"
#include "trace/footer.h"
#include "trace/header_codec.h"

namespace fay::trace {
namespace {

// Decompressed blob chunks kept for lookups; writers put blobs just before the events that use
// them, so a few recent chunks serve nearly every reference.
constexpr size_t kBlobCacheChunks = 4;

bool Overlaps(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  return a0 <= b1 && b0 <= a1;
}

bool HasTid(const std::vector<int32_t>& tids, int32_t tid) {
  return std::find(tids.begin(), tids.end(), tid) != tids.end();
}

}  // namespace

bool ReadFilter::Matches(const SyscallEvent& ev) const {
  if (!tids.empty() && !HasTid(tids, ev.tid)) return false;
  return Overlaps(ev.entry_ns, ev.LastNs(), from_ns, to_ns);
}

bool ReadFilter::Matches(const ProcessEvent& ev) const {
  if (!tids.empty() && !HasTid(tids, ev.tid)) return false;
  return ev.time_ns >= from_ns && ev.time_ns <= to_ns;
}

bool ReadFilter::MayMatch(const ChunkRef& c) const {
  if (!c.indexed) return true;
  if (!Overlaps(c.first_ns, c.last_ns, from_ns, to_ns)) return false;
  if (tids.empty()) return true;
  for (int32_t t : tids)
    if (std::binary_search(c.tids.begin(), c.tids.end(), t)) return true;
  return false;
}

Expected<Reader> Reader::Open(const std::string& path) {
  Reader r;
  r.path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open trace " + path);
  r.fd_ = OwnedFd(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError("cannot stat trace " + path);
  if (!S_ISREG(st.st_mode)) return Error(Code::kInvalidArgument, path + ": not a regular file");
  r.file_size_ = static_cast<uint64_t>(st.st_size);
  FAY_RETURN_IF_ERROR(r.ReadPreamble());
  FAY_RETURN_IF_ERROR(r.ReadHeaderChunk());
  std::string footer_problem;
  if (!r.TryFooter(&footer_problem)) {
    r.WalkChunks(r.data_start_);
    // A valid trailer over a footer or index that does not check out: damage, not a cut.
    if (r.damage_.ok() && !footer_problem.empty()) {
      r.damage_ = Error(Code::kIo, footer_problem);
      r.truncated_ = false;
    } else if (r.damage_.ok() && r.footer_at_end_) {
      r.damage_ = Error(Code::kIo, fmt::format("{}: offset {}: the trailer after the footer chunk "
                                               "is corrupt",
                                               path, r.file_size_ - kTrailerSize));
    }
  }
  r.ReadEndState();
  ReaderStats& s = r.stats_;
  s.file_bytes = r.file_size_;
  for (const ChunkRef& c : r.chunks_) {
    ++s.chunks;
    s.event_chunks += c.type == ChunkType::kEvents;
    s.blob_chunks += c.type == ChunkType::kBlobs;
    s.bytes_raw += c.raw_length;
    s.bytes_stored += c.stored_length;
  }
  return r;
}

Status Reader::ReadPreamble() {
  uint8_t pre[kPreambleSize];
  size_t got;
  FAY_RETURN_IF_ERROR(ReadAt(fd_.get(), 0, pre, sizeof(pre), &got, "reading " + path_));
  if (got < sizeof(pre))
    return Error(Code::kIo, fmt::format("{}: not a fay trace: {} bytes, shorter than the {}-byte "
                                        "preamble",
                                        path_, file_size_, kPreambleSize));
  if (std::memcmp(pre, kFileMagic, sizeof(kFileMagic)) != 0)
    return Error(Code::kIo,
                 fmt::format("{}: not a fay trace: offset 0: expected magic {}, found {}", path_,
                             DescribeBytes(reinterpret_cast<const uint8_t*>(kFileMagic), 8),
                             DescribeBytes(pre, 8)));
  major_ = static_cast<uint16_t>(pre[8] | pre[9] << 8);
  minor_ = static_cast<uint16_t>(pre[10] | pre[11] << 8);
  if (major_ == 0 || major_ > kFormatMajor)
    return Error(Code::kUnsupported,
                 fmt::format("{}: trace format version {}.{} is not one this fay reads (it reads "
                             "1.x up to {}.{}); a newer fay may read it",
                             path_, major_, minor_, kFormatMajor, kFormatMinor));
  return Status::Ok();
}

std::string Reader::Where(const ChunkRef& c) const {
  return fmt::format("{}: offset {}: chunk {} ({})", path_, c.offset, c.seq, ChunkTypeName(c.type));
}

Status Reader::LoadChunk(const ChunkRef& c, ChunkHeader* h, Bytes* raw) {
  Bytes buf;
  FAY_RETURN_IF_ERROR(ReadStored(c, h, &buf));
  const uint8_t* payload = buf.data() + kChunkHeaderSize;
  if (h->codec == Codec::kNone) {
    raw->assign(payload, payload + h->stored_length);
    return Status::Ok();
  }
  Status st = zstd_->Decompress(payload, h->stored_length, h->raw_length, raw);
  if (!st.ok()) return Error(Code::kIo, Where(c) + ": " + st.message());
  return Status::Ok();
}

Status Reader::ReadStored(const ChunkRef& c, ChunkHeader* h, Bytes* out) {
  Bytes& buf = *out;
  buf.resize(kChunkHeaderSize + c.stored_length);
  size_t got;
  FAY_RETURN_IF_ERROR(
      ReadAt(fd_.get(), c.offset, buf.data(), buf.size(), &got, "reading " + path_));
  if (got < buf.size())
    return Error(Code::kIo,
                 fmt::format("{}: ends {} bytes into a {}-byte chunk", Where(c), got, buf.size()));
  switch (DecodeChunkHeader(buf.data(), h)) {
    case HeaderCheck::kBadMagic:
      return Error(Code::kIo, fmt::format("{}: offset {}: expected chunk magic 'FAYC', found {}",
                                          path_, c.offset, DescribeBytes(buf.data(), 4)));
    case HeaderCheck::kBadCrc:
      return Error(Code::kIo,
                   fmt::format("{}: offset {}: chunk header CRC32C mismatch", path_, c.offset));
    case HeaderCheck::kOk:
      break;
  }
  if (h->type != c.type || h->seq != c.seq || h->stored_length != c.stored_length ||
      h->raw_length != c.raw_length || h->count != c.count)
    return Error(Code::kIo,
                 fmt::format("{}: chunk header disagrees with the footer index (the header says "
                             "chunk {} ({}), {} stored, {} raw bytes, count {}; the index chunk "
                             "{} ({}), {} stored, {} raw bytes, count {})",
                             Where(c), h->seq, ChunkTypeName(h->type), h->stored_length,
                             h->raw_length, h->count, c.seq, ChunkTypeName(c.type), c.stored_length,
                             c.raw_length, c.count));
  const uint8_t* payload = buf.data() + kChunkHeaderSize;
  uint32_t crc = Crc32c(payload, h->stored_length);
  if (crc != h->payload_crc)
    return Error(
        Code::kIo,
        fmt::format("{}: payload CRC32C mismatch (stored {:#010x}, computed {:#010x}); "
                    "the {} payload bytes at offset {} are corrupt",
                    Where(c), h->payload_crc, crc, h->stored_length, c.offset + kChunkHeaderSize));
  FAY_RETURN_IF_ERROR(CheckClaim(c, *h, payload));
  if (h->codec == Codec::kNone && h->stored_length != h->raw_length)
    return Error(Code::kIo, fmt::format("{}: uncompressed chunk with stored length {} != raw "
                                        "length {}",
                                        Where(c), h->stored_length, h->raw_length));
  if (h->codec != Codec::kNone && h->codec != Codec::kZstd)
    return Error(Code::kIo,
                 fmt::format("{}: unknown codec {}", Where(c), static_cast<int>(h->codec)));
  return Status::Ok();
}

Status Reader::CheckClaim(const ChunkRef& c, const ChunkHeader& h, const uint8_t* payload) const {
  const uint64_t raw = h.raw_length;
  auto lie = [&](const std::string& why) {
    return Error(Code::kIo, fmt::format("{}: header claims {} raw bytes, {}; refused before "
                                        "decompressing",
                                        Where(c), raw, why));
  };
  if (h.codec == Codec::kZstd) {
    if (raw > uint64_t{h.stored_length} * kMaxZstdRatio)
      return lie(
          fmt::format("more than zstd can make of {} stored bytes (at most {} times as "
                      "many)",
                      h.stored_length, kMaxZstdRatio));
    unsigned long long framed = ZSTD_getFrameContentSize(payload, h.stored_length);
    if (framed != ZSTD_CONTENTSIZE_UNKNOWN && framed != ZSTD_CONTENTSIZE_ERROR && framed != raw)
      return lie(fmt::format("its zstd frame declares {}", framed));
  }
  switch (h.type) {
    case ChunkType::kEvents:
      if (raw > kMaxEventsChunkRaw)
        return lie(fmt::format("more than an events chunk may hold ({})", kMaxEventsChunkRaw));
      if (raw > uint64_t{h.count} * kMaxRecordRaw)
        return lie(fmt::format("more than its {} records may hold ({} each at most)", h.count,
                               kMaxRecordRaw));
      if (uint64_t{h.count} * 2 > raw)
        return lie(fmt::format("fewer than its {} records take (2 bytes each at least)", h.count));
      break;
    case ChunkType::kBlobs: {
      // With a footer the index lays the chunk out exactly, and LoadChunk held the header to it.
      // Every captured buffer fits the recording's max_buffer (the eBPF recorder states the
      // bound its ring sets even without --max-buffer); 0 leaves only the kernel's limit.
      const uint64_t blob =
          info_.max_buffer ? std::min(info_.max_buffer, kMaxBlobSize) : kMaxBlobSize;
      if (raw > uint64_t{h.count} * (blob + 26))
        return lie(fmt::format("more than its {} blobs may hold ({} bytes each at most{})", h.count,
                               blob + 26,
                               info_.max_buffer ? ", the recording's max buffer and an entry's "
                                                  "hash and size"
                                                : ""));
      break;
    }
    case ChunkType::kFooter:
      if (raw > file_size_ * 64 + (1 << 20))
        return lie(fmt::format("more than the index of a {}-byte file takes", file_size_));
      break;
    case ChunkType::kHeader:
      if (raw > (64u << 20)) return lie("more than a header chunk may hold (64 MiB)");
      break;
    case ChunkType::kEndState:
      if (raw > (uint64_t{h.count} + 1) * kMaxEndEntryRaw)
        return lie(fmt::format("more than its {} entries may hold ({} each at most)", h.count,
                               kMaxEndEntryRaw));
      if (uint64_t{h.count} * kMinEndEntryRaw + 2 > raw)
        return lie(fmt::format("fewer than its {} entries take ({} bytes each at least)", h.count,
                               kMinEndEntryRaw));
      break;
  }
  return Status::Ok();
}

Status Reader::ReadHeaderChunk() {
  uint8_t hb[kChunkHeaderSize];
  size_t got;
  FAY_RETURN_IF_ERROR(ReadAt(fd_.get(), kPreambleSize, hb, sizeof(hb), &got, "reading " + path_));
  if (got < sizeof(hb))
    return Error(Code::kIo, fmt::format("{}: truncated inside the header chunk (file is {} bytes)",
                                        path_, file_size_));
  ChunkHeader h;
  switch (DecodeChunkHeader(hb, &h)) {
    case HeaderCheck::kBadMagic:
      return Error(Code::kIo, fmt::format("{}: offset {}: expected chunk magic 'FAYC', found {}",
                                          path_, kPreambleSize, DescribeBytes(hb, 4)));
    case HeaderCheck::kBadCrc:
      return Error(Code::kIo, fmt::format("{}: offset {}: chunk header CRC32C mismatch", path_,
                                          kPreambleSize));
    case HeaderCheck::kOk:
      break;
  }
  if (h.type != ChunkType::kHeader)
    return Error(Code::kIo, fmt::format("{}: offset {}: expected the header chunk, found a {} "
                                        "chunk",
                                        path_, kPreambleSize, ChunkTypeName(h.type)));
  if (kPreambleSize + kChunkHeaderSize + uint64_t{h.stored_length} > file_size_)
    return Error(Code::kIo, fmt::format("{}: truncated inside the header chunk (file is {} bytes)",
                                        path_, file_size_));
  if (h.seq != 0)
    return Error(Code::kIo, fmt::format("{}: offset {}: the header chunk has sequence number {}, "
                                        "expected 0",
                                        path_, kPreambleSize, h.seq));
  ChunkRef c{kPreambleSize, h.type, h.seq, h.stored_length, h.raw_length, h.count};
  Bytes raw;
  FAY_RETURN_IF_ERROR(LoadChunk(c, &h, &raw));
  Status st = DecodeHeader(raw.data(), raw.size(), &info_, &writer_);
  if (!st.ok()) return Error(Code::kIo, Where(c) + ": " + st.message());
  data_start_ = kPreambleSize + kChunkHeaderSize + h.stored_length;
  valid_end_ = data_start_;
  last_chunk_offset_ = kPreambleSize;
  last_chunk_seq_ = h.seq;
  return Status::Ok();
}

bool Reader::TryFooter(std::string* problem) {
  if (file_size_ < data_start_ + kChunkHeaderSize + kTrailerSize) return false;
  uint8_t tb[kTrailerSize];
  size_t got;
  if (!ReadAt(fd_.get(), file_size_ - kTrailerSize, tb, sizeof(tb), &got, path_).ok() ||
      got != sizeof(tb))
    return false;
  Trailer t;
  if (!DecodeTrailer(tb, &t)) return false;
  // From here on the file says it is complete: whatever does not check out is damage.
  const uint64_t trailer_at = file_size_ - kTrailerSize;
  auto fail = [&](const std::string& why) {
    *problem = why;
    return false;
  };
  if (t.footer_offset < data_start_ || t.footer_offset + kChunkHeaderSize > trailer_at)
    return fail(
        fmt::format("{}: offset {}: the trailer points at offset {}, outside the file's "
                    "chunks",
                    path_, trailer_at, t.footer_offset));
  uint8_t hb[kChunkHeaderSize];
  if (!ReadAt(fd_.get(), t.footer_offset, hb, sizeof(hb), &got, path_).ok() || got != sizeof(hb))
    return fail(fmt::format("{}: offset {}: cannot read the footer chunk the trailer points at",
                            path_, t.footer_offset));
  ChunkHeader h;
  if (DecodeChunkHeader(hb, &h) != HeaderCheck::kOk || h.type != ChunkType::kFooter)
    return fail(
        fmt::format("{}: offset {}: the trailer points at offset {}, where no footer "
                    "chunk starts",
                    path_, trailer_at, t.footer_offset));
  if (t.footer_offset + kChunkHeaderSize + h.stored_length != trailer_at)
    return fail(fmt::format(
        "{}: offset {}: the footer chunk ends at offset {}, not where the "
        "trailer starts ({})",
        path_, t.footer_offset, t.footer_offset + kChunkHeaderSize + h.stored_length, trailer_at));
  ChunkRef fc{t.footer_offset, h.type, h.seq, h.stored_length, h.raw_length, h.count};
  Bytes raw;
  Footer f;
  if (Status st = LoadChunk(fc, &h, &raw); !st.ok()) return fail(st.message());
  if (Status st = DecodeFooter(raw.data(), raw.size(), &f); !st.ok())
    return fail(Where(fc) + ": " + st.message());
  std::vector<ChunkRef> chunks;
  for (const BlobChunkIndex& b : f.blobs)
    chunks.push_back(ChunkRef{b.offset, ChunkType::kBlobs, b.seq, b.stored_length, b.raw_length,
                              static_cast<uint32_t>(b.blobs.size())});
  for (const EventChunkIndex& e : f.events)
    chunks.push_back(ChunkRef{e.offset, ChunkType::kEvents, e.seq, e.stored_length, e.raw_length,
                              e.records, true, e.first_ns, e.last_ns, e.tids, e.stream});
  std::sort(chunks.begin(), chunks.end(),
            [](const ChunkRef& a, const ChunkRef& b) { return a.offset < b.offset; });
  // The index must describe the file exactly: chunks that follow one another from the header
  // chunk to the footer, numbered 1, 2, ... in file order, the footer next, and the trailer
  // counting them all. Chunks of types this reader does not know are not indexed: they may fill
  // a gap, and are walked.
  std::vector<ChunkRef> all;
  uint64_t end = data_start_;
  uint32_t seq = 1;
  for (const ChunkRef& c : chunks) {
    if (c.offset < end)
      return fail(
          fmt::format("{}: offset {}: the footer index places chunk {} ({}) there, "
                      "inside the chunk before it (which ends at offset {})",
                      path_, c.offset, c.seq, ChunkTypeName(c.type), end));
    if (c.offset > end && !WalkGap(end, c.offset, false, &seq, &all, problem)) return false;
    if (c.seq != seq)
      return fail(
          fmt::format("{}: offset {}: the footer index numbers the {} chunk there {}, "
                      "expected {}",
                      path_, c.offset, ChunkTypeName(c.type), c.seq, seq));
    ++seq;
    end = c.offset + kChunkHeaderSize + c.stored_length;
    all.push_back(c);
  }
  if (end > t.footer_offset)
    return fail(
        fmt::format("{}: offset {}: the footer index places a chunk across the footer "
                    "chunk",
                    path_, t.footer_offset));
  if (end < t.footer_offset && !WalkGap(end, t.footer_offset, true, &seq, &all, problem))
    return false;
  if (h.seq != seq)
    return fail(
        fmt::format("{}: offset {}: the footer chunk is chunk {}, expected {} after the {} "
                    "chunks before it",
                    path_, t.footer_offset, h.seq, seq, seq));
  if (t.chunk_count != seq + 1)
    return fail(fmt::format("{}: offset {}: the trailer counts {} chunks, the file holds {}", path_,
                            trailer_at, t.chunk_count, seq + 1));
  // A blob chunk's index lays out its payload exactly: each entry's bytes right after its hash
  // and size, the chunk's raw length their sum. The header is held to it before decompressing.
  for (const BlobChunkIndex& b : f.blobs) {
    uint64_t at = 0;
    for (const BlobEntry& e : b.blobs) {
      uint64_t size_len = 1;
      for (uint64_t v = e.size; v >= 0x80; v >>= 7) ++size_len;
      at += 16 + size_len;
      if (e.offset != at)
        return fail(
            fmt::format("{}: offset {}: the footer index places blob {} of chunk {} at "
                        "raw offset {}, where the entries before it end at {}",
                        path_, b.offset, HashHex(e.hash), b.seq, e.offset, at));
      at += e.size;
    }
    if (at != b.raw_length)
      return fail(
          fmt::format("{}: offset {}: the footer index lays out {} raw bytes of blobs in "
                      "chunk {}, and gives its raw length as {}",
                      path_, b.offset, at, b.seq, b.raw_length));
  }
  chunks_ = std::move(all);
  indexed_blobs_.assign(chunks_.size(), 0);
  index_checked_.assign(chunks_.size(), false);
  // Blob indices refer to chunks_ positions, known only after sorting. Offsets are distinct and
  // ascending (checked above), so each entry's chunk is one binary search away: comparing every
  // pair made Open quadratic in a crafted footer's blob chunk count.
  for (const BlobChunkIndex& b : f.blobs) {
    auto it = std::lower_bound(chunks_.begin(), chunks_.end(), b.offset,
                               [](const ChunkRef& c, uint64_t off) { return c.offset < off; });
    auto i = static_cast<uint32_t>(it - chunks_.begin());
    for (const BlobEntry& e : b.blobs)
      if (AddBlob(e.hash, BlobLoc{i, e.offset, e.size})) ++indexed_blobs_[i];
  }
  has_footer_ = true;
  last_chunk_offset_ = t.footer_offset;
  last_chunk_seq_ = h.seq;
  valid_end_ = file_size_;
  return true;
}

bool Reader::WalkGap(uint64_t from, uint64_t to, bool before_footer, uint32_t* seq,
                     std::vector<ChunkRef>* out, std::string* problem) {
  bool end_state_seen = false;
  while (from < to) {
    uint8_t hb[kChunkHeaderSize];
    size_t got;
    ChunkHeader h;
    if (to - from < kChunkHeaderSize ||
        !ReadAt(fd_.get(), from, hb, sizeof(hb), &got, path_).ok() || got != sizeof(hb) ||
        DecodeChunkHeader(hb, &h) != HeaderCheck::kOk) {
      *problem = fmt::format(
          "{}: offset {}: no chunk starts there, and the footer index names "
          "none before offset {}",
          path_, from, to);
      return false;
    }
    uint64_t end = from + kChunkHeaderSize + h.stored_length;
    // The footer does not index the end state chunk: it is added after the recording, in the
    // footer's place (trace/end_state.h), and only there.
    if (h.type == ChunkType::kEndState && (!before_footer || end_state_seen)) {
      *problem =
          fmt::format("{}: offset {}: chunk {} ({}) {}", path_, from, h.seq, ChunkTypeName(h.type),
                      end_state_seen ? "is the second in the file"
                                     : "lies between indexed chunks, not before the footer");
      return false;
    }
    end_state_seen |= h.type == ChunkType::kEndState;
    if (h.type >= ChunkType::kHeader && h.type <= ChunkType::kFooter) {
      *problem = fmt::format("{}: offset {}: chunk {} ({}) is not in the footer index", path_, from,
                             h.seq, ChunkTypeName(h.type));
      return false;
    }
    if (h.seq != *seq || end > to) {
      *problem = fmt::format(
          "{}: offset {}: chunk {} of an unknown type where chunk {} was "
          "expected, ending before offset {}",
          path_, from, h.seq, *seq, to);
      return false;
    }
    out->push_back(ChunkRef{from, h.type, h.seq, h.stored_length, h.raw_length, h.count});
    ++*seq;
    from = end;
  }
  return true;
}

void Reader::WalkChunks(uint64_t offset) {
  for (;;) {
    if (offset == file_size_) {
      truncated_ = true;
      return;
    }
    uint8_t hb[kChunkHeaderSize];
    size_t got;
    Status st = ReadAt(fd_.get(), offset, hb, sizeof(hb), &got, "reading " + path_);
    if (!st.ok()) {
      damage_ = st;
      return;
    }
    if (got < sizeof(hb)) {
      truncated_ = true;
      return;
    }
    ChunkHeader h;
    switch (DecodeChunkHeader(hb, &h)) {
      case HeaderCheck::kBadMagic:
        damage_ = Error(Code::kIo, fmt::format("{}: offset {}: expected chunk magic 'FAYC', found "
                                               "{}",
                                               path_, offset, DescribeBytes(hb, 4)));
        return;
      case HeaderCheck::kBadCrc:
        damage_ = Error(Code::kIo,
                        fmt::format("{}: offset {}: chunk header CRC32C mismatch", path_, offset));
        return;
      case HeaderCheck::kOk:
        break;
    }
    uint64_t end = offset + kChunkHeaderSize + h.stored_length;
    if (end > file_size_) {
      truncated_ = true;
      return;
    }
    // Each chunk is the one after the last: a chunk stored twice, or out of order, or a gap
    // where chunks went missing, would otherwise read as if the recording held it so.
    if (h.seq != last_chunk_seq_ + 1) {
      damage_ = Error(
          Code::kIo,
          fmt::format(
              "{}: offset {}: chunk {} ({}) follows chunk {}; expected chunk "
              "{} ({})",
              path_, offset, h.seq, ChunkTypeName(h.type), last_chunk_seq_, last_chunk_seq_ + 1,
              h.seq <= last_chunk_seq_ ? "a chunk repeated or out of order" : "chunks missing"));
      return;
    }
    // Cut inside the trailer: every chunk is whole, nothing is missing; read on without the
    // index.
    if (h.type == ChunkType::kFooter && file_size_ - end < kTrailerSize) return;
    if (h.type == ChunkType::kFooter) {
      // The footer is the last chunk, and only the trailer follows it. Reached here, the
      // trailer did not check out (Open reports why) or the footer is not last: more bytes
      // follow it, e.g. a second trace appended with cat, which would otherwise go unread.
      if (end + kTrailerSize != file_size_)
        damage_ = Error(Code::kIo,
                        fmt::format("{}: offset {}: the footer chunk (chunk {}) is not the last "
                                    "chunk: {} bytes follow it where a {}-byte trailer should end "
                                    "the file (a second trace appended?)",
                                    path_, offset, h.seq, file_size_ - end, kTrailerSize));
      else
        footer_at_end_ = true;
      return;
    }
    chunks_.push_back(ChunkRef{offset, h.type, h.seq, h.stored_length, h.raw_length, h.count});
    if (h.type == ChunkType::kEvents) chunks_.back().stream = h.flags % kMaxStreams;
    last_chunk_offset_ = offset;
    last_chunk_seq_ = h.seq;
    valid_end_ = end;
    offset = end;
  }
}

void Reader::ReadEndState() {
  auto it = std::find_if(chunks_.begin(), chunks_.end(),
                         [](const ChunkRef& c) { return c.type == ChunkType::kEndState; });
  if (it == chunks_.end()) return;
  const ChunkRef& c = *it;
  ChunkHeader h;
  Bytes raw;
  if (Status st = LoadChunk(c, &h, &raw); !st.ok()) {
    end_state_error_ = st.message();
    return;
  }
  auto s = DecodeEndState(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
  if (!s.ok()) {
    end_state_error_ = Where(c) + ": " + s.status().message();
    return;
  }
  if (s->entries.size() != h.count) {
    end_state_error_ = fmt::format("{}: {} entries, the chunk header counts {}", Where(c),
                                   s->entries.size(), h.count);
    return;
  }
  end_state_ = std::move(*s);
}

std::string Reader::TruncationMessage() const {
  if (!truncated_) return "";
  return fmt::format(
      "truncated after chunk {} at offset {} ({} bytes of an incomplete chunk "
      "follow it)",
      last_chunk_seq_, last_chunk_offset_, file_size_ - valid_end_);
}

std::string Reader::TruncationNotice() const {
  if (!truncated_) return "";
  return fmt::format("{} is {}; everything before it was read", path_, TruncationMessage());
}

bool Reader::AddBlob(const Hash128& h, BlobLoc loc) {
  if (!blobs_.emplace(h, loc).second) return false;
  ++stats_.blobs;
  stats_.blob_bytes += loc.size;
  return true;
}

Expected<std::shared_ptr<const Bytes>> Reader::BlobChunk(uint32_t index) {
  for (const CachedChunk& c : cache_)
    if (c.chunk == index) return c.raw;
  // Buffers shared out of a chunk keep it alive after the cache lets go of it: reuse that copy
  // rather than decode a second one.
  if (index < live_chunks_.size())
    if (auto live = live_chunks_[index].lock()) return live;
  const ChunkRef& c = chunks_[index];
  ChunkHeader h;
  auto raw = std::make_shared<Bytes>();
  FAY_RETURN_IF_ERROR(LoadChunk(c, &h, raw.get()));
  std::vector<BlobEntry> entries;
  Status st = DecodeBlobs(raw->data(), raw->size(), h.count, &entries);
  if (!st.ok()) return Error(Code::kIo, Where(c) + ": " + st.message());
  if (has_footer_) {
    FAY_RETURN_IF_ERROR(CheckBlobIndex(index, entries));
  } else {
    for (const BlobEntry& e : entries) AddBlob(e.hash, BlobLoc{index, e.offset, e.size});
  }
  if (cache_.size() == kBlobCacheChunks) cache_.pop_front();
  cache_.push_back(CachedChunk{index, raw});
  if (share_blobs_) {
    if (live_chunks_.size() <= index) live_chunks_.resize(chunks_.size());
    live_chunks_[index] = raw;
  }
  return std::shared_ptr<const Bytes>(raw);
}

Status Reader::CheckBlobIndex(uint32_t index, const std::vector<BlobEntry>& entries) {
  if (index_checked_[index]) return Status::Ok();
  // DecodeBlobs checked each entry's bytes against its own hash. What the footer says of the
  // chunk must be what it holds: each blob the index places here is an entry of the chunk, at
  // the same raw offset and of the same size. Otherwise a reference would resolve to another
  // blob's bytes.
  const ChunkRef& c = chunks_[index];
  uint32_t matched = 0;
  for (const BlobEntry& e : entries) {
    auto it = blobs_.find(e.hash);
    if (it == blobs_.end())
      return Error(Code::kIo, fmt::format("{}: blob {} at raw offset {} is not in the footer index",
                                          Where(c), HashHex(e.hash), e.offset));
    const BlobLoc& loc = it->second;
    if (loc.chunk != index) continue;  // an earlier chunk holds it too, and is the one used
    if (loc.offset == e.offset && loc.size == e.size) {
      ++matched;
      continue;
    }
    // The same content twice in one chunk: the index names one of them.
    bool twice = false;
    for (const BlobEntry& o : entries)
      twice |= o.hash == e.hash && o.offset == loc.offset && o.size == loc.size;
    if (twice) continue;
    return Error(Code::kIo,
                 fmt::format("{}: the footer index places blob {} at raw offset {} ({} bytes); "
                             "the chunk holds it at raw offset {} ({} bytes)",
                             Where(c), HashHex(e.hash), loc.offset, loc.size, e.offset, e.size));
  }
  if (matched != indexed_blobs_[index]) {
    // An index entry for a hash the chunk does not hold: it points at other bytes.
    for (const auto& [h, loc] : blobs_) {
      if (loc.chunk != index) continue;
      bool held = false;
      for (const BlobEntry& e : entries) held |= e.hash == h && e.offset == loc.offset;
      if (!held)
        return Error(Code::kIo,
                     fmt::format("{}: the footer index places blob {} at raw offset {} ({} "
                                 "bytes), where the chunk holds no blob of that hash",
                                 Where(c), HashHex(h), loc.offset, loc.size));
    }
  }
  index_checked_[index] = true;
  return Status::Ok();
}

Status Reader::CheckBlob(const Hash128& h, uint64_t size) {
  return LocateBlob(h, size).status();
}

Expected<Reader::BlobLoc> Reader::LocateBlob(const Hash128& h, uint64_t size) {
  auto it = blobs_.find(h);
  if (it == blobs_.end())
    return Error(Code::kIo,
                 fmt::format("references blob {} that no earlier blob chunk holds", HashHex(h)));
  if (it->second.size != size)
    return Error(Code::kIo, fmt::format("references blob {} as {} bytes, the store holds {}",
                                        HashHex(h), size, it->second.size));
  stats_.blob_bytes_referenced += size;
  return it->second;
}

Expected<std::pair<Reader::BlobLoc, std::shared_ptr<const Bytes>>> Reader::FindBlob(
    const Hash128& h, uint64_t size) {
  FAY_ASSIGN_OR_RETURN(BlobLoc loc, LocateBlob(h, size));
  FAY_ASSIGN_OR_RETURN(auto raw, BlobChunk(loc.chunk));
  if (uint64_t{loc.offset} + loc.size > raw->size())
    return Error(Code::kIo, fmt::format("blob {} lies outside its chunk", HashHex(h)));
  return std::make_pair(loc, std::move(raw));
}

Status Reader::ResolveBlob(const Hash128& h, uint64_t size, std::vector<uint8_t>* out) {
  FAY_ASSIGN_OR_RETURN(auto found, FindBlob(h, size));
  const auto& [loc, raw] = found;
  out->assign(raw->begin() + loc.offset, raw->begin() + loc.offset + loc.size);
  return Status::Ok();
}

Status Reader::SharedBlob(const Hash128& h, uint64_t size, CapturedBuffer::SharedBytes* out) {
  FAY_ASSIGN_OR_RETURN(auto found, FindBlob(h, size));
  auto& [loc, raw] = found;
  const uint8_t* at = raw->data() + loc.offset;
  out->data = std::shared_ptr<const uint8_t>(std::move(raw), at);
  out->size = loc.size;
  return Status::Ok();
}

Status Reader::FetchShared(const StoredBlob& ref, CapturedBuffer::SharedBytes* out) {
  return SharedBlob(Hash128{ref.hash_lo, ref.hash_hi}, ref.size, out);
}

Status Reader::ForEach(const SyscallFn& on_syscall, const ProcessFn& on_process) {
  return ForEach(ReadFilter{}, on_syscall, on_process);
}

Status Reader::ForEach(const ReadFilter& filter, const SyscallFn& on_syscall,
                       const ProcessFn& on_process) {
  if (!on_syscall) return Walk(filter, {}, on_process);
  return Walk(
      filter, [&](SyscallEvent& ev) { on_syscall(ev); }, on_process);
}

Status Reader::ForEachTaking(const ReadFilter& filter, const TakingSyscallFn& on_syscall,
                             const ProcessFn& on_process) {
  if (!on_syscall) return Walk(filter, {}, on_process);
  return Walk(
      filter, [&](SyscallEvent& ev) { on_syscall(std::move(ev)); }, on_process);
}

Status Reader::Walk(const ReadFilter& filter, const std::function<void(SyscallEvent&)>& on_syscall,
                    const ProcessFn& on_process) {
  stats_.syscall_events = stats_.process_events = stats_.lost_events = 0;
  stats_.bytes_captured = stats_.chunks_skipped = stats_.blob_bytes_referenced = 0;
  DecodeSinks sinks;
  // A filter that keeps everything is not asked per record (the offline query's hot loop).
  if (!filter.tids.empty() || filter.from_ns > 0 ||
      filter.to_ns != std::numeric_limits<uint64_t>::max())
    sinks.want_syscall = [&](const SyscallEvent& ev) { return filter.Matches(ev); };
  sinks.syscall = [&](SyscallEvent& ev) {
    ++stats_.syscall_events;
    stats_.bytes_captured += ev.CapturedBytes();
    if (on_syscall) on_syscall(ev);
  };
  sinks.process = [&](const ProcessEvent& ev) {
    if (!filter.Matches(ev)) return;
    ++stats_.process_events;
    if (on_process) on_process(ev);
  };
  sinks.loss = [&](const LossRecord& loss) {
    if (loss.time_ns >= filter.from_ns && loss.time_ns <= filter.to_ns) {
      stats_.lost_events += loss.count;
      stats_.lost_by_cpu[loss.cpu] += loss.count;
    }
  };
  sinks.blob = [this](const Hash128& h, uint64_t size, std::vector<uint8_t>* out) {
    return ResolveBlob(h, size, out);
  };
  if (leave_unread_) {
    sinks.blob_ref = [this](const Hash128& h, uint64_t size) { return CheckBlob(h, size); };
    sinks.leave_unread = leave_unread_;
  }
  if (share_blobs_)
    sinks.shared_blob = [this](const Hash128& h, uint64_t size, CapturedBuffer::SharedBytes* out) {
      return SharedBlob(h, size, out);
    };
  if (filter.shards <= 1) {
    for (const ChunkRef& c : chunks_)
      if (c.type == ChunkType::kEvents && c.stream != 0) return WalkMerged(filter, sinks);
  }
  Bytes raw;
  uint32_t events_seen = 0;
  for (uint32_t i = 0; i < chunks_.size(); ++i) {
    const ChunkRef& c = chunks_[i];
    if (c.type == ChunkType::kBlobs) {
      // Without a footer the only way to learn a blob chunk's hashes is to read it.
      if (!has_footer_) FAY_RETURN_IF_ERROR(IndexBlobChunk(i));
      continue;
    }
    if (c.type != ChunkType::kEvents) continue;  // a chunk type from a newer minor
    uint32_t ordinal = events_seen++;
    if (filter.shards > 1 && ordinal % filter.shards != filter.shard) continue;
    if (!filter.MayMatch(c)) {
      ++stats_.chunks_skipped;
      continue;
    }
    ChunkHeader h;
    FAY_RETURN_IF_ERROR(LoadChunk(c, &h, &raw));
    Status st = DecodeEvents(raw.data(), raw.size(), h.count, sinks);
    if (!st.ok()) return Error(Code::kIo, Where(c) + ": " + st.message());
  }
  return damage_;
}

Status Reader::WalkMerged(const ReadFilter& filter, const DecodeSinks& sinks) {
  using Item = std::variant<SyscallEvent, ProcessEvent, LossRecord>;
  struct Stream {
    std::vector<uint32_t> chunks;  // its events chunks, in file order
    size_t next = 0;               // the next of them to decode
    std::vector<Item> items;       // the decoded chunk's events
    size_t pos = 0;
  };
  std::vector<Stream> streams(kMaxStreams);
  for (uint32_t i = 0; i < chunks_.size(); ++i) {
    const ChunkRef& c = chunks_[i];
    if (c.type == ChunkType::kBlobs && !has_footer_) {
      // Without a footer a blob chunk's hashes are learned by reading it; another stream's
      // events may need it before the walk would reach it.
      FAY_RETURN_IF_ERROR(IndexBlobChunk(i));
    }
    if (c.type != ChunkType::kEvents) continue;
    if (!filter.MayMatch(c)) {
      ++stats_.chunks_skipped;
      continue;
    }
    streams[c.stream].chunks.push_back(i);
  }
  DecodeSinks collect = sinks;
  Stream* filling = nullptr;
  collect.syscall = [&](SyscallEvent& ev) { filling->items.emplace_back(std::move(ev)); };
  collect.process = [&](const ProcessEvent& ev) { filling->items.emplace_back(ev); };
  collect.loss = [&](const LossRecord& loss) { filling->items.emplace_back(loss); };
  Bytes raw;
  // Makes s.items[s.pos] the stream's next event; false once it has no more.
  auto ready = [&](Stream& s) -> Expected<bool> {
    while (s.pos == s.items.size()) {
      if (s.next == s.chunks.size()) return false;
      s.items.clear();
      s.pos = 0;
      const ChunkRef& c = chunks_[s.chunks[s.next++]];
      ChunkHeader h;
      FAY_RETURN_IF_ERROR(LoadChunk(c, &h, &raw));
      filling = &s;
      Status st = DecodeEvents(raw.data(), raw.size(), h.count, collect);
      if (!st.ok()) return Error(Code::kIo, Where(c) + ": " + st.message());
    }
    return true;
  };
  // A call is written when it returns, so its return is its place in its stream.
  auto when = [](const Item& item) {
    if (const auto* ev = std::get_if<SyscallEvent>(&item)) return ev->LastNs();
    if (const auto* pe = std::get_if<ProcessEvent>(&item)) return pe->time_ns;
    return std::get<LossRecord>(item).time_ns;
  };
  std::vector<Stream*> live;
  for (Stream& s : streams) {
    if (s.chunks.empty()) continue;
    FAY_ASSIGN_OR_RETURN(bool more, ready(s));
    if (more) live.push_back(&s);
  }
  while (!live.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < live.size(); ++i)
      if (when(live[i]->items[live[i]->pos]) < when(live[best]->items[live[best]->pos])) best = i;
    Stream& s = *live[best];
    Item& item = s.items[s.pos++];
    if (auto* ev = std::get_if<SyscallEvent>(&item))
      sinks.syscall(*ev);
    else if (const auto* pe = std::get_if<ProcessEvent>(&item))
      sinks.process(*pe);
    else
      sinks.loss(std::get<LossRecord>(item));
    FAY_ASSIGN_OR_RETURN(bool more, ready(s));
    if (!more) live.erase(live.begin() + static_cast<long>(best));
  }
  return damage_;
}

}  // namespace fay::trace
