#include "trace/flight.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"

namespace fay::trace {
namespace {

using testing::MakeStream;
using testing::ReadAll;
using testing::ScratchDir;
using testing::Stream;
using testing::WriteStream;

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::vector<std::string> Lines(const std::string& path, RecordingInfo* info = nullptr) {
  auto r = Reader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  EXPECT_FALSE(r->truncated());
  if (info) *info = r->info();
  Status st;
  std::vector<std::string> lines = ReadAll(*r, &st);
  EXPECT_TRUE(st.ok()) << st.message();
  return lines;
}

// Writes the stream through fc's flight ring, which dumps at the end.
void WriteFlight(const std::string& path, const Stream& s, FlightControl* fc) {
  WriterOptions o;
  o.chunk_bytes = 4096;
  o.blob_chunk_bytes = 16 << 10;
  o.flight = fc;
  fc->set_dump_on_exit(true);
  WriteStream(path, s, o);
}

TEST(FlightTest, ARingLargerThanTheRunDumpsAllOfIt) {
  ScratchDir dir;
  Stream s = MakeStream(5000, 7);
  WriteStream(dir.File("whole.fay"), s);
  FlightControl fc(64 << 20, dir.File("f.fay"), 4);
  WriteFlight(dir.File("f.fay"), s, &fc);
  RecordingInfo info;
  EXPECT_EQ(Lines(dir.File("f.fay"), &info), Lines(dir.File("whole.fay")));
  EXPECT_EQ(info.flight_reason, "the recording ended");
  EXPECT_EQ(info.flight_dump, 1u);
  EXPECT_EQ(info.flight_ring_bytes, 64u << 20);
  EXPECT_EQ(info.flight_evicted_syscalls, 0u);
  EXPECT_LT(info.flight_from_ns, info.flight_to_ns);
  ASSERT_EQ(fc.results().size(), 1u);
  EXPECT_EQ(fc.results()[0].syscalls, s.syscalls.size());
}

// Buffers that repeat (the writer stores them once) across many groups: every kept call still
// finds its bytes, the dump is the run's last calls in order, and it fits the ring.
TEST(FlightTest, ASmallRingKeepsTheLastCallsAndFits) {
  ScratchDir dir;
  Stream s = MakeStream(40000, 11);
  WriteStream(dir.File("whole.fay"), s);
  const uint64_t ring = 1 << 20;
  FlightControl fc(ring, dir.File("f.fay"), 4);
  WriteFlight(dir.File("f.fay"), s, &fc);
  RecordingInfo info;
  std::vector<std::string> got = Lines(dir.File("f.fay"), &info);
  std::vector<std::string> whole = Lines(dir.File("whole.fay"));
  ASSERT_GT(got.size(), 100u);
  ASSERT_LT(got.size(), whole.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), whole.end() - got.size()));
  EXPECT_LE(FileSize(dir.File("f.fay")), ring);
  EXPECT_GT(info.flight_evicted_syscalls, 0u);
  EXPECT_EQ(info.flight_evicted_syscalls + fc.results()[0].syscalls, s.syscalls.size());
}

TEST(FlightTest, RingEvictsWholeGroupsOldestFirst) {
  FlightRing ring(8000);
  auto chunk = [](uint64_t group, size_t bytes, uint32_t syscalls) {
    FlightChunk c;
    c.payload = std::make_shared<const Bytes>(bytes - kChunkHeaderSize);
    c.group = group;
    c.syscalls = syscalls;
    return c;
  };
  ring.Add(chunk(1, 1000, 1));  // a group closes every 1000 bytes (an eighth)
  EXPECT_EQ(ring.group(), 2u);
  for (int i = 0; i < 7; ++i) ring.Add(chunk(ring.group(), 1000, 1));
  EXPECT_EQ(ring.stats().bytes, 8000u);
  EXPECT_EQ(ring.stats().evicted_chunks, 0u);
  ring.Add(chunk(ring.group(), 1000, 1));  // group 1 goes first
  EXPECT_EQ(ring.stats().bytes, 8000u);
  EXPECT_EQ(ring.stats().evicted_chunks, 1u);
  EXPECT_EQ(ring.Snapshot().front().group, 2u);
  // A chunk of a group already gone is dropped, never kept without its blobs.
  ring.Add(chunk(1, 100, 5));
  EXPECT_EQ(ring.stats().evicted_syscalls, 6u);
  EXPECT_EQ(ring.Snapshot().size(), 8u);
  // A chunk that may not evict (after a pending trigger) is dropped when full, and the rest of
  // its group with it; history stays.
  const uint64_t g = ring.group();
  ring.Add(chunk(g, 1000, 3), true);
  EXPECT_EQ(ring.stats().dropped_syscalls, 3u);
  EXPECT_GT(ring.group(), g);
  ring.Add(chunk(g, 100, 1));
  EXPECT_EQ(ring.stats().dropped_syscalls, 3u);  // dropped as cut short, not as kept
  EXPECT_EQ(ring.stats().evicted_syscalls, 10u);
  EXPECT_EQ(ring.Snapshot().size(), 8u);
  // Room for the reserve is kept free.
  ring.SetReserve(3000);
  ring.Add(chunk(ring.group(), 1000, 1));
  EXPECT_LE(ring.stats().bytes, 5000u);
  EXPECT_EQ(ring.stats().peak_bytes, 8000u);
}

TEST(FlightTest, DumpsAreNumberedAndCapped) {
  FlightControl fc(1 << 20, "/tmp/x/a.fay", 2);
  EXPECT_EQ(fc.NextPath(), "/tmp/x/a.fay");
  EXPECT_EQ(fc.NextPath(), "/tmp/x/a.2.fay");
  FlightControl plain(1 << 20, "dir.d/trace", 2);
  plain.NextPath();
  EXPECT_EQ(plain.NextPath(), "dir.d/trace.2");
  // A request while another waits for its dump joins it; the cap counts dumps.
  EXPECT_TRUE(fc.Request("one"));
  EXPECT_TRUE(fc.Request("two"));
  EXPECT_EQ(fc.requested(), 1u);
  EXPECT_NE(fc.pending_since_ns(), 0u);
  EXPECT_EQ(fc.TakeReasons(1), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(fc.pending_since_ns(), 0u);
  EXPECT_TRUE(fc.Request("three", false, 42));
  EXPECT_EQ(fc.pending_since_ns(), 42u);
  EXPECT_EQ(fc.TakeReasons(2), std::vector<std::string>{"three"});
  EXPECT_FALSE(fc.Request("four"));
  EXPECT_EQ(fc.refused(), 1u);
  EXPECT_TRUE(fc.Request("the recording ended", true));  // the dump at exit is never refused
  EXPECT_EQ(fc.requested(), 3u);
}

}  // namespace
}  // namespace fay::trace
