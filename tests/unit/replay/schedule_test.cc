// The ordering rule as data: a call depends on exactly the calls of other threads that completed
// before it started, expressed as the smallest set of (thread, count) pairs.
#include "replay/schedule.h"

#include <gtest/gtest.h>

#include <thread>

#include "replay_test_util.h"
#include "schema/syscall_table.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace fay::replay {
namespace {

SyscallEvent Call(int32_t tid, uint64_t entry, uint64_t exit, int nr = sysno::getpid,
                  int64_t ret = 0) {
  SyscallEvent ev;
  ev.pid = 1;
  ev.tid = tid;
  ev.nr = nr;
  ev.entry_ns = entry;
  ev.exit_ns = exit;
  ev.ret = ret;
  if (exit == 0) ev.flags = kEventNoExit;
  return ev;
}

// The i-th call of thread 1: a read of 4 KiB, every byte `fill`.
SyscallEvent ReadOf(int i, uint8_t fill) {
  SyscallEvent ev = Call(1, 10 + 10 * i, 15 + 10 * i, sysno::read, 4096);
  CapturedBuffer b;
  b.arg = 1;
  b.dir = BufferDir::kOut;
  b.length = 4096;
  b.bytes.assign(4096, fill);
  ev.buffers.push_back(b);
  return ev;
}

// Writes events as a trace in many small chunks (with wo's sizes).
void WriteTrace(const std::string& path, const std::vector<SyscallEvent>& events,
                trace::WriterOptions wo) {
  auto w = trace::Writer::Create(path, RecordingInfo{}, wo);
  ASSERT_TRUE(w.ok()) << w.status().message();
  for (const SyscallEvent& ev : events) (*w)->Append(ev);
  ASSERT_TRUE((*w)->Close().ok());
}

std::string Deps(const Schedule& s, int t, int i) {
  std::string out;
  for (const Dep& d : s.threads[t].calls[i].deps) {
    out += (out.empty() ? "" : " ") + std::to_string(s.threads[d.thread].tid) + ":" +
           std::to_string(d.count);
  }
  return out;
}

TEST(ScheduleTest, OverlappingCallsAreIndependentAndCompletedOnesAreWaitedFor) {
  // Thread 1: [0,10] [12,40]; thread 2: [5,15] [20,30] [41,50].
  std::vector<SyscallEvent> ev = {Call(1, 0, 10), Call(2, 5, 15), Call(1, 12, 40), Call(2, 20, 30),
                                  Call(2, 41, 50)};
  Schedule s = BuildSchedule(ev, {});
  ASSERT_EQ(s.threads.size(), 2u);
  EXPECT_EQ(s.calls, 5u);
  EXPECT_EQ(s.first_ns, 0u);
  EXPECT_EQ(s.last_ns, 50u);
  EXPECT_EQ(Deps(s, 0, 0), "");
  EXPECT_EQ(Deps(s, 0, 1), "");     // [5,15] was still running at 12
  EXPECT_EQ(Deps(s, 1, 0), "");     // overlaps [0,10]
  EXPECT_EQ(Deps(s, 1, 1), "1:1");  // [0,10] ended before 20; [12,40] had not
  EXPECT_EQ(Deps(s, 1, 2), "1:2");  // [12,40] ended before 41
  EXPECT_EQ(s.dependencies, 2u);
}

TEST(ScheduleTest, OnlyNewDependenciesAreStored) {
  // Thread 2's second call needs nothing more of thread 1 than its first did.
  std::vector<SyscallEvent> ev = {Call(1, 0, 1), Call(2, 5, 6), Call(2, 7, 8)};
  Schedule s = BuildSchedule(ev, {});
  EXPECT_EQ(Deps(s, 1, 0), "1:1");
  EXPECT_EQ(Deps(s, 1, 1), "");
}

TEST(ScheduleTest, ACallThatNeverReturnedSatisfiesNothing) {
  std::vector<SyscallEvent> ev = {Call(1, 0, 0, sysno::exit), Call(1, 1, 2), Call(2, 10, 11)};
  Schedule s = BuildSchedule(ev, {});
  EXPECT_EQ(Deps(s, 1, 0), "");  // thread 1's calls count as still running
}

TEST(ScheduleTest, ProgramOrderIsEntryOrderAndTheIndexIsTheFilePosition) {
  std::vector<SyscallEvent> ev = {Call(1, 20, 21), Call(1, 10, 11)};
  Schedule s = BuildSchedule(ev, {});
  EXPECT_EQ(s.threads[0].calls[0].ev.entry_ns, 10u);
  EXPECT_EQ(s.threads[0].calls[0].index, 1u);
  EXPECT_EQ(s.threads[0].calls[1].index, 0u);
}

TEST(ScheduleTest, ANewTaskWaitsForTheCallThatCreatedIt) {
  // The child's first call starts before the parent's clone returns.
  std::vector<SyscallEvent> ev = {Call(1, 0, 1), Call(1, 10, 30, sysno::clone, 7), Call(7, 20, 21)};
  ProcessEvent fork;
  fork.kind = ProcessEventKind::kFork;
  fork.pid = 7;
  fork.tid = 7;
  fork.parent_pid = 1;
  Schedule s = BuildSchedule(ev, {fork});
  ASSERT_EQ(s.threads.size(), 2u);
  EXPECT_EQ(Deps(s, 1, 0), "1:1 1:2");
  EXPECT_EQ(s.parent_of.at(7), 1);
}

// Many small events chunks: every call comes back once, in file order, with its buffers (moved
// out of the reader, not lost on the way).
TEST(ScheduleTest, LoadsAManyChunkTraceInFileOrder) {
  testing::ScratchDir dir;
  std::string path = dir.File("chunks.fay");
  constexpr int kCalls = 300;
  {
    trace::WriterOptions wo;
    wo.chunk_bytes = 512;
    wo.blob_chunk_bytes = 4096;
    auto w = trace::Writer::Create(path, RecordingInfo{}, wo);
    ASSERT_TRUE(w.ok()) << w.status().message();
    for (int i = 0; i < kCalls; ++i) {
      SyscallEvent ev = Call(1 + i % 2, 10 + 10 * i, 15 + 10 * i, sysno::read, 100);
      CapturedBuffer b;
      b.arg = 1;
      b.dir = BufferDir::kOut;
      b.length = 100;
      b.bytes.assign(100, static_cast<uint8_t>(i));
      ev.buffers.push_back(b);
      (*w)->Append(ev);
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = trace::Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->stats().event_chunks, 2u);
  auto s = LoadSchedule(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->calls, static_cast<uint64_t>(kCalls));
  ASSERT_EQ(s->threads.size(), 2u);
  for (int t = 0; t < 2; ++t) {
    const auto& calls = s->threads[t].calls;
    ASSERT_EQ(calls.size(), static_cast<size_t>(kCalls / 2));
    for (size_t k = 0; k < calls.size(); ++k) {
      uint64_t i = 2 * k + t;
      EXPECT_EQ(calls[k].index, i);
      ASSERT_EQ(calls[k].ev.buffers.size(), 1u);
      std::span<const uint8_t> got = calls[k].ev.buffers[0].View();
      EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()),
                std::vector<uint8_t>(100, static_cast<uint8_t>(i)));
    }
  }
}

// --prepare's walk sees every call once, in start order: while the trace loads when it has one
// thread, from the complete schedule otherwise.
TEST(ScheduleTest, AWalkSeesEveryCallInStartOrder) {
  testing::ScratchDir dir;
  for (int threads : {1, 2}) {
    std::string path = dir.File("walk" + std::to_string(threads) + ".fay");
    constexpr int kCalls = 3000;
    {
      trace::WriterOptions wo;
      wo.chunk_bytes = 512;  // many chunks, so the walk overlaps the load
      auto w = trace::Writer::Create(path, RecordingInfo{}, wo);
      ASSERT_TRUE(w.ok()) << w.status().message();
      for (int i = 0; i < kCalls; ++i)
        (*w)->Append(Call(1 + i % threads, 10 + 10 * i, 15 + 10 * i, sysno::getppid, 1));
      ASSERT_TRUE((*w)->Close().ok());
    }
    std::vector<uint64_t> seen;
    int walks = 0;
    auto s = LoadSchedule(path, [&](CallStream& calls) {
      ++walks;
      seen.clear();
      while (const SyscallEvent* ev = calls.Next()) seen.push_back(ev->entry_ns);
    });
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(walks, 1);
    ASSERT_EQ(seen.size(), static_cast<size_t>(kCalls)) << threads << " threads";
    for (int i = 0; i < kCalls; ++i) ASSERT_EQ(seen[i], 10u + 10u * i) << "call " << i;
    EXPECT_EQ(s->calls, static_cast<uint64_t>(kCalls));
  }
}

// A one-thread trace whose calls are not in start order cannot stream: the loader stops what
// read the streamed calls before it sorts them, and the walk runs again over the whole schedule.
TEST(ScheduleTest, AStreamThatCannotGoOnIsStoppedBeforeItsCallsMove) {
  testing::ScratchDir dir;
  std::string path = dir.File("unordered.fay");
  constexpr int kCalls = 2000;
  std::vector<SyscallEvent> events;
  for (int i = 0; i < kCalls; ++i) {
    int at = i == kCalls - 10 ? 5 : i;  // one call late in the file started early
    events.push_back(Call(1, 100 + 10 * at, 105 + 10 * at, sysno::getppid, 1));
  }
  trace::WriterOptions wo;
  wo.chunk_bytes = 512;
  WriteTrace(path, events, wo);
  std::vector<bool> streaming;
  std::vector<size_t> seen;
  int stops = 0;
  LoadOptions opt;
  opt.stop_streaming = [&] {
    ++stops;
    EXPECT_EQ(streaming.size(), 1u);  // the first walk is over
  };
  CallGate gate;
  auto s = LoadSchedule(
      path,
      [&](CallStream& calls) {
        streaming.push_back(calls.streaming());
        size_t n = 0;
        while (calls.Next()) gate.Allow(++n, calls.calls());
        seen.push_back(n);
      },
      opt);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(stops, 1);
  EXPECT_EQ(streaming, (std::vector<bool>{true, false}));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_LT(seen[0], static_cast<size_t>(kCalls));
  EXPECT_EQ(seen[1], static_cast<size_t>(kCalls));
  ASSERT_EQ(s->threads.size(), 1u);
  EXPECT_EQ(s->threads[0].calls[6].ev.entry_ns, 150u);  // sorted: the late call after its twin
  EXPECT_EQ(s->threads[0].calls[7].ev.entry_ns, 160u);
}

TEST(ScheduleTest, ACallGateLetsThroughWhatItAllowsThenEverythingOrNothing) {
  fay::replay::Call calls[3];
  CallGate open;
  open.Allow(2, calls);
  EXPECT_TRUE(open.WaitFor(0));
  EXPECT_TRUE(open.WaitFor(1));
  EXPECT_EQ(open.calls(), calls);
  open.End(3, calls);
  EXPECT_TRUE(open.WaitFor(2));
  EXPECT_FALSE(open.WaitFor(3));  // the thread has 3 calls
  EXPECT_EQ(open.early(), 2u);
  EXPECT_FALSE(open.failed());

  CallGate failed;
  failed.Allow(1, calls);
  std::thread waiter([&] { EXPECT_FALSE(failed.WaitFor(1)); });
  failed.Fail();
  waiter.join();
  EXPECT_TRUE(failed.failed());
}

TEST(ScheduleTest, EqualBuffersShareOneCopy) {
  testing::ScratchDir dir;
  std::string path = dir.File("shared.fay");
  {
    auto w = trace::Writer::Create(path, RecordingInfo{}, trace::WriterOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    for (int i = 0; i < 4; ++i) {
      (*w)->Append(ReadOf(i, static_cast<uint8_t>(i % 2)));  // two distinct contents
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto s = LoadSchedule(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const auto& calls = s->threads.at(0).calls;
  ASSERT_EQ(calls.size(), 4u);
  for (const auto& c : calls) {
    ASSERT_EQ(c.ev.buffers.size(), 1u);
    EXPECT_TRUE(c.ev.buffers[0].bytes.empty());  // held in `shared`, not copied
    EXPECT_EQ(c.ev.buffers[0].View().size(), 4096u);
  }
  EXPECT_EQ(calls[0].ev.buffers[0].View().data(), calls[2].ev.buffers[0].View().data());
  EXPECT_EQ(calls[1].ev.buffers[0].View().data(), calls[3].ev.buffers[0].View().data());
  EXPECT_NE(calls[0].ev.buffers[0].View().data(), calls[1].ev.buffers[0].View().data());
  EXPECT_EQ(calls[1].ev.buffers[0].View()[0], 1);
}

// Shared buffers point into their blob chunk. A blob referenced again after the reader's
// chunk cache has turned over still resolves to that one copy, not a chunk decoded again.
TEST(ScheduleTest, ABlobReferencedAfterItsChunkLeftTheCacheIsStillOneCopy) {
  testing::ScratchDir dir;
  std::string path = dir.File("late.fay");
  constexpr int kDistinct = 12;
  trace::WriterOptions opts;
  opts.blob_chunk_bytes = 8 << 10;  // two blobs a chunk: six chunks, more than the cache holds
  {
    auto w = trace::Writer::Create(path, RecordingInfo{}, opts);
    ASSERT_TRUE(w.ok()) << w.status().message();
    for (int i = 0; i <= kDistinct; ++i) {
      (*w)->Append(ReadOf(i, static_cast<uint8_t>(i % kDistinct + 1)));  // the last repeats one
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto s = LoadSchedule(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const auto& calls = s->threads.at(0).calls;
  ASSERT_EQ(calls.size(), static_cast<size_t>(kDistinct + 1));
  for (int i = 0; i <= kDistinct; ++i) {
    ASSERT_EQ(calls[i].ev.buffers.size(), 1u);
    auto v = calls[i].ev.buffers[0].View();
    ASSERT_EQ(v.size(), 4096u) << "call " << i;
    EXPECT_EQ(v[0], i % kDistinct + 1) << "call " << i;
    EXPECT_EQ(v[4095], i % kDistinct + 1) << "call " << i;
  }
  EXPECT_EQ(calls[0].ev.buffers[0].View().data(), calls[kDistinct].ev.buffers[0].View().data());
  EXPECT_NE(calls[0].ev.buffers[0].View().data(), calls[1].ev.buffers[0].View().data());
}

// A lazy load leaves the data of reads and writes in the trace, and only that: a path of the
// same length still comes back with its bytes. BlobFetcher then gives the recorded bytes.
TEST(ScheduleTest, LazyLoadLeavesReadAndWriteDataInTheTrace) {
  testing::ScratchDir dir;
  std::string path = dir.File("lazy.fay");
  std::string long_path = "/" + std::string(100, 'p');
  {
    auto w = trace::Writer::Create(path, RecordingInfo{}, trace::WriterOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    SyscallEvent open = Call(1, 10, 15, sysno::openat, 3);
    CapturedBuffer p;
    p.arg = 1;
    p.dir = BufferDir::kIn;
    p.length = long_path.size() + 1;
    p.bytes.assign(long_path.begin(), long_path.end());
    p.bytes.push_back(0);
    open.buffers.push_back(p);
    (*w)->Append(open);
    SyscallEvent read = Call(1, 20, 25, sysno::read, 4096);
    CapturedBuffer d;
    d.arg = 1;
    d.dir = BufferDir::kOut;
    d.length = 4096;
    for (int i = 0; i < 4096; ++i) d.bytes.push_back(static_cast<uint8_t>(i * 7));
    read.buffers.push_back(d);
    (*w)->Append(read);
    ASSERT_TRUE((*w)->Close().ok());
  }
  LoadOptions lazy;
  lazy.lazy_blob_bytes = 0;
  auto s = LoadSchedule(path, {}, lazy);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->lazy);
  EXPECT_EQ(s->path, path);
  const auto& calls = s->threads.at(0).calls;
  ASSERT_EQ(calls.size(), 2u);
  const CapturedBuffer& pb = calls[0].ev.buffers.at(0);
  EXPECT_FALSE(pb.stored.has_value());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(pb.View().data())), long_path);
  const CapturedBuffer& db = calls[1].ev.buffers.at(0);
  ASSERT_TRUE(db.stored.has_value());
  EXPECT_TRUE(db.View().empty());
  EXPECT_EQ(db.Size(), 4096u);
  auto fetcher = BlobFetcher::Open(path);
  ASSERT_TRUE(fetcher.ok()) << fetcher.status().message();
  CapturedBuffer::SharedBytes bytes;
  ASSERT_TRUE(fetcher->Fetch(db, &bytes).ok());
  ASSERT_EQ(bytes.size, 4096u);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(bytes.data.get()[i], static_cast<uint8_t>(i * 7));

  // The default threshold keeps a small trace in memory.
  auto eager = LoadSchedule(path);
  ASSERT_TRUE(eager.ok());
  EXPECT_FALSE(eager->lazy);
  EXPECT_EQ(eager->threads.at(0).calls[1].ev.buffers.at(0).View().size(), 4096u);
}

}  // namespace
}  // namespace fay::replay
