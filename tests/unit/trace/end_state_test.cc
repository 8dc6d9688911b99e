// The end state section (docs/FORMAT.md 4.7): its payload round trip and refusals, its addition
// to a complete trace in place, and what readers see of it, whole, corrupt, cut short or absent.
#include "trace/end_state.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <fstream>
#include <random>
#include <sstream>

#include "trace/crc32c.h"
#include "trace/format.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace/zstd_codec.h"
#include "trace_test_util.h"

namespace fay::trace {
namespace {

using testing::ExpectedLines;
using testing::MakeStream;
using testing::ReadAll;
using testing::SampleInfo;
using testing::ScratchDir;
using testing::Slurp;
using testing::Spit;
using testing::Stream;

const char* const kFixture = FAY_SOURCE_DIR "/tests/unit/trace/fixtures/v1.fay";

// Where the trace's last chunk (its footer, in a complete one) starts.
uint64_t LastChunkAt(const std::string& path) {
  auto r = Reader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->last_chunk_offset() : 0;
}

Hash128 HashOf(std::string_view s) {
  return HashBlob(s.data(), s.size());
}

// One entry of every kind, xattrs on some, in path order.
EndState SampleState() {
  EndState s;
  s.skipped = 2;
  EndEntry gone;
  gone.path = "/tmp/work dir/deleted";
  s.entries.push_back(gone);
  EndEntry dir;
  dir.path = "/tmp/work dir/out";
  dir.kind = EndKind::kDir;
  dir.mode = 0755;
  dir.xattrs = {{"security.selinux", HashOf("unconfined_u"), 12}, {"user.a", HashOf(""), 0}};
  s.entries.push_back(dir);
  EndEntry file;
  file.path = "/tmp/work dir/out/result.bin";
  file.kind = EndKind::kFile;
  file.mode = 04644;
  file.size = 1ull << 40;
  file.content = HashOf("content");
  file.xattrs = {{"user.checksum", HashOf("abc"), 3}};
  s.entries.push_back(file);
  EndEntry link;
  link.path = "/tmp/work dir/out/z-link";
  link.kind = EndKind::kSymlink;
  link.mode = 0777;
  link.target = "../elsewhere/\xff name";
  s.entries.push_back(link);
  EndEntry fifo;
  fifo.path = "/tmp/work dir/pipe";
  fifo.kind = EndKind::kOther;
  fifo.mode = 0600;
  s.entries.push_back(fifo);
  return s;
}

void WriteTrace(const std::string& path, const Stream& s) {
  WriterOptions o;
  o.chunk_bytes = 4096;  // many events chunks, and blob chunks between them
  o.blob_chunk_bytes = 16 << 10;
  testing::WriteStream(path, s, o);
}

// What AppendEndState does, with any chunk stored as given: for the chunks it would refuse to
// write.
void InsertBeforeFooter(const std::string& path, ChunkType type, Codec codec, const Bytes& stored,
                        uint32_t raw_length, uint32_t count) {
  std::string f = Slurp(path);
  ASSERT_GE(f.size(), kTrailerSize);
  Trailer t;
  ASSERT_TRUE(
      DecodeTrailer(reinterpret_cast<const uint8_t*>(f.data() + f.size() - kTrailerSize), &t));
  std::string footer = f.substr(t.footer_offset, f.size() - kTrailerSize - t.footer_offset);
  auto* fb = reinterpret_cast<uint8_t*>(footer.data());
  ChunkHeader fh;
  ASSERT_EQ(DecodeChunkHeader(fb, &fh), HeaderCheck::kOk);
  ChunkHeader h;
  h.type = type;
  h.codec = codec;
  h.seq = fh.seq;
  h.stored_length = static_cast<uint32_t>(stored.size());
  h.raw_length = raw_length;
  h.count = count;
  h.payload_crc = Crc32c(stored.data(), stored.size());
  uint8_t hb[kChunkHeaderSize];
  EncodeChunkHeader(h, hb);
  ++fh.seq;
  EncodeChunkHeader(fh, fb);
  std::string out = f.substr(0, t.footer_offset);
  out.append(reinterpret_cast<const char*>(hb), sizeof(hb));
  out.append(stored.begin(), stored.end());
  uint64_t footer_at = out.size();
  out += footer;
  uint8_t tb[kTrailerSize];
  EncodeTrailer(Trailer{footer_at, fh.seq + 1}, tb);
  out.append(reinterpret_cast<const char*>(tb), sizeof(tb));
  Spit(path, out);
}

Bytes AsBytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

// --- The payload -------------------------------------------------------------------------------

TEST(EndStateCodecTest, EveryKindRoundTrips) {
  EndState s = SampleState();
  ASSERT_TRUE(CheckEndState(s).ok()) << CheckEndState(s).message();
  auto got = DecodeEndState(EncodeEndState(s));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, s);
}

TEST(EndStateCodecTest, EmptyStateRoundTrips) {
  EndState s;
  std::string payload = EncodeEndState(s);
  EXPECT_EQ(payload, std::string("\0\0", 2));  // no entries, none skipped
  auto got = DecodeEndState(payload);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, s);
  s.skipped = 300;
  got = DecodeEndState(EncodeEndState(s));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->skipped, 300u);
  EXPECT_TRUE(got->entries.empty());
}

TEST(EndStateCodecTest, EveryTruncationIsRefused) {
  std::string payload = EncodeEndState(SampleState());
  for (size_t n = 0; n < payload.size(); ++n)
    EXPECT_FALSE(DecodeEndState(std::string_view(payload).substr(0, n)).ok()) << n << " bytes";
}

TEST(EndStateCodecTest, MalformedPayloadsAreRefused) {
  auto refused = [](const std::string& payload, const std::string& words) {
    auto got = DecodeEndState(payload);
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find(words), std::string::npos) << got.status().message();
  };
  // A count far beyond the bytes: refused before anything is allocated for it.
  refused(std::string("\xff\xff\xff\xff\x0f\x00", 6), "cannot fit");
  refused(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10), "counts");
  // A file "/a", then an xattr count no body could hold.
  Bytes body;
  PutString(body, "/a");
  PutVarint(body, 0644);
  PutVarint(body, 5);
  PutU64(body, 1);
  PutU64(body, 2);
  PutVarint(body, 1000);  // xattrs
  Bytes one = {1, 0, 1};  // one entry, none skipped; kind 1 (file)
  PutVarint(one, body.size());
  PutRaw(one, body.data(), body.size());
  refused(std::string(one.begin(), one.end()), "xattr count");

  auto entry = [](EndKind kind, std::string_view path, uint64_t mode) {
    Bytes b;
    PutString(b, path);
    if (kind != EndKind::kAbsent) {
      PutVarint(b, mode);
      PutVarint(b, 0);  // no xattrs
    }
    PutVarint(b, 0);  // determined: nothing
    Bytes out;
    PutVarint(out, static_cast<uint64_t>(kind));
    PutVarint(out, b.size());
    PutRaw(out, b.data(), b.size());
    return out;
  };
  auto payload = [](std::vector<Bytes> entries) {
    Bytes p;
    PutVarint(p, entries.size());
    PutVarint(p, 0);
    for (const Bytes& e : entries) PutRaw(p, e.data(), e.size());
    return std::string(p.begin(), p.end());
  };
  refused(payload({entry(EndKind::kAbsent, "relative", 0)}), "absolute");
  refused(payload({entry(EndKind::kAbsent, std::string("/a\0b", 4), 0)}), "absolute");
  refused(payload({entry(EndKind::kAbsent, "", 0)}), "");  // too small for an entry, even
  refused(payload({entry(EndKind::kAbsent, "/b", 0), entry(EndKind::kAbsent, "/a", 0)}), "sorted");
  refused(payload({entry(EndKind::kAbsent, "/a", 0), entry(EndKind::kAbsent, "/a", 0)}), "sorted");
  refused(payload({entry(EndKind::kDir, "/a", 010000)}), "mode");
  // A body longer than the bytes left.
  std::string cut = payload({entry(EndKind::kDir, "/a", 0755)});
  cut[3] = 100;
  refused(cut, "cut short");
}

TEST(EndStateCodecTest, XattrsOutOfOrderAreRefused) {
  EndState s = SampleState();
  std::swap(s.entries[1].xattrs[0], s.entries[1].xattrs[1]);
  EXPECT_FALSE(CheckEndState(s).ok());
  auto got = DecodeEndState(EncodeEndState(s));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("xattr 1 not after"), std::string::npos)
      << got.status().message();
}

TEST(EndStateCodecTest, RandomBytesAreRefusedOrReadWithinBounds) {
  std::mt19937_64 rng(11);
  std::string valid = EncodeEndState(SampleState());
  for (int i = 0; i < 2000; ++i) {
    std::string p = valid;
    for (int k = 0; k < 1 + i % 4; ++k) p[rng() % p.size()] = static_cast<char>(rng());
    if (i % 3 == 0) {
      p.resize(rng() % 64);
      for (char& c : p) c = static_cast<char>(rng());
    }
    auto got = DecodeEndState(p);
    if (got.ok()) {
      EXPECT_LE(got->entries.size(), p.size() / kMinEndEntryRaw);
    }
  }
}

TEST(EndStateCodecTest, LaterAdditionsAreSteppedOver) {
  // A kind a later minor adds reads as "other", with its path; fields appended to a known
  // kind's body, and bytes after the entries, are ignored.
  Bytes p;
  PutVarint(p, 2);
  PutVarint(p, 0);
  Bytes body;
  PutString(body, "/dev/thing");
  PutRaw(body, "future", 6);
  PutVarint(p, 9);
  PutVarint(p, body.size());
  PutRaw(p, body.data(), body.size());
  body.clear();
  PutString(body, "/dir");
  PutVarint(body, 0700);
  PutVarint(body, 0);  // no xattrs
  PutVarint(body, 3);  // determined: content (none for a directory) and mode
  PutRaw(body, "more", 4);
  PutVarint(p, static_cast<uint64_t>(EndKind::kDir));
  PutVarint(p, body.size());
  PutRaw(p, body.data(), body.size());
  // Minor 5's met symlinks, then what a later minor may append after them.
  PutVarint(p, 1);
  PutString(p, "/lib");
  PutString(p, "usr/lib");
  PutRaw(p, "reserved", 8);
  auto got = DecodeEndState(std::string(p.begin(), p.end()));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->symlinks.size(), 1u);
  EXPECT_EQ(got->symlinks[0], (MetSymlink{"/lib", "usr/lib"}));
  ASSERT_EQ(got->entries.size(), 2u);
  EXPECT_EQ(got->entries[0].path, "/dev/thing");
  EXPECT_EQ(got->entries[0].kind, EndKind::kOther);
  EXPECT_EQ(got->entries[1].kind, EndKind::kDir);
  EXPECT_EQ(got->entries[1].mode, 0700u);
  EXPECT_EQ(got->entries[1].determined, 3);
}

TEST(EndStateCodecTest, CheckRefusesWhatWouldNotReadBack) {
  auto refused = [](auto change) {
    EndState s = SampleState();
    change(s);
    return !CheckEndState(s).ok();
  };
  EXPECT_TRUE(refused([](EndState& s) { std::swap(s.entries[0], s.entries[1]); }));
  EXPECT_TRUE(refused([](EndState& s) { s.entries[1].path = s.entries[0].path; }));
  EXPECT_TRUE(refused([](EndState& s) { s.entries[0].path = "tmp/relative"; }));
  EXPECT_TRUE(refused([](EndState& s) { s.entries[0].mode = 0644; }));     // absent
  EXPECT_TRUE(refused([](EndState& s) { s.entries[1].size = 4096; }));     // a directory's
  EXPECT_TRUE(refused([](EndState& s) { s.entries[2].target = "x"; }));    // a file's
  EXPECT_TRUE(refused([](EndState& s) { s.entries[2].mode = 0100644; }));  // st_mode whole
  EXPECT_TRUE(refused([](EndState& s) { s.entries[4].kind = static_cast<EndKind>(5); }));
  EXPECT_TRUE(refused([](EndState& s) { s.entries[1].xattrs[0].name.clear(); }));
  EXPECT_FALSE(refused([](EndState&) {}));
}

// --- In a trace --------------------------------------------------------------------------------

TEST(AppendEndStateTest, ReaderSeesItAndEveryEventStillReads) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  Stream stream = MakeStream(3000, 5);
  WriteTrace(path, stream);
  uint64_t chunks_before;
  {
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->end_state());
    chunks_before = r->stats().chunks;
  }
  EndState s = SampleState();
  Status st = AppendEndState(path, s);
  ASSERT_TRUE(st.ok()) << st.message();

  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->has_footer());
  EXPECT_FALSE(r->truncated());
  EXPECT_TRUE(r->damage().ok()) << r->damage().message();
  EXPECT_EQ(r->version_minor(), kFormatMinor);  // a trace written now is past the end state's
  EXPECT_EQ(r->end_state_error(), "");
  ASSERT_TRUE(r->end_state());
  EXPECT_EQ(*r->end_state(), s);
  EXPECT_EQ(r->stats().chunks, chunks_before + 1);
  EXPECT_EQ(r->chunks().back().type, ChunkType::kEndState);
  std::vector<std::string> got = ReadAll(*r, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got, ExpectedLines(stream));
  // The index still serves seeks by thread.
  ReadFilter f;
  f.tids = {stream.syscalls[0].tid};
  ReadAll(*r, &st, f);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(AppendEndStateTest, EmptyStateIsStillAnEndState) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  WriteTrace(path, MakeStream(50, 1));
  ASSERT_TRUE(AppendEndState(path, EndState{}).ok());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->end_state());
  EXPECT_TRUE(r->end_state()->entries.empty());
}

TEST(AppendEndStateTest, OlderMinorTraceIsRaisedAndReadsTheSame) {
  ScratchDir dir;
  std::string path = dir.File("v1.fay");
  Spit(path, Slurp(kFixture));
  std::vector<std::string> before;
  Status st;
  {
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->version_minor(), 0);
    EXPECT_FALSE(r->end_state());
    before = ReadAll(*r, &st);
    ASSERT_TRUE(st.ok());
  }
  ASSERT_TRUE(AppendEndState(path, SampleState()).ok());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->version_minor(), kEndStateMinor);
  ASSERT_TRUE(r->end_state());
  EXPECT_EQ(*r->end_state(), SampleState());
  EXPECT_EQ(ReadAll(*r, &st), before);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(AppendEndStateTest, RefusesASecondAppend) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  WriteTrace(path, MakeStream(100, 2));
  ASSERT_TRUE(AppendEndState(path, SampleState()).ok());
  std::string once = Slurp(path);
  Status st = AppendEndState(path, EndState{});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("already has an end state"), std::string::npos) << st.message();
  EXPECT_EQ(Slurp(path), once);
}

TEST(AppendEndStateTest, RefusesAFooterlessTrace) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  WriteTrace(path, MakeStream(100, 3));
  std::string whole = Slurp(path);
  std::string cut = whole.substr(0, whole.size() - kTrailerSize);  // the footer, no trailer
  Spit(path, cut);
  Status st = AppendEndState(path, SampleState());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no footer"), std::string::npos) << st.message();
  EXPECT_EQ(Slurp(path), cut);
  EXPECT_FALSE(AppendEndState(dir.File("missing.fay"), SampleState()).ok());
}

TEST(AppendEndStateTest, RefusesAStateThatWouldNotReadBack) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  WriteTrace(path, MakeStream(100, 4));
  std::string whole = Slurp(path);
  EndState s = SampleState();
  std::swap(s.entries[0], s.entries[1]);
  EXPECT_FALSE(AppendEndState(path, s).ok());
  EXPECT_EQ(Slurp(path), whole);
}

// A write that fails half way (here the file size limit; a full disk alike) puts the old ending
// back: the trace is as it was.
TEST(AppendEndStateTest, FailedWriteLeavesTheTraceAsItWas) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  Stream stream = MakeStream(300, 12);
  WriteTrace(path, stream);
  std::string before = Slurp(path);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = before.size() + 10;
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  Status st = AppendEndState(path, SampleState());
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the trace is as it was"), std::string::npos) << st.message();
  EXPECT_EQ(Slurp(path), before);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->has_footer());
  EXPECT_FALSE(r->end_state());
}

// Each state a crash inside AppendEndState can leave: the file cut anywhere from the old
// footer's offset on. Every event reads, the trace is truncated (not damaged), and the end
// state is there once its chunk is whole.
TEST(AppendEndStateTest, CrashAnywhereLeavesAReadableTruncatedTrace) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  Stream stream = MakeStream(500, 6);
  WriteTrace(path, stream);
  uint64_t footer_at = LastChunkAt(path);
  ASSERT_TRUE(AppendEndState(path, SampleState()).ok());
  std::string whole = Slurp(path);
  uint64_t end_state_end = LastChunkAt(path);  // the footer's, right after the end state
  std::vector<uint64_t> cuts;
  for (uint64_t n = footer_at; n < whole.size(); n += n < end_state_end + 64 ? 7 : 301)
    cuts.push_back(n);
  for (uint64_t n = whole.size() - kTrailerSize - 1; n < whole.size(); ++n) cuts.push_back(n);
  std::string cut_path = dir.File("cut.fay");
  for (uint64_t n : cuts) {
    Spit(cut_path, whole.substr(0, n));
    auto r = Reader::Open(cut_path);
    ASSERT_TRUE(r.ok()) << n << ": " << r.status().message();
    EXPECT_TRUE(r->damage().ok()) << n << ": " << r->damage().message();
    EXPECT_FALSE(r->has_footer()) << n;
    // Cut inside the trailer, every chunk is whole: read without the index, not truncated.
    EXPECT_EQ(r->truncated(), n < whole.size() - kTrailerSize) << n;
    EXPECT_EQ(r->end_state().has_value(), n >= end_state_end) << n;
    EXPECT_EQ(r->end_state_error(), "") << n;
    Status st;
    EXPECT_EQ(ReadAll(*r, &st), ExpectedLines(stream)) << n;
    EXPECT_TRUE(st.ok()) << n << ": " << st.message();
  }
}

TEST(ReaderEndStateTest, TraceWithoutItHasNone) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  WriteTrace(path, MakeStream(100, 7));
  for (const std::string& p : {path, std::string(kFixture)}) {
    auto r = Reader::Open(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->end_state()) << p;
    EXPECT_EQ(r->end_state_error(), "") << p;
    for (const ChunkRef& c : r->chunks()) EXPECT_NE(c.type, ChunkType::kEndState) << p;
  }
}

TEST(ReaderEndStateTest, CorruptChunkLeavesTheEventsReadable) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  Stream stream = MakeStream(300, 8);
  WriteTrace(path, stream);
  uint64_t end_state_at = LastChunkAt(path);
  ASSERT_TRUE(AppendEndState(path, SampleState()).ok());
  std::string f = Slurp(path);
  f[end_state_at + kChunkHeaderSize + 5] ^= 0x40;
  Spit(path, f);

  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->end_state());
  EXPECT_NE(r->end_state_error().find("chunk " + std::to_string(r->last_chunk_seq() - 1) +
                                      " (end state): payload CRC32C mismatch"),
            std::string::npos)
      << r->end_state_error();
  EXPECT_TRUE(r->has_footer());
  EXPECT_TRUE(r->damage().ok());
  Status st;
  EXPECT_EQ(ReadAll(*r, &st), ExpectedLines(stream));
  EXPECT_TRUE(st.ok()) << st.message();
  // Not an end state it could add to: the one there is unreadable, not absent.
  EXPECT_FALSE(AppendEndState(path, SampleState()).ok());
}

TEST(ReaderEndStateTest, MalformedPayloadOrCountIsReported) {
  ScratchDir dir;
  std::string garbage = dir.File("garbage.fay");
  WriteTrace(garbage, MakeStream(100, 9));
  std::string count = dir.File("count.fay");
  WriteTrace(count, MakeStream(100, 9));
  InsertBeforeFooter(garbage, ChunkType::kEndState, Codec::kNone,
                     AsBytes(std::string_view("\x01\x00\x07junk!!!", 10)), 10, 1);
  std::string two = EncodeEndState(SampleState());
  InsertBeforeFooter(count, ChunkType::kEndState, Codec::kNone, AsBytes(two),
                     static_cast<uint32_t>(two.size()), 4);
  for (const auto& [p, words] : {std::pair<std::string, std::string>{garbage, "end state: entry 0"},
                                 {count, "5 entries, the chunk header counts 4"}}) {
    auto r = Reader::Open(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->end_state());
    EXPECT_NE(r->end_state_error().find(words), std::string::npos) << r->end_state_error();
    EXPECT_TRUE(r->has_footer());
    Status st;
    ReadAll(*r, &st);
    EXPECT_TRUE(st.ok()) << st.message();
  }
}

TEST(ReaderEndStateTest, ClaimBeyondItsEntriesIsRefusedBeforeDecompressing) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  WriteTrace(path, MakeStream(100, 10));
  Compressor zstd(3);
  Bytes raw(3 << 20, 0);
  Bytes stored;
  ASSERT_TRUE(zstd.Compress(raw, &stored).ok());
  InsertBeforeFooter(path, ChunkType::kEndState, Codec::kZstd, stored,
                     static_cast<uint32_t>(raw.size()), 1);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->end_state());
  EXPECT_NE(r->end_state_error().find("refused before decompressing"), std::string::npos)
      << r->end_state_error();
}

TEST(ReaderEndStateTest, SecondEndStateChunkIsDamage) {
  ScratchDir dir;
  std::string path = dir.File("t.fay");
  Stream stream = MakeStream(100, 11);
  WriteTrace(path, stream);
  ASSERT_TRUE(AppendEndState(path, SampleState()).ok());
  std::string empty = EncodeEndState(EndState{});
  InsertBeforeFooter(path, ChunkType::kEndState, Codec::kNone, AsBytes(empty),
                     static_cast<uint32_t>(empty.size()), 0);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_footer());
  EXPECT_NE(r->damage().message().find("(end state) is the second in the file"), std::string::npos)
      << r->damage().message();
  Status st;
  EXPECT_EQ(ReadAll(*r, &st), ExpectedLines(stream));  // every event, then the damage
  EXPECT_FALSE(st.ok());
}

TEST(EndStateCodecTest, MetSymlinksRoundTripAndBadOnesAreRefused) {
  EndState s;
  s.symlinks = {{"/lib", "usr/lib"}, {"/usr/lib/python3/site.py", "/etc/python3/site.py"}};
  ASSERT_TRUE(CheckEndState(s).ok());
  auto got = DecodeEndState(EncodeEndState(s));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, s);
  // Out of order, relative, and empty targets are refused on both sides.
  EndState bad = s;
  std::swap(bad.symlinks[0], bad.symlinks[1]);
  EXPECT_FALSE(CheckEndState(bad).ok());
  bad.symlinks = {{"lib", "usr/lib"}};
  EXPECT_FALSE(CheckEndState(bad).ok());
  bad.symlinks = {{"/lib", ""}};
  EXPECT_FALSE(CheckEndState(bad).ok());
  Bytes p;
  PutVarint(p, 0);
  PutVarint(p, 0);
  PutVarint(p, 2);
  PutString(p, "/b");
  PutString(p, "x");
  PutString(p, "/a");
  PutString(p, "y");
  auto r = DecodeEndState(std::string(p.begin(), p.end()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("met symlink 1"), std::string::npos) << r.status().message();
}

TEST(EndStateCodecTest, KeptContentRoundTripsOnlyWholeAndOnAFile) {
  EndState s;
  EndEntry e;
  e.path = "/mapped";
  e.kind = EndKind::kFile;
  e.size = 5;
  e.determined = 3;
  e.has_kept = true;
  e.kept = "bytes";
  s.entries.push_back(e);
  ASSERT_TRUE(CheckEndState(s).ok());
  auto got = DecodeEndState(EncodeEndState(s));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, s);
  EndState bad = s;
  bad.entries[0].kept = "byte";  // not the whole file
  EXPECT_FALSE(CheckEndState(bad).ok());
  bad = s;
  bad.entries[0].kind = EndKind::kDir;
  bad.entries[0].size = 0;
  EXPECT_FALSE(CheckEndState(bad).ok());
}

}  // namespace
}  // namespace fay::trace
