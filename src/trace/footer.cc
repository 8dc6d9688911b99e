#include "trace/footer.h"

#include <fmt/core.h>

namespace fay::trace {

Bytes EncodeFooter(const Footer& f) {
  // Written through a pointer into room for the longest encoding, then cut to size: a trace
  // of small files has a footer of hundreds of kilobytes, encoded while the user waits.
  constexpr size_t kV = 10;  // the longest varint
  size_t room = kV;
  for (const EventChunkIndex& e : f.events) room += 8 * kV + e.tids.size() * kV;
  room += kV;
  for (const BlobChunkIndex& b : f.blobs) room += 5 * kV + b.blobs.size() * (16 + 2 * kV);
  bool streams = false;
  for (const EventChunkIndex& e : f.events) streams |= e.stream != 0;
  if (streams) room += kV + f.events.size() * kV;
  Bytes out(room);
  uint8_t* p = out.data();
  p = PutVarintAt(p, f.events.size());
  for (const EventChunkIndex& e : f.events) {
    p = PutVarintAt(p, e.offset);
    p = PutVarintAt(p, e.seq);
    p = PutVarintAt(p, e.stored_length);
    p = PutVarintAt(p, e.raw_length);
    p = PutVarintAt(p, e.first_ns);
    p = PutVarintAt(p, e.last_ns - e.first_ns);
    p = PutVarintAt(p, e.records);
    p = PutVarintAt(p, e.tids.size());
    int32_t prev = 0;
    for (int32_t tid : e.tids) {
      p = PutZigzagAt(p, int64_t{tid} - int64_t{prev});
      prev = tid;
    }
  }
  p = PutVarintAt(p, f.blobs.size());
  for (const BlobChunkIndex& b : f.blobs) {
    p = PutVarintAt(p, b.offset);
    p = PutVarintAt(p, b.seq);
    p = PutVarintAt(p, b.stored_length);
    p = PutVarintAt(p, b.raw_length);
    p = PutVarintAt(p, b.blobs.size());
    for (const BlobEntry& e : b.blobs) {
      StoreU64(p, e.hash.lo);
      StoreU64(p + 8, e.hash.hi);
      p = PutVarintAt(p + 16, e.offset);
      p = PutVarintAt(p, e.size);
    }
  }
  // Minor 3, only when there are several streams: each events chunk's, in the order above. A
  // minor 2 reader takes it as trailing bytes.
  if (streams) {
    p = PutVarintAt(p, f.events.size());
    for (const EventChunkIndex& e : f.events) p = PutVarintAt(p, e.stream);
  }
  out.resize(static_cast<size_t>(p - out.data()));
  return out;
}

Status DecodeFooter(const uint8_t* data, size_t n, Footer* f) {
  *f = Footer{};
  ByteReader r(data, n);
  auto bad = [&](std::string_view what) {
    return Error(Code::kIo, fmt::format("footer: {} at payload byte {}", what, r.pos()));
  };
  auto u32 = [&](uint32_t* v) {
    uint64_t x;
    if (!r.Varint(&x) || x > UINT32_MAX) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  };
  uint64_t n_events;
  // Every entry takes at least one byte per field, which bounds the counts before allocating.
  if (!r.Varint(&n_events) || n_events > r.remaining()) return bad("bad events chunk count");
  f->events.resize(n_events);
  for (EventChunkIndex& e : f->events) {
    uint64_t span, ntids;
    if (!r.Varint(&e.offset) || !u32(&e.seq) || !u32(&e.stored_length) || !u32(&e.raw_length) ||
        !r.Varint(&e.first_ns) || !r.Varint(&span) || !u32(&e.records) || !r.Varint(&ntids) ||
        ntids > r.remaining())
      return bad("malformed events chunk entry");
    e.last_ns = e.first_ns + span;
    e.tids.resize(ntids);
    int64_t prev = 0;
    for (int32_t& tid : e.tids) {
      int64_t d;
      if (!r.Zigzag(&d)) return bad("malformed thread list");
      // Unsigned, so a hostile delta wraps instead of overflowing; honest deltas come out the same.
      prev = static_cast<int64_t>(static_cast<uint64_t>(prev) + static_cast<uint64_t>(d));
      tid = static_cast<int32_t>(prev);
    }
  }
  uint64_t n_blobs;
  if (!r.Varint(&n_blobs) || n_blobs > r.remaining()) return bad("bad blob chunk count");
  f->blobs.resize(n_blobs);
  for (BlobChunkIndex& b : f->blobs) {
    uint64_t count;
    if (!r.Varint(&b.offset) || !u32(&b.seq) || !u32(&b.stored_length) || !u32(&b.raw_length) ||
        !r.Varint(&count) || count > r.remaining() / 18)
      return bad("malformed blob chunk entry");
    b.blobs.resize(count);
    for (BlobEntry& e : b.blobs) {
      if (!r.U64(&e.hash.lo) || !r.U64(&e.hash.hi) || !u32(&e.offset) || !u32(&e.size))
        return bad("malformed blob entry");
    }
  }
  if (r.remaining() == 0) return Status::Ok();
  uint64_t n_streams;
  if (!r.Varint(&n_streams) || n_streams != f->events.size()) return bad("malformed stream list");
  for (EventChunkIndex& e : f->events) {
    uint64_t s;
    if (!r.Varint(&s) || s >= kMaxStreams) return bad("malformed stream list");
    e.stream = static_cast<uint16_t>(s);
  }
  // Bytes left over are fields from a newer minor.
  return Status::Ok();
}

}  // namespace fay::trace
