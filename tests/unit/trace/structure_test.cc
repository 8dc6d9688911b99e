// A trace file is untrusted input (issue 23, items 4, 6 and 7): files whose every CRC is right
// but whose structure lies. A chunk stored twice, a footer that is not last, an index that
// numbers or places chunks wrongly, a chunk claiming more than its counts permit, and a footer
// pointing one blob at another's bytes: each is named with its offset, after the events before
// it, and nothing the lie claims is allocated.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "trace/crc32c.h"
#include "trace/event_codec.h"
#include "trace/footer.h"
#include "trace/format.h"
#include "trace/header_codec.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace/zstd_codec.h"
#include "trace_test_util.h"

namespace fay::trace {
namespace {

using testing::Comm;
using testing::ReadAll;
using testing::ReadUnderMemoryLimit;
using testing::SampleInfo;
using testing::ScratchDir;
using testing::Slurp;
using testing::Spit;
using testing::WriteEvent;

Bytes ChunkBytes(ChunkType type, Codec codec, uint32_t seq, const Bytes& payload,
                 uint32_t raw_length, uint32_t count, uint16_t flags = 0) {
  ChunkHeader h;
  h.type = type;
  h.codec = codec;
  h.flags = flags;
  h.seq = seq;
  h.stored_length = static_cast<uint32_t>(payload.size());
  h.raw_length = raw_length;
  h.count = count;
  h.payload_crc = Crc32c(payload.data(), payload.size());
  Bytes out(kChunkHeaderSize);
  EncodeChunkHeader(h, out.data());
  PutRaw(out, payload.data(), payload.size());
  return out;
}

std::string Str(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// A real trace: `n` writes of distinct 100-byte payloads, small chunks so there are several.
std::string Record(const std::string& path, int n) {
  WriterOptions o;
  o.chunk_bytes = 256;
  auto w = Writer::Create(path, SampleInfo(), o);
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < n; ++i)
    (*w)->Append(
        WriteEvent(100 + 100 * i, std::vector<uint8_t>(100, static_cast<uint8_t>('a' + i))));
  EXPECT_TRUE((*w)->Close().ok());
  return Slurp(path);
}

struct Parsed {
  std::vector<ChunkRef> chunks;  // every chunk, header and footer included
  Footer footer;
};

Parsed Parse(const std::string& file) {
  Parsed p;
  uint64_t at = kPreambleSize;
  while (at + kChunkHeaderSize <= file.size()) {
    ChunkHeader h;
    if (DecodeChunkHeader(reinterpret_cast<const uint8_t*>(file.data()) + at, &h) !=
        HeaderCheck::kOk)
      break;
    p.chunks.push_back(ChunkRef{at, h.type, h.seq, h.stored_length, h.raw_length, h.count});
    if (h.type == ChunkType::kFooter) {
      const auto* payload = reinterpret_cast<const uint8_t*>(file.data()) + at + kChunkHeaderSize;
      Bytes raw;
      Decompressor d;
      EXPECT_TRUE(d.Decompress(payload, h.stored_length, h.raw_length, &raw).ok());
      EXPECT_TRUE(DecodeFooter(raw.data(), raw.size(), &p.footer).ok());
      break;
    }
    at += kChunkHeaderSize + h.stored_length;
  }
  return p;
}

// The file up to its footer, then `f` as the footer (uncompressed) and a trailer for it.
std::string WithFooter(const std::string& file, const Parsed& p, const Footer& f) {
  const ChunkRef& fc = p.chunks.back();
  std::string out = file.substr(0, fc.offset);
  Bytes payload = EncodeFooter(f);
  out += Str(ChunkBytes(ChunkType::kFooter, Codec::kNone, fc.seq, payload,
                        static_cast<uint32_t>(payload.size()), fc.count));
  uint8_t tb[kTrailerSize];
  EncodeTrailer(Trailer{fc.offset, fc.seq + 1}, tb);
  out.append(reinterpret_cast<const char*>(tb), sizeof(tb));
  return out;
}

Status ReadStatus(const std::string& path, size_t* events = nullptr) {
  auto r = Reader::Open(path);
  if (!r.ok()) return r.status();
  r->ShareBlobs(false);
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  if (events) *events = got.size();
  return st;
}

TEST(StructureTest, AnEventsChunkStoredTwiceIsNamedNotCountedTwice) {
  ScratchDir dir;
  std::string file = Record(dir.File("t.fay"), 12);
  Parsed p = Parse(file);
  // No footer: the chunks as walked, the second events chunk stored twice.
  const ChunkRef* ev = nullptr;
  size_t before = 0;
  for (const ChunkRef& c : p.chunks) {
    if (c.type != ChunkType::kEvents) continue;
    before += c.count;
    ev = &c;
    break;
  }
  ASSERT_NE(ev, nullptr);
  uint64_t end = ev->offset + kChunkHeaderSize + ev->stored_length;
  std::string dup = file.substr(0, end) + file.substr(ev->offset, end - ev->offset);
  std::string path = dir.File("dup.fay");
  Spit(path, dup);
  size_t events = 0;
  Status st = ReadStatus(path, &events);
  EXPECT_EQ(events, before);
  EXPECT_EQ(st.message(), fmt::format("{}: offset {}: chunk {} (events) follows chunk {}; expected "
                                      "chunk {} (a chunk repeated or out of order)",
                                      path, end, ev->seq, ev->seq, ev->seq + 1));
}

TEST(StructureTest, ASecondTraceAppendedIsNamedAtTheFirstFooter) {
  ScratchDir dir;
  std::string file = Record(dir.File("t.fay"), 12);
  Parsed p = Parse(file);
  std::string path = dir.File("cat.fay");
  Spit(path, file + file);
  size_t events = 0;
  Status st = ReadStatus(path, &events);
  EXPECT_EQ(events, 12u);
  EXPECT_EQ(
      st.message(),
      fmt::format("{}: offset {}: the footer chunk (chunk {}) is not the last chunk: {} "
                  "bytes follow it where a 24-byte trailer should end the file (a second "
                  "trace appended?)",
                  path, p.chunks.back().offset, p.chunks.back().seq, file.size() + kTrailerSize));
}

TEST(StructureTest, AnIndexThatNumbersAChunkWronglyIsDamage) {
  ScratchDir dir;
  std::string file = Record(dir.File("t.fay"), 12);
  Parsed p = Parse(file);
  Footer f = p.footer;
  ASSERT_GE(f.events.size(), 2u);
  f.events[1].seq += 7;
  std::string path = dir.File("seq.fay");
  Spit(path, WithFooter(file, p, f));
  Status st = ReadStatus(path);
  EXPECT_EQ(st.message(),
            fmt::format("{}: offset {}: the footer index numbers the events chunk "
                        "there {}, expected {}",
                        path, f.events[1].offset, f.events[1].seq, f.events[1].seq - 7));
  // The same file, its index right: nothing to say.
  std::string good = dir.File("good.fay");
  Spit(good, WithFooter(file, p, p.footer));
  EXPECT_TRUE(ReadStatus(good).ok()) << ReadStatus(good).message();
}

TEST(StructureTest, AnIndexThatLeavesAnEventsChunkOutIsDamage) {
  ScratchDir dir;
  std::string file = Record(dir.File("t.fay"), 12);
  Parsed p = Parse(file);
  Footer f = p.footer;
  ASSERT_GE(f.events.size(), 2u);
  EventChunkIndex gone = f.events.back();
  f.events.pop_back();
  std::string path = dir.File("gap.fay");
  Spit(path, WithFooter(file, p, f));
  EXPECT_EQ(ReadStatus(path).message(),
            fmt::format("{}: offset {}: chunk {} (events) is not in the footer index", path,
                        gone.offset, gone.seq));
}

TEST(StructureTest, AFooterPointingOneBlobAtAnothersBytesIsRefused) {
  ScratchDir dir;
  std::string file = Record(dir.File("t.fay"), 4);
  Parsed p = Parse(file);
  Footer f = p.footer;
  ASSERT_FALSE(f.blobs.empty());
  ASSERT_GE(f.blobs[0].blobs.size(), 2u);
  BlobEntry& a = f.blobs[0].blobs[0];
  BlobEntry& b = f.blobs[0].blobs[1];
  ASSERT_EQ(a.size, b.size);
  std::swap(a.hash, b.hash);
  std::string path = dir.File("swap.fay");
  Spit(path, WithFooter(file, p, f));
  // The reader used to deliver the first write with the second one's bytes, and say nothing.
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  std::vector<std::vector<uint8_t>> seen;
  Status st = r->ForEach([&](const SyscallEvent& e) { seen.push_back(e.buffers.at(0).bytes); });
  EXPECT_TRUE(seen.empty());
  EXPECT_NE(st.message().find(fmt::format("offset {}: chunk {} (blobs): the footer index places "
                                          "blob {} at raw offset {} (100 bytes); the chunk holds "
                                          "it at raw offset {} (100 bytes)",
                                          f.blobs[0].offset, f.blobs[0].seq, HashHex(b.hash),
                                          b.offset, a.offset)),
            std::string::npos)
      << st.message();
  // Moving an entry onto another's bytes breaks the layout: refused at Open's index check.
  f = p.footer;
  f.blobs[0].blobs[0].offset = f.blobs[0].blobs[1].offset;
  Spit(path, WithFooter(file, p, f));
  EXPECT_NE(ReadStatus(path).message().find("the footer index places blob"), std::string::npos);
}

// Both cases of the issue, read under a 1 GiB address space limit: a 33 KB trace whose events
// chunk claims (and its zstd frame really makes) 1 GiB, and two such chunks in two streams.
TEST(StructureTest, A1GiBClaimIsRefusedBeforeDecompressing) {
  for (const char* name : {"claim1g.fay", "claim1g_x2.fay"}) {
    std::string path = std::string(FAY_SOURCE_DIR "/tests/unit/trace/fixtures/") + name;
    std::string want = path +
                       ": offset 230: chunk 1 (events): header claims 1073741824 raw bytes, more "
                       "than an events chunk may hold (16777216); refused before decompressing";
    EXPECT_EXIT(ReadUnderMemoryLimit(path, want), ::testing::ExitedWithCode(0), "") << name;
  }
}

TEST(StructureTest, ClaimsBeyondTheCountsOrTheFrameAreRefused) {
  ScratchDir dir;
  Bytes header;
  uint32_t fields;
  Bytes info = EncodeHeader(SampleInfo(), "fay test", &fields);
  PutRaw(header, kFileMagic, 8);
  PutU16(header, kFormatMajor);
  PutU16(header, kFormatMinor);
  PutU32(header, 0);
  Bytes hc = ChunkBytes(ChunkType::kHeader, Codec::kNone, 0, info,
                        static_cast<uint32_t>(info.size()), fields);
  PutRaw(header, hc.data(), hc.size());
  const uint64_t at = header.size();
  Bytes raw(2 << 20, 0), z;
  Compressor comp(1);
  ASSERT_TRUE(comp.Compress(raw, &z).ok());
  auto check = [&](uint32_t claim, uint32_t count, const std::string& why) {
    std::string path = dir.File("claim.fay");
    Spit(path, Str(header) + Str(ChunkBytes(ChunkType::kEvents, Codec::kZstd, 1, z, claim, count)));
    EXPECT_EQ(ReadStatus(path).message(),
              fmt::format("{}: offset {}: chunk 1 (events): header claims {} raw bytes, {}; "
                          "refused before decompressing",
                          path, at, claim, why));
  };
  // One record cannot take 2 MiB, and the frame declares what it holds.
  check(2 << 20, 1, "more than its 1 records may hold (1048576 each at most)");
  check((2 << 20) + 1, 4, "its zstd frame declares 2097152");
  check(3, 4, "its zstd frame declares 2097152");
  check(7, 4, "its zstd frame declares 2097152");
  // Without a footer a blob chunk is read to learn its hashes, by every reader: its claim is
  // held to the recording's max buffer (SampleInfo's 4096) before that.
  std::string path = dir.File("blob.fay");
  Spit(path, Str(header) + Str(ChunkBytes(ChunkType::kBlobs, Codec::kZstd, 1, z, 2 << 20, 1)));
  EXPECT_EQ(ReadStatus(path).message(),
            fmt::format("{}: offset {}: chunk 1 (blobs): header claims 2097152 raw bytes, more "
                        "than its 1 blobs may hold (4122 bytes each at most, the recording's max "
                        "buffer and an entry's hash and size); refused before decompressing",
                        path, at));
}

}  // namespace
}  // namespace fay::trace
