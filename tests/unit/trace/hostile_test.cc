// Crafted (hostile, not just damaged) traces: every checksum is right, but the lengths and counts
// lie. Each case found by tests/fuzz; the reader must refuse with a precise message and without
// allocating what the lie claims.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "trace/crc32c.h"
#include "trace/event_codec.h"
#include "trace/footer.h"
#include "trace/format.h"
#include "trace/header_codec.h"
#include "trace/reader.h"
#include "trace/zstd_codec.h"
#include "trace_test_util.h"

namespace fay::trace {
namespace {

using testing::ReadAll;
using testing::ReadUnderMemoryLimit;
using testing::SampleInfo;
using testing::ScratchDir;
using testing::WriteEvent;

// A file built chunk by chunk, with correct CRCs over whatever the chunk headers say.
class FileBuilder {
 public:
  explicit FileBuilder(const RecordingInfo& info = SampleInfo()) {
    PutRaw(bytes_, kFileMagic, 8);
    PutU16(bytes_, kFormatMajor);
    PutU16(bytes_, kFormatMinor);
    PutU32(bytes_, 0);
    uint32_t fields;
    Bytes header = EncodeHeader(info, "fay test", &fields);
    Chunk(ChunkType::kHeader, Codec::kNone, header, header.size(), fields);
  }

  // Returns the chunk's offset.
  uint64_t Chunk(ChunkType type, Codec codec, const Bytes& payload, uint32_t raw_length,
                 uint32_t count) {
    uint64_t at = bytes_.size();
    ChunkHeader h;
    h.type = type;
    h.codec = codec;
    h.seq = seq_++;
    h.stored_length = static_cast<uint32_t>(payload.size());
    h.raw_length = raw_length;
    h.count = count;
    h.payload_crc = Crc32c(payload.data(), payload.size());
    uint8_t hb[kChunkHeaderSize];
    EncodeChunkHeader(h, hb);
    PutRaw(bytes_, hb, sizeof(hb));
    PutRaw(bytes_, payload.data(), payload.size());
    return at;
  }

  // Ends the file with a footer chunk and the trailer that points at it.
  void Footer(const Bytes& footer) {
    uint64_t at = Chunk(ChunkType::kFooter, Codec::kNone, footer, footer.size(), 0);
    uint8_t tb[kTrailerSize];
    EncodeTrailer(Trailer{at, seq_}, tb);
    PutRaw(bytes_, tb, sizeof(tb));
  }

  std::string Write(const ScratchDir& dir, const std::string& name) const {
    std::string path = dir.File(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes_.data()),
              static_cast<std::streamsize>(bytes_.size()));
    return path;
  }

 private:
  Bytes bytes_;
  uint32_t seq_ = 0;
};

SyscallEvent Getpid() {
  SyscallEvent e;
  e.pid = e.tid = 3;
  e.entry_ns = 10;
  e.exit_ns = 20;
  e.nr = 39;
  e.ret = 3;
  return e;
}

// A zstd events chunk whose header claims 4 GiB of raw bytes: the frame holds a few dozen. The
// reader used to resize its buffer to the claim before decompressing; under a 1 GiB address
// space limit that aborts the process.
TEST(HostileTraceTest, ZstdChunkClaiming4GiBIsRefusedWithoutAllocatingIt) {
  ScratchDir dir;
  Bytes events;
  EventEncoder enc;
  enc.Syscall(Getpid(), {}, &events);
  Bytes z;
  Compressor comp(3);
  ASSERT_TRUE(comp.Compress(events, &z).ok());
  FileBuilder b;
  uint64_t at = b.Chunk(ChunkType::kEvents, Codec::kZstd, z, 0xFFFFFFFFu, 1);
  std::string path = b.Write(dir, "claim4g.fay");
  std::string want = path + ": offset " + std::to_string(at) +
                     ": chunk 1 (events): header claims 4294967295 raw bytes, more than zstd can "
                     "make of " +
                     std::to_string(z.size()) +
                     " stored bytes (at most 32768 times as many); refused before decompressing";
  EXPECT_EXIT(ReadUnderMemoryLimit(path, want), ::testing::ExitedWithCode(0), "");
}

// The same lie one level down: the decompressor grows its buffer with the frame's real output.
TEST(HostileTraceTest, DecompressorTrustsTheFrameNotTheClaim) {
  Bytes raw(1000, 7), z, out;
  Compressor comp(3);
  ASSERT_TRUE(comp.Compress(raw, &z).ok());
  Decompressor d;
  Status st = d.Decompress(z.data(), z.size(), 0xFFFFFFFFu, &out);
  EXPECT_EQ(st.message(), "zstd: 1000 bytes after decompression, header says 4294967295");
  EXPECT_LE(out.capacity(), size_t{64} << 20);
  // A claim short of the real size is refused too, and an honest one still decodes.
  st = d.Decompress(z.data(), z.size(), 999, &out);
  EXPECT_EQ(st.message(), "zstd: Destination buffer is too small");
  ASSERT_TRUE(d.Decompress(z.data(), z.size(), 1000, &out).ok());
  EXPECT_EQ(out, raw);
}

// Past 64 MiB the buffer grows as the frame decodes; an honest large chunk still reads exactly.
TEST(HostileTraceTest, LargeHonestChunkDecodesThroughTheGrowingBuffer) {
  Bytes raw((size_t{70} << 20) + 3), z, out;
  for (size_t i = 0; i < raw.size(); i += 4096) raw[i] = static_cast<uint8_t>(i >> 12);
  Compressor comp(1);
  ASSERT_TRUE(comp.Compress(raw, &z).ok());
  Decompressor d;
  ASSERT_TRUE(d.Decompress(z.data(), z.size(), raw.size(), &out).ok());
  EXPECT_TRUE(out == raw);
  Status st = d.Decompress(z.data(), z.size(), raw.size() + 1, &out);
  EXPECT_EQ(st.message(), "zstd: 73400323 bytes after decompression, header says 73400324");
  st = d.Decompress(z.data(), z.size() - 1, raw.size(), &out);
  EXPECT_EQ(st.message(), "zstd: frame ends after 73400322 bytes, header says 73400323");
}

// Found by fuzz_codecs: a footer thread list whose deltas sum past INT64_MIN (signed overflow,
// undefined behaviour). The sum wraps now; the list still decodes and the entry after it is
// checked as before.
TEST(HostileTraceTest, FooterThreadDeltasThatOverflowWrap) {
  const Bytes payload = {0x0d, 0x01, 0x41, 0x62, 0xfc, 0x7f, 0x00, 0x00, 0x00, 0x04, 0x00,
                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x23, 0xff, 0xff,
                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x00};
  Footer f;
  Status st = DecodeFooter(payload.data(), payload.size(), &f);
  EXPECT_EQ(st.message(), "footer: malformed events chunk entry at payload byte 32");
}

// The same in an events chunk: a thread delta of INT64_MIN after a negative tid.
TEST(HostileTraceTest, SyscallThreadDeltaThatOverflowsWraps) {
  SyscallEvent e = Getpid();
  e.pid = e.tid = -5;
  Bytes events;
  EventEncoder enc;
  enc.Syscall(e, {}, &events);
  size_t second = events.size();
  Bytes body;
  PutVarint(body, 0);             // no optional parts
  PutVarint(body, ~uint64_t{0});  // zigzag(INT64_MIN): the tid delta
  PutVarint(events, 1);           // a syscall record
  PutVarint(events, body.size());
  PutRaw(events, body.data(), body.size());
  std::vector<std::string> got;
  DecodeSinks sinks;
  sinks.syscall = [&](const SyscallEvent& ev) { got.push_back(std::to_string(ev.tid)); };
  Status st = DecodeEvents(events.data(), events.size(), 2, sinks);
  EXPECT_EQ(st.message(),
            "record 1 at payload byte " + std::to_string(second) + ": malformed syscall record");
  EXPECT_EQ(got, std::vector<std::string>{"-5"});
}

// A footer indexing 100000 (empty) blob chunks: matching each blob chunk to its index entry
// compared every pair, 10^10 steps, so Open hung. It is one lookup per entry now.
TEST(HostileTraceTest, FooterWithManyBlobChunksOpensInLinearTime) {
  constexpr uint32_t kChunks = 100000;
  ScratchDir dir;
  FileBuilder b;
  struct Footer f;
  for (uint32_t i = 0; i < kChunks; ++i) {
    BlobChunkIndex idx;
    idx.offset = b.Chunk(ChunkType::kBlobs, Codec::kNone, {}, 0, 0);
    idx.seq = i + 1;
    f.blobs.push_back(idx);
  }
  b.Footer(EncodeFooter(f));
  std::string path = b.Write(dir, "blobchunks.fay");
  auto start = std::chrono::steady_clock::now();
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->has_footer());
  EXPECT_EQ(r->stats().blob_chunks, kChunks);
  Status st;
  EXPECT_EQ(ReadAll(*r, &st).size(), 0u);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A footer-less file (a recording that was killed) whose one blob chunk holds 256 MiB of zeros
// in a few KB and a small blob, then an events chunk. Without a footer the reader learns the
// chunk's hashes by reading it; an honest whole-buffer recording may hold such a chunk.
struct BigBlobFile {
  std::string path;
  Hash128 small;
};
BigBlobFile WriteBigBlobFile(const ScratchDir& dir, bool bad_small_hash) {
  Bytes raw;
  {
    std::vector<uint8_t> zeros(size_t{256} << 20);
    EncodeBlob(HashBlob(zeros.data(), zeros.size()), zeros, &raw);
  }
  // A write of 64 bytes: past kInlineMax, so its buffer is a blob of the chunk.
  SyscallEvent w = WriteEvent(10, std::vector<uint8_t>(64, 'h'));
  const std::vector<uint8_t>& bytes = w.buffers[0].bytes;
  Hash128 small = HashBlob(bytes.data(), bytes.size());
  Hash128 stored = small;
  if (bad_small_hash) stored.lo ^= 1;
  EncodeBlob(stored, bytes, &raw);
  Bytes z;
  Compressor comp(1);
  EXPECT_TRUE(comp.Compress(raw, &z).ok());
  RecordingInfo whole = SampleInfo();
  whole.max_buffer = 0;  // whole buffers, as the ptrace backend records them
  FileBuilder b(whole);
  b.Chunk(ChunkType::kBlobs, Codec::kZstd, z, static_cast<uint32_t>(raw.size()), 2);
  Bytes events;
  EventEncoder enc;
  enc.Syscall(
      w, [](const Hash128&, const std::vector<uint8_t>&) {}, &events);
  b.Chunk(ChunkType::kEvents, Codec::kNone, events, static_cast<uint32_t>(events.size()), 1);
  return BigBlobFile{b.Write(dir, "bigblob.fay"), small};
}

size_t VmSizeBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) << 10;
  return 0;
}

void ReadFooterlessUnderLimit(const std::string& path) {
  size_t limit = VmSizeBytes() + (size_t{128} << 20);
  struct rlimit lim = {limit, limit};
  ::setrlimit(RLIMIT_AS, &lim);
  auto r = Reader::Open(path);
  if (!r.ok()) _exit(2);
  r->SkipBlobs(true);  // sizes only, as fay info reads
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  if (got.size() != 1) _exit(3);
  if (!st.ok()) _exit(4);
  _exit(r->stats().blobs == 2 ? 0 : 5);
}

// Reading the events of such a file streams the chunk through a window: under an address-space
// limit of 128 MiB above what the process already maps, it reads its one event and indexes both
// blobs. It used to decode the chunk whole, 256 MiB at once.
TEST(HostileTraceTest, FooterlessBigBlobChunkIsIndexedInAWindow) {
  ScratchDir dir;
  BigBlobFile f = WriteBigBlobFile(dir, false);
  EXPECT_EXIT(ReadFooterlessUnderLimit(f.path), ::testing::ExitedWithCode(0), "");
}

// The streamed chunk's blobs resolve to their bytes afterwards, and a blob whose bytes do not
// match its hash is found in the stream, named as DecodeBlobs names it.
TEST(HostileTraceTest, FooterlessBigBlobChunkChecksEveryHashInTheStream) {
  ScratchDir dir;
  {
    BigBlobFile f = WriteBigBlobFile(dir, false);
    auto r = Reader::Open(f.path);
    ASSERT_TRUE(r.ok());
    std::string got;
    (void)r->ForEach([&](const SyscallEvent& e) {
      for (const CapturedBuffer& b : e.buffers) got.assign(b.View().begin(), b.View().end());
    });
    EXPECT_EQ(got, std::string(64, 'h'));
  }
  BigBlobFile f = WriteBigBlobFile(dir, true);
  auto r = Reader::Open(f.path);
  ASSERT_TRUE(r.ok());
  Status st;
  EXPECT_TRUE(ReadAll(*r, &st).empty());
  EXPECT_NE(st.message().find(": chunk 1 (blobs): blob 1 at payload byte 268435477: content does "
                              "not match its hash " +
                              HashHex(Hash128{f.small.lo ^ 1, f.small.hi})),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace fay::trace
