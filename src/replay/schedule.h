// The replay schedule: a trace's syscalls split per recorded thread, in program order, each
// carrying the cross-thread dependencies that the ordering rule demands.
//
// The rule: a call starts only after every call that completed (in the recording) before it
// started has completed (in the replay). Within a thread program order gives that for free.
// Across threads it is expressed as "thread T has completed at least k calls" -- threads
// complete calls in program order, so one counter per thread says everything. A call carries
// only the (T, k) pairs that grew since its thread's previous call; the rest are implied.
//
// Every dependency points to a call with an earlier recorded exit time than the dependant's, so
// the graph has no cycle and the replay cannot deadlock on a consistent trace. A call that never
// returned counts as completing at the end of time: it satisfies nothing, and neither does any
// later call of its thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/syscall_event.h"
#include "trace/reader.h"

namespace fay::replay {

struct Dep {
  uint32_t thread = 0;  // index into Schedule::threads
  uint32_t count = 0;   // that thread must have completed at least this many calls
};

struct Call {
  uint64_t index = 0;  // position of the call in the trace file (what mismatches report)
  SyscallEvent ev;
  std::vector<Dep> deps;
};

struct ThreadCalls {
  int32_t pid = 0;
  int32_t tid = 0;
  std::vector<Call> calls;  // program order
};

struct Schedule {
  RecordingInfo info;
  std::string path;  // the trace it came from
  // The data of reads and writes was left in the trace (CapturedBuffer::stored): it is fetched
  // per call with a BlobFetcher, so a gigabyte trace replays without a gigabyte of memory.
  bool lazy = false;
  std::vector<ThreadCalls> threads;
  uint64_t calls = 0;
  uint64_t first_ns = 0;                 // earliest entry
  uint64_t last_ns = 0;                  // latest exit
  std::map<int32_t, int32_t> parent_of;  // pid -> parent pid, from fork events of processes
  std::map<int, uint64_t> signals;       // signal -> how many the threads took
  uint64_t dependencies = 0;             // cross-thread (T, k) pairs stored
  // The trace was cut short: Reader::TruncationNotice, which the command prints. Empty if not.
  std::string truncation;
};

struct LoadOptions {
  // A trace whose blob store holds at least this many bytes loads lazily (Schedule::lazy).
  uint64_t lazy_blob_bytes = 64 << 20;
  // A walk that could not stream runs over the complete schedule (false: it is skipped).
  bool walk_complete = true;
  // Called, on the loading thread, before the streamed calls move or are freed (the index was
  // wrong about the threads, or the load failed): it must stop whatever the walk let read them
  // (a replay started from the walk) and wait for it.
  std::function<void()> stop_streaming;
};

// Reads the whole trace. Errors carry the reader's file offsets.
Expected<Schedule> LoadSchedule(const std::string& path);

// The bytes of buffers a lazy schedule left in the trace. Not thread-safe: one per thread, each
// with its own reader (descriptor, decompressor and chunk cache).
class BlobFetcher {
 public:
  static Expected<BlobFetcher> Open(const std::string& path);
  // Points out->data at the buffer's bytes (b.stored), which stay valid while *out holds them.
  Status Fetch(const CapturedBuffer& b, CapturedBuffer::SharedBytes* out);

 private:
  explicit BlobFetcher(trace::Reader r) : reader_(std::move(r)) {}
  trace::Reader reader_;
};

// Whether a lazy schedule leaves this buffer in the trace: the data of the read and write
// families, which only the call itself (and --prepare's file contents) use.
bool IsDataBuffer(const SyscallEvent& ev, const CapturedBuffer& b);

// A trace's calls in recorded start order, handed to a walk over them (--prepare's) while the
// trace is still loading when it can be: a trace whose index shows one thread is in start
// order in the file, and its calls stay where they are put. Otherwise the walk sees them once
// the schedule is complete.
class CallStream {
 public:
  CallStream() = default;
  // Over a complete schedule: its calls in start order, threads interleaved by entry time.
  explicit CallStream(const Schedule& schedule);

  // The next call, or nullptr at the end (or when the walk must start again: see
  // LoadSchedule). Blocks until the loader has it.
  const SyscallEvent* Next();
  const RecordingInfo& info() const { return info_; }
  // Streaming from the loader (one thread, in start order): the thread's calls, where they stay
  // while the trace loads; calls()[k] is the k-th call Next returned. Null when not streaming.
  bool streaming() const { return !complete_; }
  const Call* calls() const { return base_.load(std::memory_order_acquire); }
  // The calls the trace's index counts (streaming), for a progress bar.
  uint64_t expected() const { return expected_; }
  bool lazy() const { return lazy_; }
  const std::string& path() const { return path_; }
  // Which process forked which (null while streaming: a one-thread trace forks none that
  // makes calls).
  const std::map<int32_t, int32_t>* parent_of() const { return parent_of_; }

 private:
  friend Expected<Schedule> LoadSchedule(const std::string&,
                                         const std::function<void(CallStream&)>&,
                                         const LoadOptions&);
  void Publish(const Call* base, size_t n);
  void End();
  void Abandon();
  RecordingInfo info_;
  uint64_t expected_ = 0;
  bool lazy_ = false;
  std::string path_;
  const std::map<int32_t, int32_t>* parent_of_ = nullptr;
  std::atomic<uint64_t> epoch_{0};  // bumped by each of the three above
  // Streaming from the loader:
  std::atomic<const Call*> base_{nullptr};
  std::atomic<size_t> published_{0};
  std::atomic<bool> ended_{false};
  std::atomic<bool> abandoned_{false};
  size_t next_ = 0;
  // From a complete schedule:
  std::vector<const SyscallEvent*> ordered_;
  bool complete_ = false;
};

// How far a replay that started while the trace loads may go: calls [0, allowed) of the trace's
// one thread. The walk over the loading calls allows them (see Preparer::StreamTo); the loader
// ends the gate once the schedule is complete and prepared, or fails it. One waiter.
class CallGate {
 public:
  // Calls [0, n) of `calls` (CallStream::calls) may run (n only grows).
  void Allow(uint64_t n, const Call* calls) {
    if (n <= allowed_.load(std::memory_order_relaxed)) return;
    calls_.store(calls, std::memory_order_relaxed);
    allowed_.store(n, std::memory_order_release);
    allowed_.notify_one();
  }
  // Every call may run; the thread has `total`, at `calls` (where they were while streaming).
  void End(uint64_t total, const Call* calls) {
    early_ = allowed_.load(std::memory_order_relaxed);
    total_ = total;
    calls_.store(calls, std::memory_order_relaxed);
    allowed_.store(kEnded, std::memory_order_release);
    allowed_.notify_one();
  }
  // Nothing more runs: the load or the preparation failed, or the index was wrong.
  void Fail() {
    failed_.store(true, std::memory_order_release);
    allowed_.store(kEnded, std::memory_order_release);
    allowed_.notify_one();
  }
  // Blocks until call i may run (true) or there is no call i to run (false: the thread ended
  // before it, or the gate failed).
  bool WaitFor(uint64_t i) const {
    uint64_t a = allowed_.load(std::memory_order_acquire);
    while (a <= i) {
      allowed_.wait(a, std::memory_order_acquire);
      a = allowed_.load(std::memory_order_acquire);
    }
    if (a != kEnded) return true;
    return !failed_.load(std::memory_order_acquire) && i < total_;
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // How many calls were allowed before End: those that could run while the trace loaded.
  uint64_t early() const { return early_; }
  // The thread's calls, once WaitFor returned true.
  const Call* calls() const { return calls_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kEnded = UINT64_MAX;
  std::atomic<uint64_t> allowed_{0};
  std::atomic<bool> failed_{false};
  uint64_t early_ = 0;
  uint64_t total_ = 0;                       // written before allowed_ ends, read after
  std::atomic<const Call*> calls_{nullptr};  // stored before allowed_ grows, loaded after
};

// As LoadSchedule, running `walk` over the calls (on another thread while loading, when the
// trace allows it). `walk` runs once; when streaming had to stop (the index was wrong about the
// threads), it runs again from the start over the complete schedule, so it must reset itself.
Expected<Schedule> LoadSchedule(const std::string& path,
                                const std::function<void(CallStream&)>& walk,
                                const LoadOptions& options = {});

// Builds a schedule from events handed over one at a time, in trace order, without holding
// them twice: each goes straight to its thread's list.
class ScheduleBuilder {
 public:
  // `expected_calls`: how many calls the trace holds, when known (its index says); the first
  // thread's list is sized for them, sparing a program's main thread every regrowth.
  explicit ScheduleBuilder(uint64_t expected_calls = 0) : expected_(expected_calls) {}
  void Add(SyscallEvent&& ev);
  void Add(const ProcessEvent& ev);
  // Orders each thread's calls and computes the dependencies.
  Schedule Finish() &&;

  // The first thread's calls so far, where they stay while fewer than expected_calls were
  // added (the list was sized for them); nullptr before the first call.
  const Call* first_calls() const {
    return s_.threads.empty() ? nullptr : s_.threads[0].calls.data();
  }
  size_t first_count() const { return s_.threads.empty() ? 0 : s_.threads[0].calls.size(); }

 private:
  Schedule s_;
  uint64_t expected_ = 0;
  std::map<int32_t, uint32_t> by_tid_;
  int32_t last_tid_ = 0;
  uint32_t last_thread_ = UINT32_MAX;
};

// Splits events into threads and computes the dependencies; exposed for tests.
Schedule BuildSchedule(std::vector<SyscallEvent> events, const std::vector<ProcessEvent>& procs);

}  // namespace fay::replay
