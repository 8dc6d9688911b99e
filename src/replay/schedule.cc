#include "replay/schedule.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "schema/syscall_table.h"
#include "trace/reader.h"

namespace fay::replay {
namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

bool Returned(const SyscallEvent& ev) {
  return ev.exit_ns != 0 && !(ev.flags & kEventNoExit);
}

bool CreatesTask(int nr) {
  return nr == sysno::clone || nr == sysno::clone3 || nr == sysno::fork || nr == sysno::vfork;
}

}  // namespace

void ScheduleBuilder::Add(const ProcessEvent& p) {
  if (p.kind == ProcessEventKind::kFork && !p.is_thread) s_.parent_of[p.pid] = p.parent_pid;
  if (p.kind == ProcessEventKind::kSignal) ++s_.signals[p.signo];
}

void ScheduleBuilder::Add(SyscallEvent&& ev) {
  if (s_.calls == 0) s_.first_ns = kNever;
  if (last_thread_ == UINT32_MAX || ev.tid != last_tid_) {
    auto [it, fresh] = by_tid_.try_emplace(ev.tid, static_cast<uint32_t>(s_.threads.size()));
    if (fresh) {
      s_.threads.push_back(ThreadCalls{ev.pid, ev.tid, {}});
      if (s_.threads.size() == 1 && expected_ > 0) s_.threads[0].calls.reserve(expected_);
    }
    last_tid_ = ev.tid;
    last_thread_ = it->second;
  }
  s_.first_ns = std::min(s_.first_ns, ev.entry_ns);
  s_.last_ns = std::max(s_.last_ns, ev.LastNs());
  s_.threads[last_thread_].calls.push_back(Call{s_.calls++, std::move(ev), {}});
}

Schedule BuildSchedule(std::vector<SyscallEvent> events, const std::vector<ProcessEvent>& procs) {
  ScheduleBuilder b(events.size());
  for (const ProcessEvent& p : procs) b.Add(p);
  for (SyscallEvent& ev : events) b.Add(std::move(ev));
  return std::move(b).Finish();
}

Schedule ScheduleBuilder::Finish() && {
  Schedule s = std::move(s_);
  if (s.calls == 0) s.first_ns = 0;
  auto by_entry = [](const Call& a, const Call& b) { return a.ev.entry_ns < b.ev.entry_ns; };
  for (ThreadCalls& t : s.threads) {
    // Usually in order already: a thread's calls are written as they happen.
    if (!std::is_sorted(t.calls.begin(), t.calls.end(), by_entry)) {
      std::stable_sort(t.calls.begin(), t.calls.end(), by_entry);
    }
  }

  // One thread depends on no other: program order is the whole ordering.
  if (s.threads.size() <= 1) return s;

  // Completion points: thread T reaches k completed calls at the running maximum of its exit
  // times (a call that never returned holds back every later call of its thread).
  struct Completion {
    uint64_t ns;
    uint32_t thread;
    uint32_t count;
  };
  std::vector<Completion> done;
  struct Start {
    uint64_t ns;
    uint32_t thread;
    uint32_t call;
  };
  std::vector<Start> starts;
  for (uint32_t t = 0; t < s.threads.size(); ++t) {
    uint64_t max_exit = 0;
    const auto& calls = s.threads[t].calls;
    for (uint32_t i = 0; i < calls.size(); ++i) {
      const SyscallEvent& ev = calls[i].ev;
      max_exit = std::max(max_exit, Returned(ev) ? ev.exit_ns : kNever);
      if (max_exit != kNever) done.push_back({max_exit, t, i + 1});
      starts.push_back({ev.entry_ns, t, i});
    }
  }
  auto done_order = [](const Completion& a, const Completion& b) {
    return a.ns != b.ns ? a.ns < b.ns : a.thread < b.thread;
  };
  auto start_order = [](const Start& a, const Start& b) {
    return a.ns != b.ns           ? a.ns < b.ns
           : a.thread != b.thread ? a.thread < b.thread
                                  : a.call < b.call;
  };
  // One thread's lists come out sorted already.
  if (!std::is_sorted(done.begin(), done.end(), done_order))
    std::sort(done.begin(), done.end(), done_order);
  if (!std::is_sorted(starts.begin(), starts.end(), start_order))
    std::sort(starts.begin(), starts.end(), start_order);

  // Sweep the starts in time order; done[0, p) are the completions strictly before the current
  // start. A thread needs only the completions logged since its own previous call.
  std::vector<size_t> seen_upto(s.threads.size(), 0);
  std::vector<uint32_t> latest(s.threads.size(), 0);
  std::vector<uint32_t> touched;
  size_t p = 0;
  for (const Start& st : starts) {
    while (p < done.size() && done[p].ns < st.ns) ++p;
    touched.clear();
    for (size_t q = seen_upto[st.thread]; q < p; ++q) {
      const Completion& c = done[q];
      if (c.thread == st.thread) continue;
      if (latest[c.thread] == 0) touched.push_back(c.thread);
      latest[c.thread] = std::max(latest[c.thread], c.count);
    }
    seen_upto[st.thread] = p;
    Call& call = s.threads[st.thread].calls[st.call];
    for (uint32_t t : touched) {
      call.deps.push_back({t, latest[t]});
      latest[t] = 0;
    }
    s.dependencies += touched.size();
  }

  // A new task's first call waits for the call that created it, whose return may come after
  // the child's first call started: the child's state (its fd table) is made by that call.
  std::unordered_map<int64_t, Dep> creator;
  for (uint32_t t = 0; t < s.threads.size(); ++t) {
    const auto& calls = s.threads[t].calls;
    for (uint32_t i = 0; i < calls.size(); ++i) {
      if (CreatesTask(calls[i].ev.nr) && calls[i].ev.ret > 0) creator[calls[i].ev.ret] = {t, i + 1};
    }
  }
  for (uint32_t t = 0; t < s.threads.size(); ++t) {
    auto it = creator.find(s.threads[t].tid);
    if (it == creator.end() || it->second.thread == t || s.threads[t].calls.empty()) continue;
    s.threads[t].calls.front().deps.push_back(it->second);
    ++s.dependencies;
  }
  return s;
}

CallStream::CallStream(const Schedule& schedule)
    : info_(schedule.info),
      lazy_(schedule.lazy),
      path_(schedule.path),
      parent_of_(&schedule.parent_of),
      complete_(true) {
  std::vector<std::pair<uint32_t, uint32_t>> order;
  for (uint32_t t = 0; t < schedule.threads.size(); ++t) {
    for (uint32_t i = 0; i < schedule.threads[t].calls.size(); ++i) order.emplace_back(t, i);
  }
  // A single thread's calls are in order already (the schedule sorted them).
  if (schedule.threads.size() > 1) {
    std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      return schedule.threads[a.first].calls[a.second].ev.entry_ns <
             schedule.threads[b.first].calls[b.second].ev.entry_ns;
    });
  }
  ordered_.reserve(order.size());
  for (auto [t, i] : order) ordered_.push_back(&schedule.threads[t].calls[i].ev);
}

const SyscallEvent* CallStream::Next() {
  if (complete_) return next_ < ordered_.size() ? ordered_[next_++] : nullptr;
  for (;;) {
    uint64_t epoch = epoch_.load(std::memory_order_acquire);
    if (next_ < published_.load(std::memory_order_acquire))
      return &base_.load(std::memory_order_acquire)[next_++].ev;
    if (abandoned_.load(std::memory_order_acquire)) return nullptr;
    if (ended_.load(std::memory_order_acquire)) {
      // End comes after the last Publish: seen ended, the final count is visible.
      if (next_ < published_.load(std::memory_order_acquire)) continue;
      return nullptr;
    }
    epoch_.wait(epoch, std::memory_order_acquire);
  }
}

void CallStream::Publish(const Call* base, size_t n) {
  base_.store(base, std::memory_order_release);
  published_.store(n, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
}

void CallStream::End() {
  ended_.store(true, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
}

void CallStream::Abandon() {
  abandoned_.store(true, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
}

Expected<Schedule> LoadSchedule(const std::string& path) {
  return LoadSchedule(path, {});
}

Expected<BlobFetcher> BlobFetcher::Open(const std::string& path) {
  FAY_ASSIGN_OR_RETURN(trace::Reader reader, trace::Reader::Open(path));
  reader.ShareBlobs(true);
  return BlobFetcher(std::move(reader));
}

Status BlobFetcher::Fetch(const CapturedBuffer& b, CapturedBuffer::SharedBytes* out) {
  if (!b.stored) return Error(Code::kInternal, "a buffer the trace holds inline was fetched");
  return reader_.FetchShared(*b.stored, out);
}

bool IsDataBuffer(const SyscallEvent& ev, const CapturedBuffer& b) {
  if (b.arg != 1) return false;
  switch (ev.nr) {
    case sysno::read:
    case sysno::pread64:
      return b.dir == BufferDir::kOut;
    case sysno::write:
    case sysno::pwrite64:
      return b.dir == BufferDir::kIn;
    // Element 0 is the iovec array itself, which the replay reads to lay the elements out.
    case sysno::readv:
    case sysno::preadv:
    case sysno::preadv2:
      return b.dir == BufferDir::kOut && b.sub > 0;
    case sysno::writev:
    case sysno::pwritev:
    case sysno::pwritev2:
      return b.dir == BufferDir::kIn && b.sub > 0;
    default:
      return false;
  }
}

Expected<Schedule> LoadSchedule(const std::string& path,
                                const std::function<void(CallStream&)>& walk,
                                const LoadOptions& options) {
  FAY_ASSIGN_OR_RETURN(trace::Reader reader, trace::Reader::Open(path));
  // Equal buffers (W3's 10,000 files of a few hundred contents) share one copy: loading then
  // costs the distinct bytes, not every byte the program moved.
  reader.ShareBlobs(true);
  // A large store stays in the file: memory for the events, not for every byte moved.
  const bool lazy = reader.stats().blob_bytes >= options.lazy_blob_bytes;
  if (lazy) reader.LeaveUnread(IsDataBuffer);
  uint64_t indexed = 0;  // the footer's count, when there is one: one allocation up front
  // One thread throughout, says the index: its calls can be walked while they load.
  std::optional<int32_t> only_tid;
  bool one_thread = reader.has_footer();
  for (const trace::ChunkRef& c : reader.chunks()) {
    if (c.type != trace::ChunkType::kEvents) continue;
    indexed += c.count;
    if (!c.indexed || c.tids.size() > 1) one_thread = false;
    for (int32_t tid : c.tids) {
      if (only_tid && *only_tid != tid) one_thread = false;
      only_tid = tid;
    }
  }
  ScheduleBuilder builder(indexed);
  CallStream stream;
  stream.info_ = reader.info();
  stream.expected_ = indexed;
  stream.lazy_ = lazy;
  stream.path_ = path;
  std::thread walker;
  bool streaming = walk && one_thread && only_tid && indexed > 0;
  if (streaming) walker = std::thread([&] { walk(stream); });
  size_t unpublished = 0;
  // Before the streamed calls move (the list regrows, or is sorted) or go (an error): whatever
  // reads them, the walk and what the walk let through, must be done with them.
  auto stop_streaming = [&] {
    if (streaming) {
      streaming = false;
      stream.Abandon();
      if (walker.joinable()) walker.join();
    }
    if (options.stop_streaming) options.stop_streaming();
  };
  // Taken, not copied, and straight into the thread's list.
  Status st = reader.ForEachTaking(
      trace::ReadFilter{},
      [&](SyscallEvent&& ev) {
        // The calls must stay where the walker reads them, in start order: a thread the index
        // did not name, more calls than it counted or a call that started before the one
        // ahead of it, and the walk starts again once the load is done.
        if (streaming &&
            (ev.tid != *only_tid || builder.first_count() >= indexed ||
             (builder.first_count() > 0 &&
              ev.entry_ns < builder.first_calls()[builder.first_count() - 1].ev.entry_ns))) {
          stop_streaming();
        }
        builder.Add(std::move(ev));
        // In small batches at first, so what follows the load (a replay) starts at once.
        if (streaming && ++unpublished >= (builder.first_count() < 4096 ? 16u : 256u)) {
          stream.Publish(builder.first_calls(), builder.first_count());
          unpublished = 0;
        }
      },
      [&](const ProcessEvent& ev) { builder.Add(ev); });
  if (!st.ok()) {
    stop_streaming();
    return st;
  }
  bool walked = false;
  if (walker.joinable()) {
    stream.Publish(builder.first_calls(), builder.first_count());
    stream.End();
    walked = true;
    walker.join();
  }
  uint64_t lost = reader.stats().lost_events;
  if (lost > 0) {
    stop_streaming();
    return Error(Code::kInvalidArgument,
                 path + ": the recording lost " + std::to_string(lost) +
                     " events; a trace with holes cannot be replayed faithfully");
  }
  Schedule s = std::move(builder).Finish();
  s.info = reader.info();
  s.path = path;
  s.lazy = lazy;
  s.truncation = reader.TruncationNotice();
  if (walk && !walked && options.walk_complete) {
    CallStream all(s);
    walk(all);
  }
  return s;
}

}  // namespace fay::replay
