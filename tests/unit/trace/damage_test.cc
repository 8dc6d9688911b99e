// Truncated, corrupted, foreign and newer files, and write failures: each gets a precise message,
// and everything before the damage is still delivered.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "trace/crc32c.h"
#include "trace/event_codec.h"
#include "trace/format.h"
#include "trace/header_codec.h"
#include "trace/reader.h"
#include "trace/writer.h"
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

// Writes a stream with small chunks; returns the full file.
std::string WriteSmallChunks(const std::string& path, const Stream& s) {
  WriterOptions opts;
  opts.chunk_bytes = 2048;
  opts.blob_chunk_bytes = 8192;
  testing::WriteStream(path, s, opts);
  return Slurp(path);
}

class DamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stream_ = MakeStream(3000, 7);
    full_path_ = dir_.File("full.fay");
    bytes_ = WriteSmallChunks(full_path_, stream_);
    auto r = Reader::Open(full_path_);
    ASSERT_TRUE(r.ok());
    chunks_ = r->chunks();
    ASSERT_GT(chunks_.size(), 10u);
    want_ = ExpectedLines(stream_);
  }

  ScratchDir dir_;
  Stream stream_;
  std::string full_path_;
  std::string bytes_;
  std::vector<ChunkRef> chunks_;
  std::vector<std::string> want_;
};

TEST_F(DamageTest, TruncatedFilesReadUpToTheLastWholeChunk) {
  // Cut at every chunk boundary, inside every chunk header and payload, and in the footer and
  // trailer.
  std::vector<size_t> cuts;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    // Every kind of cut, on a sample of chunks (each cut re-reads the file).
    if (i % 10 != 0 && i > 3 && i + 3 < chunks_.size()) continue;
    const ChunkRef& c = chunks_[i];
    cuts.push_back(c.offset);
    cuts.push_back(c.offset + 5);
    cuts.push_back(c.offset + kChunkHeaderSize + c.stored_length / 2);
  }
  const ChunkRef& last = chunks_.back();
  size_t footer_at = last.offset + kChunkHeaderSize + last.stored_length;
  cuts.push_back(footer_at);
  cuts.push_back(footer_at + 10);
  cuts.push_back(bytes_.size() - kTrailerSize);
  cuts.push_back(bytes_.size() - 1);
  std::string path = dir_.File("cut.fay");
  for (size_t cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    Spit(path, bytes_.substr(0, cut));
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->has_footer());
    // Whole chunks before the cut, and which one is last.
    size_t records = 0;
    uint32_t last_seq = 0;
    uint64_t last_offset = kPreambleSize;
    for (const ChunkRef& c : chunks_) {
      if (c.offset + kChunkHeaderSize + c.stored_length > cut) break;
      if (c.type == ChunkType::kEvents) records += c.count;
      last_seq = c.seq;
      last_offset = c.offset;
    }
    bool footer_whole = cut >= bytes_.size() - kTrailerSize;
    EXPECT_EQ(r->truncated(), !footer_whole);
    if (!footer_whole) {
      EXPECT_EQ(r->last_chunk_seq(), last_seq);
      EXPECT_EQ(r->last_chunk_offset(), last_offset);
      EXPECT_EQ(r->TruncationMessage().rfind("truncated after chunk " + std::to_string(last_seq) +
                                                 " at offset " + std::to_string(last_offset),
                                             0),
                0u)
          << r->TruncationMessage();
    }
    Status st;
    std::vector<std::string> got = ReadAll(*r, &st);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(got.size(), records);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want_.begin()));
  }
}

TEST_F(DamageTest, TruncatedInsideTheHeaderFailsToOpen) {
  std::string path = dir_.File("cut.fay");
  Spit(path, bytes_.substr(0, kPreambleSize + 10));
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated inside the header chunk"), std::string::npos)
      << r.status().message();
}

// Index of the third events chunk, and the number of records before it.
std::pair<size_t, size_t> ThirdEventsChunk(const std::vector<ChunkRef>& chunks) {
  size_t seen = 0, records = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].type != ChunkType::kEvents) continue;
    if (++seen == 3) return {i, records};
    records += chunks[i].count;
  }
  return {0, 0};
}

TEST_F(DamageTest, CorruptPayloadByteNamesTheOffset) {
  auto [idx, before] = ThirdEventsChunk(chunks_);
  const ChunkRef& c = chunks_[idx];
  std::string bad = bytes_;
  bad[c.offset + kChunkHeaderSize + c.stored_length / 2] ^= 0x40;
  std::string path = dir_.File("bad.fay");
  Spit(path, bad);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind(path + ": offset " + std::to_string(c.offset) + ": chunk " +
                                   std::to_string(c.seq) + " (events): payload CRC32C mismatch",
                               0),
            0u)
      << st.message();
  ASSERT_EQ(got.size(), before);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want_.begin()));
}

TEST_F(DamageTest, CorruptChunkMagicNamesWhatWasFound) {
  auto [idx, before] = ThirdEventsChunk(chunks_);
  const ChunkRef& c = chunks_[idx];
  std::string bad = bytes_;
  bad.replace(c.offset, 4, "XAYC");
  // Without the footer the walk meets the damage; with it, the read does. Both say the same.
  for (bool keep_footer : {true, false}) {
    SCOPED_TRACE(keep_footer ? "with footer" : "walking");
    std::string path = dir_.File("magic.fay");
    Spit(path, keep_footer ? bad : bad.substr(0, bad.size() - kTrailerSize));
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok());
    Status st;
    std::vector<std::string> got = ReadAll(*r, &st);
    EXPECT_EQ(st.message(), path + ": offset " + std::to_string(c.offset) +
                                ": expected chunk magic 'FAYC', found 'XAYC'");
    ASSERT_EQ(got.size(), before);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want_.begin()));
  }
}

TEST_F(DamageTest, CorruptBlobChunkStopsAtTheFirstEventsNeedingIt) {
  size_t blob = 0;
  while (chunks_[blob].type != ChunkType::kBlobs) ++blob;
  const ChunkRef& c = chunks_[blob];
  std::string bad = bytes_;
  bad[c.offset + kChunkHeaderSize + 3] ^= 1;
  std::string path = dir_.File("blob.fay");
  Spit(path, bad);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  Status st;
  ReadAll(*r, &st);
  EXPECT_NE(st.message().find("offset " + std::to_string(c.offset) + ": chunk " +
                              std::to_string(c.seq) + " (blobs): payload CRC32C mismatch"),
            std::string::npos)
      << st.message();
}

TEST_F(DamageTest, CorruptHeaderChunkFailsOpen) {
  std::string bad = bytes_;
  bad[kPreambleSize + kChunkHeaderSize + 2] ^= 0xFF;
  std::string path = dir_.File("hdr.fay");
  Spit(path, bad);
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind(path + ": offset 16: chunk 0 (header): payload CRC32C "
                                              "mismatch",
                                       0),
            0u)
      << r.status().message();
}

TEST(ForeignFileTest, NotATraceSaysSo) {
  ScratchDir dir;
  std::string path = dir.File("text.fay");
  Spit(path, "hello, this is not a trace file\n");
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            path +
                ": not a fay trace: offset 0: expected magic 89 46 41 59 0d 0a 1a 0a, found "
                "'hello, t'");
  Spit(path, "");
  r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            path + ": not a fay trace: 0 bytes, shorter than the 16-byte preamble");
  r = Reader::Open(dir.File("missing.fay"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "cannot open trace " + dir.File("missing.fay") + ": No such file or directory");
}

TEST(ForeignFileTest, NewerMajorVersionIsRefused) {
  ScratchDir dir;
  std::string path = dir.File("v2.fay");
  std::string bytes = WriteSmallChunks(path, MakeStream(10, 1));
  bytes[8] = 2;
  Spit(path, bytes);
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported);
  EXPECT_NE(r.status().message().find("trace format version 2." + std::to_string(kFormatMinor) +
                                      " is not one this fay reads"),
            std::string::npos)
      << r.status().message();
}

// A file as a later 1.x writer might produce it: a higher minor, an unknown header tag, an
// unknown chunk type and an unknown record kind. This reader skips all three.
TEST(ForeignFileTest, NewerMinorAdditionsAreSkipped) {
  ScratchDir dir;
  std::string path = dir.File("v1_9.fay");
  Bytes file;
  PutRaw(file, kFileMagic, 8);
  PutU16(file, 1);
  PutU16(file, 9);
  PutU32(file, 0);
  auto put_chunk = [&](ChunkType type, uint32_t seq, const Bytes& payload, uint32_t count) {
    ChunkHeader h;
    h.type = type;
    h.codec = Codec::kNone;
    h.seq = seq;
    h.stored_length = h.raw_length = static_cast<uint32_t>(payload.size());
    h.count = count;
    h.payload_crc = Crc32c(payload.data(), payload.size());
    uint8_t hb[kChunkHeaderSize];
    EncodeChunkHeader(h, hb);
    PutRaw(file, hb, sizeof(hb));
    PutRaw(file, payload.data(), payload.size());
  };
  uint32_t fields;
  Bytes header = EncodeHeader(SampleInfo(), "fay 9", &fields);
  PutVarint(header, 999);  // unknown tag
  PutString(header, "future");
  put_chunk(ChunkType::kHeader, 0, header, fields + 1);
  put_chunk(static_cast<ChunkType>(77), 1, Bytes{1, 2, 3}, 0);
  SyscallEvent e;
  e.pid = e.tid = 3;
  e.entry_ns = 10;
  e.exit_ns = 20;
  e.nr = 39;
  e.ret = 3;
  Bytes events;
  PutVarint(events, 50);  // unknown record kind, 3-byte body
  PutVarint(events, 3);
  PutRaw(events, "abc", 3);
  EventEncoder enc;
  enc.Syscall(e, {}, &events);
  put_chunk(ChunkType::kEvents, 2, events, 2);
  Spit(path, std::string(file.begin(), file.end()));

  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version_minor(), 9);
  EXPECT_EQ(r->writer(), "fay 9");
  EXPECT_EQ(r->info().cwd, SampleInfo().cwd);
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got, std::vector<std::string>{"S " + testing::Describe(e)});
  EXPECT_TRUE(r->truncated());  // no footer
}

TEST(WriteFailureTest, FullDeviceFailsAtCreate) {
  auto w = Writer::Create("/dev/full", SampleInfo());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(), "writing /dev/full: No space left on device");
}

// Runs body in a child whose files cannot grow past `limit` bytes (a file-size limit stands in
// for a full disk: write(2) fails the same way, with EFBIG instead of ENOSPC), so the limit stays
// there; a hang fails the test instead of stalling it. body's result is the child's exit status.
void InChildWithFileLimit(rlim_t limit, const std::function<int()>& body) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(30);
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(10);
    ::_exit(body());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

// The disk fills mid-recording.
TEST(WriteFailureTest, DiskFillingMidRecordingStopsCleanly) {
  ScratchDir dir;
  std::string path = dir.File("full.fay");
  Stream s = MakeStream(20000, 3);
  constexpr rlim_t kLimit = 96 << 10;
  ASSERT_NO_FATAL_FAILURE(InChildWithFileLimit(kLimit, [&] {
    WriterOptions opts;
    opts.chunk_bytes = 4096;
    opts.blob_chunk_bytes = 8192;
    auto w = Writer::Create(path, SampleInfo(), opts);
    if (!w.ok()) return 11;
    for (auto [proc, i] : s.order) {
      if (proc)
        (*w)->Append(s.processes[i]);
      else
        (*w)->Append(s.syscalls[i]);
    }
    Status st = (*w)->Close();
    if (st.ok()) return 12;
    if (st.message().find("writing " + path +
                          ": File too large; recording stopped, the trace is "
                          "readable up to offset") != 0)
      return 13;
    if (!(*w)->failed()) return 14;
    if ((*w)->stats().file_bytes > kLimit) return 16;
    // Tell the parent how many events never reached the file.
    FILE* f = ::fopen((path + ".dropped").c_str(), "w");
    if (!f) return 17;
    ::fprintf(f, "%llu", static_cast<unsigned long long>((*w)->stats().dropped_events));
    ::fclose(f);
    return 0;
  }));

  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->truncated());
  // The writer cut the partial chunk off: the file ends exactly at a chunk boundary.
  EXPECT_NE(r->TruncationMessage().find("(0 bytes of an incomplete chunk follow it)"),
            std::string::npos)
      << r->TruncationMessage();
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<std::string> want = ExpectedLines(s);
  EXPECT_GT(got.size(), 100u);
  EXPECT_LT(got.size(), want.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
  // Every event is either in the file or counted as dropped: none vanish silently.
  EXPECT_EQ(std::stoull(Slurp(path + ".dropped")), want.size() - got.size());
}

// The same with two lanes writing at once: whichever fails first, the other stops too, the file
// ends on a chunk boundary, and every event is in the file or counted as dropped.
TEST(WriteFailureTest, DiskFillingUnderTwoLanesStopsBoth) {
  ScratchDir dir;
  std::string path = dir.File("full2.fay");
  Stream s = MakeStream(20000, 5);
  constexpr rlim_t kLimit = 96 << 10;
  ASSERT_NO_FATAL_FAILURE(InChildWithFileLimit(kLimit, [&] {
    WriterOptions opts;
    opts.chunk_bytes = 4096;
    opts.blob_chunk_bytes = 8192;
    opts.encode_on_caller = true;
    opts.lanes = 2;
    auto w = Writer::Create(path, SampleInfo(), opts);
    if (!w.ok()) return 11;
    auto feed = [&](size_t lane) {
      std::vector<SyscallEvent> group;
      for (const SyscallEvent& ev : s.syscalls) {
        if (static_cast<size_t>(ev.tid & 1) != lane) continue;
        group.push_back(ev);
        if (group.size() == 32) (*w)->AppendSyscalls(&group, lane);
      }
      (*w)->AppendSyscalls(&group, lane);
    };
    std::thread other(feed, 1);
    feed(0);
    other.join();
    Status st = (*w)->Close();
    if (st.ok()) return 12;
    if (!(*w)->failed()) return 14;
    if ((*w)->stats().file_bytes > kLimit) return 16;
    FILE* f = ::fopen((path + ".dropped").c_str(), "w");
    if (!f) return 17;
    ::fprintf(f, "%llu %llu", static_cast<unsigned long long>((*w)->stats().dropped_events),
              static_cast<unsigned long long>((*w)->stats().syscall_events));
    ::fclose(f);
    return 0;
  }));
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->TruncationMessage().find("(0 bytes of an incomplete chunk follow it)"),
            std::string::npos)
      << r->TruncationMessage();
  uint64_t in_file = 0;
  Status st = r->ForEach([&](const SyscallEvent&) { ++in_file; });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_GT(in_file, 100u);
  unsigned long long dropped = 0, written = 0;
  ASSERT_EQ(std::sscanf(Slurp(path + ".dropped").c_str(), "%llu %llu", &dropped, &written), 2);
  EXPECT_EQ(written, in_file);
  EXPECT_EQ(dropped + in_file, s.syscalls.size());
}

}  // namespace
}  // namespace fay::trace
