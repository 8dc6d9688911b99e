#include "replay/replayer.h"

#include <fmt/core.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "replay/executor.h"
#include "schema/syscall_table.h"

namespace fay::replay {
namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Sleeps until ns on CLOCK_MONOTONIC. A sleep wakes tens of microseconds late, which summed over
// thousands of short recorded gaps would stretch the timeline many times over: the last
// stretch is spun instead.
void SleepUntil(uint64_t ns) {
  constexpr uint64_t kSpinNs = 60'000;
  if (ns > NowNs() + kSpinNs) {
    uint64_t wake = ns - kSpinNs;
    timespec ts{static_cast<time_t>(wake / 1'000'000'000ull),
                static_cast<long>(wake % 1'000'000'000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  while (NowNs() < ns) __builtin_ia32_pause();
}

// Each recorded thread's completed-call count, alone in its cache line.
struct alignas(64) Progress {
  std::atomic<uint32_t> done{0};
};

class Processes : public ProcessDirectory {
 public:
  ProcessState* Find(int32_t pid) override {
    auto it = map_.find(pid);
    return it == map_.end() ? nullptr : it->second.get();
  }
  ProcessState& Add(int32_t pid) {
    auto& p = map_[pid];
    if (!p) p = std::make_unique<ProcessState>();
    return *p;
  }
  size_t size() const { return map_.size(); }

 private:
  // Filled before the workers start and never changed after: lookups need no lock.
  std::unordered_map<int32_t, std::unique_ptr<ProcessState>> map_;
};

// The first path argument of a call, as recorded, for mismatch lines.
std::string FirstPath(const SyscallEvent& ev) {
  const SyscallSignature& sig = Signature(ev.nr);
  for (int i = 0; i < sig.nargs; ++i) {
    if (sig.args[i].type != ArgType::kPath) continue;
    const CapturedBuffer* b = FindBuffer(ev, i);
    return b ? CapturedString(b) : std::string();
  }
  return {};
}

// One recorded thread's calls as the workers see them: all of a schedule's, or those of a
// one-thread trace that is still loading, which a CallGate lets through.
struct ThreadView {
  int32_t pid = 0;
  int32_t tid = 0;
  const Call* calls = nullptr;
  size_t size = 0;
};

struct Input {
  std::vector<ThreadView> threads;
  bool lazy = false;
  std::string path;
  std::string cwd;
  uint64_t calls = 0;  // for progress: a streamed trace's indexed count
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  const CallGate* gate = nullptr;  // streaming: the one thread's calls, as far as it allows
};

Input FromSchedule(const Schedule& s) {
  Input in;
  for (const ThreadCalls& t : s.threads) {
    in.threads.push_back({t.pid, t.tid, t.calls.data(), t.calls.size()});
  }
  in.lazy = s.lazy;
  in.path = s.path;
  in.cwd = s.info.cwd;
  in.calls = s.calls;
  in.first_ns = s.first_ns;
  in.last_ns = s.last_ns;
  return in;
}

struct WorkerTally {
  uint64_t replayed = 0, emulated = 0, verified = 0, mismatches = 0, as_prepared = 0;
  uint64_t withheld = 0;
  std::vector<Mismatch> listed;
  std::map<int, uint64_t> emulated_by_nr;
  std::map<int, uint64_t> mismatch_by_nr;
  std::map<std::pair<int, int>, uint64_t> interrupted;
};

class Run {
 public:
  Run(Input in, const Sandbox& sb, const ReplayOptions& o)
      : s_(std::move(in)), sb_(sb), o_(o), progress_(s_.threads.size()) {}

  ReplayReport Go();
  // What stopped the replay, if anything did (see Fail).
  Status error() const {
    std::lock_guard<std::mutex> lock(error_mu_);
    return error_;
  }

 private:
  void Worker(std::vector<uint32_t> owned, WorkerTally* tally);
  // Whether thread t has a call i to run: for the one thread of a trace still loading, once the
  // gate allows it (the thread's process is set up with its first call).
  bool HasCall(uint32_t t, uint32_t i);
  bool Ready(const Call& c) const {
    for (const Dep& d : c.deps) {
      if (progress_[d.thread].done.load(std::memory_order_acquire) < d.count) return false;
    }
    return true;
  }
  void WaitFor(const Call& c) const {
    for (const Dep& d : c.deps) {
      const auto& a = progress_[d.thread].done;
      for (uint32_t v = a.load(std::memory_order_acquire); v < d.count;
           v = a.load(std::memory_order_acquire)) {
        a.wait(v, std::memory_order_acquire);
      }
    }
  }
  // Returns whether the call was replayed (false: emulated).
  bool Execute(Executor& ex, uint32_t t, uint32_t i, WorkerTally* tally, BlobFetcher* fetcher);
  void Done(uint32_t t, uint32_t i);
  // The first error that stops the replay (a lazy schedule's data unreadable): every worker then
  // runs out its calls without executing them, so none waits forever on another.
  void Fail(const Status& st) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_.ok()) error_ = st;
    failed_.store(true, std::memory_order_release);
  }
  // A lazy schedule's call, with its data fetched from the trace into *local (which holds it,
  // and the blob chunk under it, only while the call runs); the call itself when nothing is to
  // be fetched. nullptr once the replay has failed.
  const SyscallEvent* WithData(const Call& c, BlobFetcher* fetcher, SyscallEvent* local);
  void ShowProgress();

  Input s_;
  const Sandbox& sb_;
  const ReplayOptions& o_;
  Processes procs_;
  std::vector<Progress> progress_;
  // Bumped after every call only when workers multiplex threads: a worker with nothing ready
  // sleeps on it.
  bool multiplexed_ = false;
  alignas(64) std::atomic<uint64_t> epoch_{0};
  uint64_t start_ns_ = 0;
  mode_t mask_ = 0;  // the umask the replay started with
  std::atomic<bool> finished_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex error_mu_;
  Status error_;
};

const SyscallEvent* Run::WithData(const Call& c, BlobFetcher* fetcher, SyscallEvent* local) {
  if (failed_.load(std::memory_order_acquire)) return nullptr;
  if (!s_.lazy || std::none_of(c.ev.buffers.begin(), c.ev.buffers.end(),
                               [](const CapturedBuffer& b) { return b.stored.has_value(); }))
    return &c.ev;
  *local = c.ev;
  for (CapturedBuffer& b : local->buffers) {
    if (!b.stored) continue;
    Status st = fetcher ? fetcher->Fetch(b, &b.shared)
                        : Error(Code::kInternal, "no reader for the trace's data");
    if (!st.ok()) {
      Fail(Status(st.code(), fmt::format("call {}: {}", c.index, st.message())));
      return nullptr;
    }
    b.stored.reset();
  }
  return local;
}

void Run::Done(uint32_t t, uint32_t i) {
  progress_[t].done.store(i + 1, std::memory_order_release);
  progress_[t].done.notify_all();
  if (multiplexed_) {
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
  }
}

bool Run::Execute(Executor& ex, uint32_t t, uint32_t i, WorkerTally* tally, BlobFetcher* fetcher) {
  const ThreadView& th = s_.threads[t];
  const Call& c = th.calls[i];
  SyscallEvent local;
  const SyscallEvent* ev = WithData(c, fetcher, &local);
  if (!ev) {
    Done(t, i);
    return false;
  }
  ProcessState* proc = procs_.Find(th.pid);
  Outcome out = ex.Run(*ev, *proc);
  if (!out.replayed) {
    ++tally->emulated;
    ++tally->emulated_by_nr[c.ev.nr];
    if (out.interrupted) ++tally->interrupted[{c.ev.nr, static_cast<int>(-c.ev.ret)}];
  } else {
    ++tally->replayed;
    if (out.withheld) ++tally->withheld;
    if (o_.verify) {
      bool ret_ok;
      bool rec_failed = c.ev.ret < 0 && c.ev.ret >= -4095;
      if (out.compare == RetCompare::kSuccess) {
        ret_ok = rec_failed ? out.ret == c.ev.ret : out.ret >= 0;
      } else {
        ret_ok = out.ret == c.ev.ret;
      }
      if (ret_ok && out.data_mismatch.empty()) {
        ++tally->verified;
        if (out.as_prepared) ++tally->as_prepared;
      } else {
        ++tally->mismatches;
        ++tally->mismatch_by_nr[c.ev.nr];
        if (tally->listed.size() < o_.max_listed) {
          Mismatch m;
          m.index = c.index;
          m.tid = th.tid;
          m.nr = c.ev.nr;
          m.expected = FormatRet(c.ev.ret);
          m.actual = FormatRet(out.ret);
          if (out.compare == RetCompare::kSuccess) {
            // New fds: the numbers are the replayer's own, only success is compared.
            if (!rec_failed) m.expected = fmt::format("fd {}", c.ev.ret);
            if (out.ret >= 0) m.actual = "an fd";
          }
          if (!out.data_mismatch.empty()) m.actual += " (" + out.data_mismatch + ")";
          m.path = FirstPath(c.ev);
          tally->listed.push_back(std::move(m));
        }
      }
    }
  }
  Done(t, i);
  return out.replayed;
}

void Run::Worker(std::vector<uint32_t> owned, WorkerTally* tally) {
  Executor ex(sb_, procs_, ExecutorOptions{o_.verify, o_.prepared});
  std::optional<BlobFetcher> fetcher;
  if (s_.lazy) {
    auto f = BlobFetcher::Open(s_.path);
    if (f.ok()) {
      fetcher.emplace(std::move(f).value());
    } else {
      Fail(f.status());
    }
  }
  BlobFetcher* fetch = fetcher ? &*fetcher : nullptr;
  // Timed replay sleeps often and briefly: the default 50 us of timer slack would add up.
  if (o_.timing != Timing::kAsap) ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  std::vector<uint32_t> pos(owned.size(), 0);
  // Timing: when the previous call of each owned thread finished (live) and ended (recorded).
  std::vector<uint64_t> live_prev(owned.size(), 0);
  bool timed = o_.timing != Timing::kAsap;
  double speed = o_.timing == Timing::kOriginal ? 1.0 : o_.speed;
  auto pace = [&](size_t k, const Call& c) {
    if (!timed) return;
    uint64_t target;
    if (pos[k] == 0) {
      target = start_ns_ + static_cast<uint64_t>((c.ev.entry_ns - s_.first_ns) / speed);
    } else {
      const Call& prev = s_.threads[owned[k]].calls[pos[k] - 1];
      uint64_t gap = c.ev.entry_ns > prev.ev.exit_ns && prev.ev.exit_ns != 0
                         ? c.ev.entry_ns - prev.ev.exit_ns
                         : 0;
      target = live_prev[k] + static_cast<uint64_t>(gap / speed);
    }
    if (target > NowNs()) SleepUntil(target);
  };
  // With timing, an emulated call lasts as long as it did (a sleep, a wait for the network): it
  // is part of the program's timeline even though nothing is done for it.
  auto hold = [&](const Call& c, uint64_t began) {
    if (!timed || c.ev.exit_ns <= c.ev.entry_ns) return;
    uint64_t until = began + static_cast<uint64_t>((c.ev.exit_ns - c.ev.entry_ns) / speed);
    if (until > NowNs()) SleepUntil(until);
  };
  if (owned.size() == 1) {
    uint32_t t = owned[0];
    for (uint32_t i = 0; HasCall(t, i); ++i) {
      const Call* calls = s_.threads[t].calls;
      WaitFor(calls[i]);
      pace(0, calls[i]);
      uint64_t began = timed ? NowNs() : 0;
      if (!Execute(ex, t, i, tally, fetch)) hold(calls[i], began);
      pos[0] = i + 1;
      live_prev[0] = timed ? NowNs() : 0;
    }
    return;
  }
  size_t left = 0;
  for (uint32_t t : owned) left += s_.threads[t].size;
  while (left > 0) {
    uint64_t seen = epoch_.load(std::memory_order_acquire);
    bool ran = false;
    for (size_t k = 0; k < owned.size(); ++k) {
      const Call* calls = s_.threads[owned[k]].calls;
      while (pos[k] < s_.threads[owned[k]].size && Ready(calls[pos[k]])) {
        pace(k, calls[pos[k]]);
        uint64_t began = timed ? NowNs() : 0;
        if (!Execute(ex, owned[k], pos[k], tally, fetch)) hold(calls[pos[k]], began);
        ++pos[k];
        live_prev[k] = timed ? NowNs() : 0;
        --left;
        ran = true;
      }
    }
    if (!ran && left > 0) epoch_.wait(seen, std::memory_order_acquire);
  }
}

bool Run::HasCall(uint32_t t, uint32_t i) {
  if (!s_.gate) return i < s_.threads[t].size;
  if (!s_.gate->WaitFor(i)) return false;
  if (i == 0) {
    // The first call is in: the thread and its process are known now.
    ThreadView& th = s_.threads[0];
    th.calls = s_.gate->calls();
    th.pid = th.calls[0].ev.pid;
    th.tid = th.calls[0].ev.tid;
    s_.first_ns = th.calls[0].ev.entry_ns;  // in start order
    // The only worker: the directory is its own.
    ProcessState& p = procs_.Add(th.pid);
    p.set_cwd(s_.cwd.empty() ? "/" : s_.cwd);
    p.set_umask(mask_);
  }
  return true;
}

void Run::ShowProgress() {
  bool tty = ::isatty(STDERR_FILENO);
  uint64_t total = s_.calls;
  uint64_t last_print = NowNs();
  while (true) {
    bool last = finished_.load();
    if (!last) std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 200 : 100));
    uint64_t done = 0;
    for (const Progress& p : progress_) done += p.done.load(std::memory_order_relaxed);
    uint64_t now = NowNs();
    double secs = (now - start_ns_) / 1e9;
    double rate = secs > 0 ? done / secs : 0;
    double eta = rate > 0 ? (total - done) / rate : 0;
    int width = 30;
    int fill = total ? static_cast<int>(width * done / total) : width;
    std::string bar(fill, '#');
    bar.resize(width, '.');
    std::string line =
        fmt::format("[{}] {}/{} calls  {:.0f} calls/s  ETA {:.0f} s", bar, done, total, rate, eta);
    if (tty) {
      fmt::print(stderr, "\r{}\033[K", line);
    } else if (last || now - last_print >= 1'000'000'000ull) {
      // Not a terminal (a log): a line a second, and the final state.
      fmt::print(stderr, "{}\n", line);
      last_print = now;
    }
    std::fflush(stderr);
    if (last) break;
  }
  if (tty) fmt::print(stderr, "\r\033[K");
}

ReplayReport Run::Go() {
  // Every process exists before the workers start, so the directory never changes under them.
  mask_ = ::umask(0);  // the replay applies each process's recorded umask itself
  std::map<int32_t, bool> seen;
  for (const ThreadView& t : s_.threads) {
    if (s_.gate) break;  // its worker adds the process once the first call is in
    if (seen.emplace(t.pid, true).second) {
      ProcessState& p = procs_.Add(t.pid);
      p.set_cwd(s_.cwd.empty() ? "/" : s_.cwd);
      p.set_umask(mask_);
    }
  }
  unsigned n = static_cast<unsigned>(s_.threads.size());
  unsigned workers = o_.threads == 0 ? n : std::min(o_.threads, n);
  multiplexed_ = workers < n;
  std::vector<std::vector<uint32_t>> owned(workers);
  for (uint32_t t = 0; t < n; ++t) owned[t % workers].push_back(t);
  std::vector<WorkerTally> tallies(workers);
  start_ns_ = NowNs();
  std::thread progress;
  if (o_.progress) progress = std::thread([this] { ShowProgress(); });
  {
    std::vector<std::jthread> threads;
    for (unsigned w = 0; w < workers; ++w) {
      threads.emplace_back([this, &owned, &tallies, w] { Worker(owned[w], &tallies[w]); });
    }
  }
  uint64_t end = NowNs();
  finished_ = true;
  if (progress.joinable()) progress.join();
  ::umask(mask_);

  ReplayReport r;
  r.calls = s_.calls;
  r.wall_ns = end - start_ns_;
  r.recorded_ns = s_.last_ns > s_.first_ns ? s_.last_ns - s_.first_ns : 0;
  r.workers = workers;
  r.recorded_threads = n;
  r.processes = procs_.size();
  for (WorkerTally& t : tallies) {
    r.replayed += t.replayed;
    r.emulated += t.emulated;
    r.verified += t.verified;
    r.as_prepared += t.as_prepared;
    r.withheld += t.withheld;
    r.mismatches += t.mismatches;
    for (auto& m : t.listed) r.listed.push_back(std::move(m));
    for (auto [nr, c] : t.emulated_by_nr) r.emulated_by_nr[nr] += c;
    for (auto [key, c] : t.interrupted) r.interrupted[key] += c;
    for (auto [nr, c] : t.mismatch_by_nr) r.mismatch_by_nr[nr] += c;
  }
  std::sort(r.listed.begin(), r.listed.end(),
            [](const Mismatch& a, const Mismatch& b) { return a.index < b.index; });
  if (r.listed.size() > o_.max_listed) r.listed.resize(o_.max_listed);
  return r;
}

// What the complete and the streamed replay share: the options' check, the run, and the error
// that stopped it (its report is then not the replay's).
Expected<ReplayReport> RunAll(Input in, const Sandbox& sandbox, const ReplayOptions& options) {
  if (options.timing == Timing::kScaled && !(options.speed > 0)) {
    return Error(Code::kInvalidArgument, "--timing xN needs N > 0");
  }
  Run run(std::move(in), sandbox, options);
  ReplayReport report = run.Go();
  if (Status st = run.error(); !st.ok()) return st;
  return report;
}

}  // namespace

std::string FormatRet(int64_t ret) {
  if (ret < 0 && ret >= -4095) {
    const char* name = strerrorname_np(static_cast<int>(-ret));
    return fmt::format("-1 {}", name ? name : std::to_string(-ret));
  }
  return std::to_string(ret);
}

Expected<ReplayReport> Replay(const Schedule& schedule, const Sandbox& sandbox,
                              const ReplayOptions& options) {
  return RunAll(FromSchedule(schedule), sandbox, options);
}

Expected<ReplayReport> ReplayStreaming(const StreamedTrace& trace, const CallGate& gate,
                                       const Sandbox& sandbox, const ReplayOptions& options) {
  Input in;
  in.threads.resize(1);
  in.lazy = trace.lazy;
  in.path = trace.path;
  in.cwd = trace.cwd;
  in.calls = trace.expected_calls;
  in.gate = &gate;
  return RunAll(std::move(in), sandbox, options);
}

}  // namespace fay::replay
