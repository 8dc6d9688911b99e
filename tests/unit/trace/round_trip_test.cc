#include <gtest/gtest.h>

#include <unistd.h>

#include <map>

#include <chrono>
#include <thread>

#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"

namespace fay::trace {
namespace {

using testing::Comm;
using testing::Describe;
using testing::ExpectedLines;
using testing::ExpectSameInfo;
using testing::MakeStream;
using testing::ReadAll;
using testing::SampleInfo;
using testing::ScratchDir;
using testing::Stream;
using testing::WriteEvent;
using testing::WriteStream;

WriterOptions SmallChunks() {
  WriterOptions o;
  o.chunk_bytes = 4096;
  o.blob_chunk_bytes = 16 << 10;
  return o;
}

TEST(RoundTripTest, HeaderComesBackExactly) {
  ScratchDir dir;
  std::string path = dir.File("h.fay");
  WriteStream(path, Stream{});
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  RecordingInfo want = SampleInfo();
  const RecordingInfo& got = r->info();
  ExpectSameInfo(got, want);
  EXPECT_EQ(r->writer(), "fay");
  EXPECT_EQ(r->version_major(), 1);
  EXPECT_EQ(r->version_minor(), 7);  // minor 7: a flight dump's header fields
  EXPECT_TRUE(r->has_footer());
  EXPECT_FALSE(r->truncated());
  Status st;
  EXPECT_TRUE(ReadAll(*r, &st).empty());
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(r->stats().chunks, 0u);  // no data chunks
}

TEST(RoundTripTest, ManyEventsWithBuffersAndProcessEvents) {
  ScratchDir dir;
  std::string path = dir.File("rt.fay");
  Stream s = MakeStream(20000, 42);
  WriteStream(path, s, SmallChunks());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->has_footer());
  EXPECT_GT(r->stats().event_chunks, 20u);
  EXPECT_GT(r->stats().blob_chunks, 5u);
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<std::string> want = ExpectedLines(s);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "event " << i;
  EXPECT_EQ(r->stats().syscall_events, s.syscalls.size());
  EXPECT_EQ(r->stats().process_events, s.processes.size());
  // Reading twice gives the same answer (blob cache and index reused).
  std::vector<std::string> again = ReadAll(*r, &st);
  EXPECT_EQ(again, want);
}

// The eBPF recorder's path: calls handed over in groups and encoded on the caller's thread.
// Every group mixes threads, and comms change under one tid, so the encoder's cached thread
// context must follow; small chunks reset it often.
TEST(RoundTripTest, AppendSyscallsOnTheCallerGivesTheSameTrace) {
  ScratchDir dir;
  Stream s = MakeStream(20000, 7);
  for (size_t i = 0; i < s.syscalls.size(); i += 97) s.syscalls[i].comm = Comm("renamed");
  for (bool on_caller : {true, false}) {
    std::string path = dir.File(on_caller ? "caller.fay" : "thread.fay");
    WriterOptions o = SmallChunks();
    o.encode_on_caller = on_caller;
    auto w = Writer::Create(path, SampleInfo(), o);
    ASSERT_TRUE(w.ok()) << w.status().message();
    std::vector<SyscallEvent> group;
    for (size_t i = 0; i < s.syscalls.size(); ++i) {
      group.push_back(s.syscalls[i]);
      if (group.size() == 256 || i + 1 == s.syscalls.size()) {
        ASSERT_TRUE((*w)->AppendSyscalls(&group));
        EXPECT_TRUE(group.empty());
      }
    }
    ASSERT_TRUE((*w)->Close().ok());
    std::vector<SyscallEvent> late{s.syscalls[0]};
    EXPECT_FALSE((*w)->AppendSyscalls(&late));  // refused after Close
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_GT(r->stats().event_chunks, 20u);
    Status st;
    std::vector<std::string> got = ReadAll(*r, &st);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(got.size(), s.syscalls.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], "S " + Describe(s.syscalls[i]))
          << "event " << i << " on_caller " << on_caller;
  }
}

// A buffer stored as it arrived (StoreBlobNow) reads back as if the event had carried it, and
// equal contents are stored once.
TEST(RoundTripTest, BuffersStoredAheadReadBack) {
  ScratchDir dir;
  std::string path = dir.File("stored.fay");
  WriterOptions o;
  o.encode_on_caller = true;
  auto w = Writer::Create(path, SampleInfo(), o);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<uint8_t> content(4096);
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<uint8_t>(i * 13);
  std::vector<SyscallEvent> group;
  for (int i = 0; i < 3; ++i) {
    SyscallEvent ev = MakeStream(1, 3 + i).syscalls.at(0);
    ev.buffers.clear();
    CapturedBuffer b;
    b.arg = 1;
    b.dir = BufferDir::kOut;
    b.length = content.size();
    b.stored = (*w)->StoreBlobNow(content.data(), content.size());
    ev.buffers.push_back(b);
    group.push_back(ev);
  }
  ASSERT_TRUE((*w)->AppendSyscalls(&group));
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ((*w)->stats().blobs_stored, 1u);
  EXPECT_EQ((*w)->stats().bytes_captured, 3 * content.size());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int seen = 0;
  Status st = r->ForEach([&](const SyscallEvent& ev) {
    ASSERT_EQ(ev.buffers.size(), 1u);
    EXPECT_EQ(ev.buffers[0].bytes, content);
    EXPECT_FALSE(ev.buffers[0].truncated);
    ++seen;
  });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(seen, 3);
}

// Lanes: two threads encode at once, each its own threads' calls, into one file. Every call
// comes back, each thread's in its order, with its buffers: the stream's own, and one that
// both lanes store ahead.
TEST(RoundTripTest, LanesEncodeAtOnceAndKeepEachThreadInOrder) {
  ScratchDir dir;
  std::string path = dir.File("lanes.fay");
  WriterOptions o = SmallChunks();
  o.encode_on_caller = true;
  o.lanes = 2;
  auto w = Writer::Create(path, SampleInfo(), o);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<uint8_t> shared(1000, 0x5a);
  Stream s = MakeStream(20000, 11);
  // Lane i takes the calls whose tid is odd (1) or even (0), as a consumer per ring would.
  std::map<int32_t, std::vector<std::string>> want;
  for (const SyscallEvent& ev : s.syscalls) want[ev.tid].push_back("S " + Describe(ev));
  auto feed = [&](size_t lane) {
    std::vector<SyscallEvent> group;
    for (size_t i = 0; i < s.syscalls.size(); ++i) {
      SyscallEvent ev = s.syscalls[i];
      if (static_cast<size_t>(ev.tid & 1) != lane) continue;
      if (i % 500 == 0) {
        CapturedBuffer b;
        b.arg = 1;
        b.dir = BufferDir::kOut;
        b.length = shared.size();
        b.stored = (*w)->StoreBlobNow(shared.data(), shared.size(), lane);
        ev.buffers.push_back(b);
      }
      group.push_back(std::move(ev));
      if (group.size() == 64) {
        ASSERT_TRUE((*w)->AppendSyscalls(&group, lane));
      }
    }
    ASSERT_TRUE((*w)->AppendSyscalls(&group, lane));
  };
  std::thread other(feed, 1);
  feed(0);
  other.join();
  ASSERT_TRUE((*w)->Close().ok());
  WriterStats ws = (*w)->stats();
  EXPECT_EQ(ws.syscall_events, s.syscalls.size());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::map<int32_t, std::vector<std::string>> got;
  size_t with_buffer = 0;
  std::vector<std::pair<uint64_t, size_t>> order;  // (return time, lane) as read
  Status st = r->ForEach([&](const SyscallEvent& ev) {
    SyscallEvent plain = ev;
    if (!ev.buffers.empty() && ev.buffers.back().bytes == shared) {
      ++with_buffer;
      plain.buffers.pop_back();
    }
    got[ev.tid].push_back("S " + Describe(plain));
    order.emplace_back(std::max(ev.entry_ns, ev.exit_ns), static_cast<size_t>(ev.tid & 1));
  });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(with_buffer, (s.syscalls.size() + 499) / 500);
  ASSERT_EQ(got.size(), want.size());
  for (auto& [tid, lines] : want) {
    std::vector<std::string>& g = got[tid];
    ASSERT_EQ(g.size(), lines.size()) << "tid " << tid;
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], lines[i]) << "tid " << tid << " #" << i;
  }
  // Read in the streams merged by time: each lane's calls in their order, the lanes interleaved
  // at the earlier head, not chunk after chunk.
  std::vector<std::vector<uint64_t>> lane_times(2);
  for (const SyscallEvent& ev : s.syscalls)
    lane_times[ev.tid & 1].push_back(std::max(ev.entry_ns, ev.exit_ns));
  std::vector<std::pair<uint64_t, size_t>> want_order;
  size_t a = 0, b = 0;
  while (a < lane_times[0].size() || b < lane_times[1].size()) {
    bool first = b == lane_times[1].size() ||
                 (a < lane_times[0].size() && lane_times[0][a] <= lane_times[1][b]);
    want_order.emplace_back(first ? lane_times[0][a++] : lane_times[1][b++], first ? 0 : 1);
  }
  EXPECT_EQ(order, want_order);

  // Without its footer (cut after the last data chunk) the streams come from the chunk headers.
  const ChunkRef& last = r->chunks().back();
  ASSERT_EQ(::truncate(path.c_str(),
                       static_cast<off_t>(last.offset + kChunkHeaderSize + last.stored_length)),
            0);
  auto cut = Reader::Open(path);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  EXPECT_FALSE(cut->has_footer());
  std::vector<std::pair<uint64_t, size_t>> cut_order;
  st = cut->ForEach([&](const SyscallEvent& ev) {
    cut_order.emplace_back(std::max(ev.entry_ns, ev.exit_ns), static_cast<size_t>(ev.tid & 1));
  });
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(cut_order, want_order);
}

TEST(RoundTripTest, MoreThanOneLaneNeedsEncodingOnTheCaller) {
  ScratchDir dir;
  WriterOptions o;
  o.lanes = 2;
  auto w = Writer::Create(dir.File("x.fay"), SampleInfo(), o);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("lanes"), std::string::npos);
}

TEST(RoundTripTest, EdgeValuesSurvive) {
  ScratchDir dir;
  std::string path = dir.File("edge.fay");
  SyscallEvent a;
  a.entry_ns = UINT64_MAX - 5;
  a.exit_ns = 3;  // earlier than entry: stored as given, not "fixed"
  a.pid = INT32_MIN;
  a.tid = INT32_MAX;
  a.ppid = -1;
  a.uid = UINT32_MAX;
  a.comm = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p'};
  a.nr = -1;
  a.args = {UINT64_MAX, 0, 1ull << 63, 42, UINT64_MAX - 1, 7};
  a.ret = INT64_MIN;
  a.flags = 0xFFFFFFFFu;
  a.cpu = INT32_MAX;  // minor 2: a known CPU follows the buffers
  CapturedBuffer odd;
  odd.arg = 200;  // outside 0..5
  odd.sub = 65535;
  odd.dir = static_cast<BufferDir>(0);
  odd.addr = 1;
  odd.length = UINT64_MAX;
  odd.truncated = true;
  odd.not_captured = true;
  odd.bytes = {0, 0, 0};
  CapturedBuffer empty;
  empty.arg = 5;
  empty.addr = 0;
  a.buffers = {odd, empty};
  SyscallEvent b = a;  // same tid, context changes inside the chunk
  b.comm = {'x', '\0', 'y'};
  b.uid = 0;
  b.nr = 0;
  b.exit_ns = 0;
  b.entry_ns = 0;
  b.buffers.clear();
  b.cpu = -1;  // unknown (ptrace): nothing is stored, and it reads back as unknown
  ProcessEvent p;
  p.kind = static_cast<ProcessEventKind>(200);
  p.time_ns = UINT64_MAX;
  p.pid = -5;
  p.tid = INT32_MIN;
  p.parent_pid = INT32_MAX;
  p.is_thread = true;
  p.exit_status = INT32_MIN;
  p.path = std::string("with\0nul", 8);
  {
    auto w = Writer::Create(path, RecordingInfo{});
    ASSERT_TRUE(w.ok());
    (*w)->Append(a);
    (*w)->Append(p);
    (*w)->Append(b);
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got,
            (std::vector<std::string>{"S " + Describe(a), "P " + Describe(p), "S " + Describe(b)}));
  EXPECT_TRUE(r->info().argv.empty());
  EXPECT_EQ(r->info().root_pid, 0);
}

// A signal is a record kind of its own (minor 6): its siginfo comes back byte for byte, and a
// process record after it does not inherit its signal.
TEST(RoundTripTest, SignalRecordsComeBackAndLeaveNothingBehind) {
  ScratchDir dir;
  std::string path = dir.File("signals.fay");
  ProcessEvent sig;
  sig.kind = ProcessEventKind::kSignal;
  sig.time_ns = 1000;
  sig.pid = 40;
  sig.tid = 41;
  sig.signo = 17;
  for (size_t i = 0; i < kSiginfoBytes; ++i) sig.siginfo.push_back(static_cast<uint8_t>(i * 7));
  ProcessEvent unknown = sig;  // the siginfo unknown
  unknown.time_ns = 900;       // earlier: deltas go both ways
  unknown.signo = 64;
  unknown.siginfo.clear();
  ProcessEvent exit;
  exit.kind = ProcessEventKind::kExit;
  exit.time_ns = 2000;
  exit.pid = exit.tid = 40;
  exit.exit_status = 9;
  {
    auto w = Writer::Create(path, RecordingInfo{});
    ASSERT_TRUE(w.ok());
    (*w)->Append(sig);
    (*w)->Append(unknown);
    (*w)->Append(exit);
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got, (std::vector<std::string>{"P " + Describe(sig), "P " + Describe(unknown),
                                           "P " + Describe(exit)}));
  EXPECT_EQ(r->stats().process_events, 3u);
}

TEST(DedupTest, SamePayloadIsStoredOnce) {
  ScratchDir dir;
  std::string path = dir.File("dedup.fay");
  std::vector<uint8_t> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 13 + 1);
  std::vector<uint8_t> other = payload;
  other[999] ^= 1;
  WriterOptions opts;
  opts.chunk_bytes = 1;  // each event in its own chunk: dedup must span chunks
  auto w = Writer::Create(path, SampleInfo(), opts);
  ASSERT_TRUE(w.ok());
  (*w)->Append(WriteEvent(100, payload));
  (*w)->Append(WriteEvent(200, payload));
  (*w)->Append(WriteEvent(300, other));
  (*w)->Append(WriteEvent(400, payload));
  ASSERT_TRUE((*w)->Close().ok());
  WriterStats ws = (*w)->stats();
  EXPECT_EQ(ws.blobs_stored, 2u);
  EXPECT_EQ(ws.blobs_deduped, 2u);
  EXPECT_EQ(ws.bytes_captured, 4000u);
  EXPECT_EQ(ws.bytes_blob_stored, 2000u);
  EXPECT_EQ(ws.syscall_events, 4u);

  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats().blobs, 2u);
  EXPECT_EQ(r->stats().blob_bytes, 2000u);
  EXPECT_EQ(r->stats().event_chunks, 4u);
  EXPECT_EQ(r->stats().blob_chunks, 2u);
  std::vector<std::vector<uint8_t>> got;
  Status st = r->ForEach([&](const SyscallEvent& e) { got.push_back(e.buffers.at(0).bytes); });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got, (std::vector<std::vector<uint8_t>>{payload, payload, other, payload}));
  EXPECT_EQ(r->stats().bytes_captured, 4000u);
}

TEST(DedupTest, SmallPayloadsStayInline) {
  ScratchDir dir;
  std::string path = dir.File("inline.fay");
  auto w = Writer::Create(path, SampleInfo());
  ASSERT_TRUE(w.ok());
  (*w)->Append(WriteEvent(1, std::vector<uint8_t>(kInlineMax, 0xAB)));
  (*w)->Append(WriteEvent(2, std::vector<uint8_t>(kInlineMax + 1, 0xAB)));
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ((*w)->stats().blobs_stored, 1u);
  EXPECT_EQ((*w)->stats().bytes_blob_stored, kInlineMax + 1);
}

// A thread-phased stream: tid 10 first, then 20, then 30; small chunks so the index can skip.
Stream PhasedStream() {
  Stream s;
  for (int i = 0; i < 3000; ++i) {
    SyscallEvent e;
    e.tid = e.pid = 10 * (1 + i / 1000);
    e.comm = Comm("phase");
    e.entry_ns = 1000 + uint64_t(i) * 100;
    e.exit_ns = e.entry_ns + 50;
    e.nr = i % 3;
    e.args = {uint64_t(i % 5), 0, 0, 0, 0, 0};
    e.ret = i;
    s.order.emplace_back(false, s.syscalls.size());
    s.syscalls.push_back(e);
  }
  return s;
}

TEST(SeekTest, ByThreadUsesTheIndex) {
  ScratchDir dir;
  std::string path = dir.File("seek.fay");
  Stream s = PhasedStream();
  WriterOptions opts;
  opts.chunk_bytes = 512;
  WriteStream(path, s, opts);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  ReadFilter f;
  f.tids = {20};
  Status st;
  std::vector<std::string> got = testing::ReadAll(*r, &st, f);
  ASSERT_TRUE(st.ok());
  std::vector<std::string> want;
  for (const SyscallEvent& e : s.syscalls)
    if (e.tid == 20) want.push_back("S " + Describe(e));
  EXPECT_EQ(got, want);
  // Chunks holding only tid 10 or only tid 30 were never read.
  size_t with_20 = 0;
  for (const ChunkRef& c : r->chunks())
    if (c.type == ChunkType::kEvents && std::find(c.tids.begin(), c.tids.end(), 20) != c.tids.end())
      ++with_20;
  EXPECT_GT(r->stats().chunks_skipped, 0u);
  EXPECT_EQ(r->stats().chunks_skipped, r->stats().event_chunks - with_20);
}

TEST(SeekTest, ByTimeRangeUsesTheIndex) {
  ScratchDir dir;
  std::string path = dir.File("time.fay");
  Stream s = PhasedStream();
  WriterOptions opts;
  opts.chunk_bytes = 512;
  WriteStream(path, s, opts);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  ReadFilter f;
  f.from_ns = 1000 + 1500 * 100 + 25;  // inside event 1500 (entry +25, exit +50)
  f.to_ns = 1000 + 1600 * 100;
  Status st;
  std::vector<std::string> got = testing::ReadAll(*r, &st, f);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(got.size(), 101u);  // events 1500..1600
  EXPECT_EQ(got.front(), "S " + Describe(s.syscalls[1500]));
  EXPECT_EQ(got.back(), "S " + Describe(s.syscalls[1600]));
  EXPECT_GT(r->stats().chunks_skipped, r->stats().event_chunks / 2);
}

TEST(WriterTest, LossRecordsAreCounted) {
  ScratchDir dir;
  std::string path = dir.File("loss.fay");
  auto w = Writer::Create(path, SampleInfo());
  ASSERT_TRUE(w.ok());
  (*w)->Append(WriteEvent(1, {}));
  (*w)->AppendLoss(5, 3);
  (*w)->AppendLoss(9, 4);
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ((*w)->stats().lost_events, 7u);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->ForEach({}).ok());
  EXPECT_EQ(r->stats().lost_events, 7u);
  EXPECT_EQ(r->stats().syscall_events, 1u);
}

TEST(WriterTest, LossRecordsKeepTheirCpu) {
  ScratchDir dir;
  std::string path = dir.File("loss-cpu.fay");
  auto w = Writer::Create(path, SampleInfo());
  ASSERT_TRUE(w.ok());
  (*w)->AppendLoss(5, 3, 0);
  (*w)->AppendLoss(6, 4, 1);
  (*w)->AppendLoss(7, 2);  // no CPU named
  ASSERT_TRUE((*w)->Close().ok());
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->ForEach({}).ok());
  EXPECT_EQ(r->stats().lost_events, 9u);
  std::map<int32_t, uint64_t> want{{-1, 2}, {0, 3}, {1, 4}};
  EXPECT_EQ(r->stats().lost_by_cpu, want);
}

// Random bytes do not compress: the blob chunk is stored as is, and reads back the same.
TEST(WriterTest, IncompressibleBlobsAreStoredRaw) {
  ScratchDir dir;
  std::string path = dir.File("random.fay");
  RecordingInfo info = SampleInfo();
  info.max_buffer = 0;  // whole buffers: the 200 KiB payload fits
  auto w = Writer::Create(path, info);
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> noise(200 << 10);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& b : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  (*w)->Append(WriteEvent(1, noise));
  ASSERT_TRUE((*w)->Close().ok());
  auto st = (*w)->stats();
  EXPECT_GE(st.bytes_stored, st.bytes_raw - 1024);  // nothing gained, nothing spent trying
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(r->ForEach([&](const SyscallEvent& ev) { got = ev.buffers.at(0).bytes; }).ok());
  EXPECT_EQ(got, noise);
}

TEST(WriterTest, TinyQueueBlocksInsteadOfDropping) {
  ScratchDir dir;
  std::string path = dir.File("bp.fay");
  WriterOptions opts;
  opts.queue_events = 2;
  opts.queue_bytes = 1;  // every event exceeds it: one at a time
  opts.chunk_bytes = 1024;
  Stream s = MakeStream(3000, 9);
  WriteStream(path, s, opts);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  Status st;
  EXPECT_EQ(ReadAll(*r, &st), ExpectedLines(s));
}

TEST(WriterTest, AppendAfterCloseIsRefusedAndCounted) {
  ScratchDir dir;
  auto w = Writer::Create(dir.File("c.fay"), SampleInfo());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_FALSE((*w)->Append(WriteEvent(1, {})));
  EXPECT_EQ((*w)->stats().dropped_events, 1u);
  EXPECT_TRUE((*w)->Close().ok());  // idempotent
}

TEST(WriterTest, FlushesOnATimerSoAKillLosesLittle) {
  ScratchDir dir;
  std::string path = dir.File("timer.fay");
  WriterOptions opts;
  opts.flush_interval = std::chrono::milliseconds(50);
  auto w = Writer::Create(path, SampleInfo(), opts);
  ASSERT_TRUE(w.ok());
  (*w)->Append(WriteEvent(1, std::vector<uint8_t>(100, 1)));
  // Poll the file as a reader would after kill -9 (the writer never closes before we look).
  size_t seen = 0;
  for (int i = 0; i < 100 && seen == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r->truncated());
    ASSERT_TRUE(r->ForEach([&](const SyscallEvent&) { ++seen; }).ok());
  }
  EXPECT_EQ(seen, 1u);
  ASSERT_TRUE((*w)->Close().ok());
}

TEST(WriterTest, UnwritablePathFailsAtCreate) {
  auto w = Writer::Create("/nonexistent-dir/x.fay", SampleInfo());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "cannot create trace file /nonexistent-dir/x.fay: No such file or directory");
}

// The issue's size budget: without buffers, a syscall must cost at most a third of strace's
// text line (40-70 bytes for these calls). A repetitive read/write/fstat loop compresses to
// about 2.6 bytes per event; 4 leaves room for zstd version drift, not for a regression.
TEST(CompactnessTest, EventsWithoutBuffersCostAFewBytes) {
  ScratchDir dir;
  std::string path = dir.File("size.fay");
  const int n = 50000;
  {
    auto w = Writer::Create(path, SampleInfo());
    ASSERT_TRUE(w.ok());
    uint64_t t = 1'000'000'000;
    for (int i = 0; i < n; ++i) {
      SyscallEvent e;
      e.pid = 500;
      e.tid = 500 + (i / 1000) % 2;
      e.ppid = 1;
      e.uid = 1000;
      e.comm = Comm("cat");
      e.entry_ns = t;
      e.exit_ns = t + 800 + (i * 37) % 400;
      t += 3000 + (i * 7919) % 2000;
      switch (i % 3) {
        case 0:  // read(3, 0x7ffd..., 131072) = 131072
          e.nr = 0;
          e.args = {3, 0x7ffd12340000, 131072, 0, 0, 0};
          e.ret = (i % 300 == 0) ? 0 : 131072;
          break;
        case 1:  // write(1, 0x7ffd..., 131072) = 131072
          e.nr = 1;
          e.args = {1, 0x7ffd12340000, 131072, 0, 0, 0};
          e.ret = 131072;
          break;
        default:  // fstat(3, 0x7ffd...) = 0
          e.nr = 5;
          e.args = {3, 0x7ffd12350000 + uint64_t(i % 5) * 16, 0, 0, 0, 0};
          e.ret = 0;
      }
      (*w)->Append(e);
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  double per_event = double(r->stats().bytes_stored) / n;
  RecordProperty("bytes_per_event", std::to_string(per_event));
  EXPECT_LE(per_event, 4.0);
}

}  // namespace
}  // namespace fay::trace
