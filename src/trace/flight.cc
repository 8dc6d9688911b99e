#include "trace/flight.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "trace/crc32c.h"
#include "trace/file_io.h"
#include "trace/header_codec.h"
#include "trace/zstd_codec.h"

namespace fay::trace {

FlightControl::FlightControl(uint64_t ring_bytes, std::string output, uint32_t max_dumps)
    : ring_bytes_(ring_bytes), output_(std::move(output)), max_dumps_(max_dumps) {}

bool FlightControl::Request(const std::string& reason, bool always, uint64_t at_ns) {
  const uint64_t now = ClockNs(CLOCK_MONOTONIC);
  std::lock_guard lk(mu_);
  uint64_t n = requested_.load(std::memory_order_relaxed);
  if (n > taken_) {  // a dump still to be written takes this reason too
    reasons_.emplace_back(n, reason);
    return true;
  }
  if (n >= max_dumps_ && !always) {
    ++refused_;
    return false;
  }
  reasons_.emplace_back(n + 1, reason);
  last_request_ns_.store(now, std::memory_order_release);
  pending_since_ns_.store(at_ns ? at_ns : now, std::memory_order_release);
  requested_.store(n + 1, std::memory_order_release);
  return true;
}

std::vector<std::string> FlightControl::TakeReasons(uint64_t upto) {
  std::lock_guard lk(mu_);
  std::vector<std::string> out;
  auto it = reasons_.begin();
  for (; it != reasons_.end() && it->first <= upto; ++it) out.push_back(it->second);
  reasons_.erase(reasons_.begin(), it);
  taken_ = std::max(taken_, upto);
  if (taken_ >= requested_.load(std::memory_order_relaxed)) pending_since_ns_.store(0);
  return out;
}

std::string FlightControl::NextPath() {
  std::lock_guard lk(mu_);
  if (++paths_ == 1) return output_;
  // a.fay, a.2.fay, a.3.fay: the extension stays last. Each is the last SIZE before its own
  // trigger, so consecutive dumps may hold the same calls.
  size_t slash = output_.rfind('/');
  size_t dot = output_.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0 ||
      (slash != std::string::npos && dot == slash + 1))
    return fmt::format("{}.{}", output_, paths_);
  return fmt::format("{}.{}{}", output_.substr(0, dot), paths_, output_.substr(dot));
}

void FlightControl::AddResult(FlightDumpResult r) {
  std::lock_guard lk(mu_);
  results_.push_back(std::move(r));
}

std::vector<FlightDumpResult> FlightControl::results() const {
  std::lock_guard lk(mu_);
  return results_;
}

uint64_t FlightControl::refused() const {
  std::lock_guard lk(mu_);
  return refused_;
}

uint64_t FlightRing::group() const {
  std::lock_guard lk(mu_);
  return group_;
}

void FlightRing::SetReserve(uint64_t bytes) {
  std::lock_guard lk(mu_);
  reserve_ = bytes;
}

void FlightRing::Drop(const FlightChunk& c, bool kept) {
  ++stats_.evicted_chunks;
  stats_.evicted_syscalls += c.syscalls;
  if (kept) stats_.dropped_syscalls += c.syscalls;
  if (c.group <= evicted_upto_) return;
  // The chunks of its group after it could reference its blobs: they go too, and the lanes
  // move to a new group (forgetting their blobs) at their next events chunk.
  cut_.insert(c.group);
  if (group_ <= c.group) {
    group_ = c.group + 1;
    group_bytes_ = 0;
  }
}

void FlightRing::Add(FlightChunk c, bool keep) {
  const uint64_t size = c.DumpBytes();
  std::lock_guard lk(mu_);
  // Its blobs (or the events they serve) are gone already: keeping it would break the dump.
  if (c.group <= evicted_upto_ || cut_.count(c.group)) return Drop(c, keep);
  // Room is made before the chunk goes in, so the ring never holds more than its size; but not
  // by pushing out the history a pending dump is about.
  while (!keep && stats_.bytes + size > Room() && !chunks_.empty()) EvictOldestGroup();
  // Its own group went, it can never fit, or it may not make room.
  if (c.group <= evicted_upto_ || stats_.bytes + size > Room()) return Drop(c, keep);
  chunks_.push_back(std::move(c));
  stats_.bytes += size;
  // A group closes after an eighth of the ring: eviction frees that much at a time.
  group_bytes_ += size;
  if (group_bytes_ >= std::max<uint64_t>(capacity_ / 8, 1)) {
    ++group_;
    group_bytes_ = 0;
  }
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes);
}

void FlightRing::EvictOldestGroup() {
  uint64_t oldest = chunks_.front().group;
  for (const FlightChunk& c : chunks_) oldest = std::min(oldest, c.group);
  evicted_upto_ = std::max(evicted_upto_, oldest);
  // The ring moves past the group being filled when it is the oldest (one chunk bigger than
  // the ring): lanes then start a new group at their next events chunk.
  if (group_ <= evicted_upto_) {
    group_ = evicted_upto_ + 1;
    group_bytes_ = 0;
  }
  std::erase_if(chunks_, [&](const FlightChunk& c) {
    if (c.group > evicted_upto_) return false;
    stats_.bytes -= c.DumpBytes();
    ++stats_.evicted_chunks;
    stats_.evicted_syscalls += c.syscalls;
    return true;
  });
  cut_.erase(cut_.begin(), cut_.upper_bound(evicted_upto_));
}

std::vector<FlightChunk> FlightRing::Snapshot() const {
  std::lock_guard lk(mu_);
  return {chunks_.begin(), chunks_.end()};
}

FlightRing::Stats FlightRing::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

namespace {

// The dump's file: written piece by piece, so that a dump of SIZE never needs a second SIZE of
// memory, at offsets it counts.
struct DumpFile {
  UniqueFd fd;
  std::string what;
  uint64_t offset = 0;
  Status Write(const void* p, size_t n) {
    FAY_RETURN_IF_ERROR(WriteAll(fd.get(), p, n, what));
    offset += n;
    return Status::Ok();
  }
  Status Chunk(ChunkHeader h, uint32_t seq, const Bytes& payload) {
    h.seq = seq;
    uint8_t hdr[kChunkHeaderSize];
    EncodeChunkHeader(h, hdr);
    FAY_RETURN_IF_ERROR(Write(hdr, sizeof hdr));
    return Write(payload.data(), payload.size());
  }
};

Status WriteDump(DumpFile& f, const RecordingInfo& info, const std::string& writer_name,
                 const std::vector<FlightChunk>& chunks) {
  Bytes pre;
  PutRaw(pre, kFileMagic, sizeof(kFileMagic));
  PutU16(pre, kFormatMajor);
  PutU16(pre, kFormatMinor);
  PutU32(pre, 0);
  FAY_RETURN_IF_ERROR(f.Write(pre.data(), pre.size()));
  uint32_t fields = 0;
  Bytes header = EncodeHeader(info, writer_name, &fields);
  ChunkHeader hh;
  hh.type = ChunkType::kHeader;
  hh.codec = Codec::kNone;
  hh.stored_length = hh.raw_length = static_cast<uint32_t>(header.size());
  hh.count = fields;
  hh.payload_crc = Crc32c(header.data(), header.size());
  FAY_RETURN_IF_ERROR(f.Chunk(hh, 0, header));
  // The chunks keep their payloads; only their place and sequence number are new.
  Footer footer;
  uint32_t seq = 1;
  for (const FlightChunk& c : chunks) {
    if (const auto* e = std::get_if<EventChunkIndex>(&c.index)) {
      footer.events.push_back(*e);
      footer.events.back().offset = f.offset;
      footer.events.back().seq = seq;
    } else if (const auto* b = std::get_if<BlobChunkIndex>(&c.index)) {
      footer.blobs.push_back(*b);
      footer.blobs.back().offset = f.offset;
      footer.blobs.back().seq = seq;
    }
    FAY_RETURN_IF_ERROR(f.Chunk(c.header, seq++, *c.payload));
  }
  Bytes raw = EncodeFooter(footer);
  Bytes packed;
  Compressor zstd(3);
  FAY_RETURN_IF_ERROR(zstd.Compress(raw, &packed));
  ChunkHeader fh;
  fh.type = ChunkType::kFooter;
  fh.codec = Codec::kZstd;
  fh.stored_length = static_cast<uint32_t>(packed.size());
  fh.raw_length = static_cast<uint32_t>(raw.size());
  fh.count = static_cast<uint32_t>(footer.events.size() + footer.blobs.size());
  fh.payload_crc = Crc32c(packed.data(), packed.size());
  const uint64_t footer_offset = f.offset;
  FAY_RETURN_IF_ERROR(f.Chunk(fh, seq++, packed));
  uint8_t trailer[kTrailerSize];
  EncodeTrailer(Trailer{footer_offset, seq}, trailer);
  return f.Write(trailer, sizeof trailer);
}

}  // namespace

Status WriteFlightDump(const std::string& path, const RecordingInfo& info,
                       const std::string& writer_name, const std::vector<FlightChunk>& chunks,
                       uint64_t* bytes) {
  const std::string tmp = path + ".part";
  DumpFile f;
  f.what = "writing " + tmp;
  f.fd.reset(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!f.fd) return ErrnoError("cannot create flight dump " + tmp);
  Status st = WriteDump(f, info, writer_name, chunks);
  if (st.ok() && ::fsync(f.fd.get()) != 0) st = ErrnoError(f.what);
  if (st.ok()) st = f.fd.Close(f.what);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = ErrnoError("renaming " + tmp + " to " + path);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  *bytes = f.offset;
  return Status::Ok();
}

}  // namespace fay::trace
