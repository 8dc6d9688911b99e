#include "engine/offline/trace_query.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/interpreter.h"
#include "engine/offline/event_builder.h"
#include "engine/offline/fd_paths.h"
#include "trace/reader.h"

namespace fay {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

uint64_t Realtime(const RecordingInfo& info, uint64_t mono_ns) {
  return info.anchor_realtime_ns + (mono_ns - info.anchor_monotonic_ns);
}

bool InRange(const SyscallEvent& ev, uint64_t from, uint64_t to) {
  uint64_t end = ev.exit_ns ? ev.exit_ns : ev.entry_ns;
  return end >= from && ev.entry_ns <= to;
}

// One reader and one interpreter over every shards-th events chunk.
struct Worker {
  explicit Worker(const Plan& plan) : builder(plan), interp(plan) {}
  EventBuilder builder;
  Interpreter interp;
  Status status;
  uint64_t events = 0;
  uint64_t skipped = 0;
  double cpu_seconds = 0;
};

Status RunParallel(const Plan& plan, const std::string& path, const TraceQueryOptions& opt,
                   unsigned threads, trace::Reader& first, uint64_t last_ns, OutputSink& sink,
                   TraceQueryStats* stats) {
  const RecordingInfo first_info = first.info();
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned i = 0; i < threads; ++i) {
    workers.push_back(std::make_unique<Worker>(plan));
    workers.back()->builder.SetOrigin(opt.trace_name, first_info.host);
  }
  auto run = [&](unsigned k) {
    Worker& w = *workers[k];
    const double cpu0 = ThreadCpuSeconds();
    // Each worker has its own reader: its own descriptor, decompressor and blob cache.
    Expected<trace::Reader> own =
        k == 0 ? Expected<trace::Reader>(std::move(first)) : trace::Reader::Open(path);
    if (!own.ok()) {
      w.status = own.status();
      return;
    }
    own->SkipBlobs(!w.builder.needs_bytes());
    trace::ReadFilter filter;
    filter.from_ns = opt.from_ns;
    filter.to_ns = opt.to_ns;
    filter.shard = k;
    filter.shards = threads;
    w.status = own->ForEach(filter, [&](const SyscallEvent& ev) {
      ++w.events;
      if (w.builder.ProbeOf(ev.nr) < 0) return;
      w.interp.Process(w.builder.Build(ev, {}));
    });
    w.skipped = own->stats().chunks_skipped;
    w.cpu_seconds = ThreadCpuSeconds() - cpu0;
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k) pool.emplace_back(run, k);
  run(0);
  for (std::thread& t : pool) t.join();
  Status status;
  for (auto& w : workers) {
    stats->events_read += w->events;
    stats->chunks_skipped += w->skipped;
    stats->cpu_seconds += w->cpu_seconds;
    if (status.ok() && !w->status.ok()) status = w->status;
    if (w.get() != workers[0].get()) workers[0]->interp.Merge(w->interp);
  }
  // Damage found by one reader says nothing of the chunks after it that others read: the caller
  // redoes the query in file order, which stops at the damage, so the result is the same.
  if (!status.ok()) return status;
  Interpreter& merged = workers[0]->interp;
  if (!merged.first_error().ok()) return merged.first_error();
  sink.Window(plan, merged.TakeWindow(Realtime(first_info, last_ns)));
  stats->run = merged.stats();
  return status;
}

}  // namespace

namespace {

Status RunOneTable(const Plan& plan, const std::string& path, const TraceQueryOptions& opt,
                   OutputSink& sink, TraceQueryStats* stats);

// Results kept rather than printed: one trace's, to merge with the others'; one table's, to
// print beside the others' window by window.
class CollectSink : public OutputSink {
 public:
  void Window(const Plan& plan, const ResultSet& rs) override { windows.emplace_back(&plan, rs); }
  void SelectRow(const Plan&, const std::vector<Value>&, uint64_t) override {}
  std::vector<std::pair<const Plan*, ResultSet>> windows;
};

}  // namespace

// Several tables are read one after the other over the same recording, each a plan of the same
// events (Plan::tables), and printed in that order.
Status RunTraceQuery(const Plan& plan, const std::string& path, const TraceQueryOptions& opt,
                     OutputSink& sink, TraceQueryStats* stats) {
  if (plan.tables.empty()) return RunOneTable(plan, path, opt, sink, stats);
  // With every, each table's windows are kept and printed as live: every table's first window,
  // then every table's second, and so on.
  std::vector<CollectSink> kept(plan.every_ns ? plan.tables.size() + 1 : 0);
  auto out = [&](size_t i) -> OutputSink& { return kept.empty() ? sink : kept[i]; };
  Status st = RunOneTable(plan, path, opt, out(0), stats);
  for (size_t i = 0; st.ok() && i < plan.tables.size(); ++i) {
    TraceQueryStats more;
    st = RunOneTable(*plan.tables[i], path, opt, out(i + 1), &more);
    stats->seconds += more.seconds;
    stats->cpu_seconds += more.cpu_seconds;
  }
  for (size_t w = 0; !kept.empty(); ++w) {
    bool any = false;
    for (CollectSink& k : kept) {
      if (w >= k.windows.size()) continue;
      sink.Window(*k.windows[w].first, k.windows[w].second);
      any = true;
    }
    if (!any) break;
  }
  return st;
}

namespace {

Status RunOneTable(const Plan& plan, const std::string& path, const TraceQueryOptions& opt,
                   OutputSink& sink, TraceQueryStats* stats) {
  auto t0 = std::chrono::steady_clock::now();
  *stats = TraceQueryStats{};
  // What only a live probe can read: its stacks, the kernel's task, user memory.
  auto live_only = [](FieldSource s) {
    return IsStackSource(s) || s == FieldSource::kTaskBtf || s == FieldSource::kUserBtf ||
           s == FieldSource::kKernelPtrBtf;
  };
  auto refuse = [&](const Plan& p) -> Status {
    std::string live_call;
    VisitPlanExprs(p, [&](const Expr& e) {
      if (e.kind == ExprKind::kCall && (e.name == "join" || e.name == "ksym" || e.name == "usym"))
        live_call = e.name;
    });
    if (!live_call.empty())
      return Error(Code::kInvalidArgument,
                   fmt::format("{}() reads the live kernel or process: a recorded trace does not "
                               "hold what it needs",
                               live_call));
    if (const Field* f = FindPlanField(p, live_only))
      return Error(Code::kInvalidArgument,
                   fmt::format("{} is read by a live probe only: a recorded trace does not hold "
                               "it",
                               f->name));
    return Status::Ok();
  };
  FAY_RETURN_IF_ERROR(refuse(plan));
  for (const auto& sp : plan.states) FAY_RETURN_IF_ERROR(refuse(*sp));
  FAY_ASSIGN_OR_RETURN(trace::Reader reader, trace::Reader::Open(path));
  const RecordingInfo info = reader.info();
  TraceQueryOptions o = opt;
  if (o.trace_name.empty()) o.trace_name = path;
  if (o.relative_range) {
    // Offsets from this trace's own start.
    o.relative_range = false;
    o.from_ns = o.from_ns ? info.anchor_monotonic_ns + o.from_ns : 0;
    if (o.to_ns != std::numeric_limits<uint64_t>::max()) o.to_ns += info.anchor_monotonic_ns;
  }
  // `for D` keeps the first D of the recording.
  if (plan.for_ns) o.to_ns = std::min(o.to_ns, info.anchor_monotonic_ns + plan.for_ns);

  EventBuilder builder(plan);
  builder.SetOrigin(o.trace_name, info.host);
  unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  size_t event_chunks = 0;
  for (const trace::ChunkRef& c : reader.chunks())
    event_chunks += c.type == trace::ChunkType::kEvents;
  threads = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(1, event_chunks)));
  // Signals take their thread's comm from the calls before them: read in file order.
  // State pipelines' events build against their own plans; states need the calls in order.
  std::vector<std::unique_ptr<EventBuilder>> state_builders;
  bool state_paths = false, state_bytes = false, state_signals = false;
  for (const auto& sp : plan.states) {
    state_builders.push_back(std::make_unique<EventBuilder>(*sp));
    state_builders.back()->SetOrigin(o.trace_name, info.host);
    state_paths |= state_builders.back()->needs_paths();
    state_bytes |= state_builders.back()->needs_bytes();
    state_signals |= state_builders.back()->signal_probe() >= 0;
  }
  const bool needs_paths = builder.needs_paths() || state_paths;
  const bool ordered = plan.mode == PlanMode::kSelect || plan.every_ns || needs_paths ||
                       builder.signal_probe() >= 0 || !plan.states.empty();
  uint64_t last_ns = o.from_ns ? o.from_ns : info.anchor_monotonic_ns;
  for (const trace::ChunkRef& c : reader.chunks())
    if (c.indexed) last_ns = std::max(last_ns, c.last_ns);
  last_ns = std::min(last_ns, o.to_ns);

  if (!ordered && threads > 1) {
    stats->threads = threads;
    Status st = RunParallel(plan, path, o, threads, reader, last_ns, sink, stats);
    stats->seconds = Since(t0);
    if (st.ok()) return st;
    *stats = TraceQueryStats{};
    FAY_ASSIGN_OR_RETURN(reader, trace::Reader::Open(path));
  }

  Interpreter interp(plan);
  FdPaths paths;
  if (needs_paths) paths.SetCwd(info.root_pid, info.cwd);
  trace::ReadFilter filter;
  // The fd table must see the opens before the range too.
  if (!needs_paths) {
    filter.from_ns = o.from_ns;
    filter.to_ns = o.to_ns;
  }
  uint64_t window_end =
      plan.every_ns ? (o.from_ns ? o.from_ns : info.anchor_monotonic_ns) + plan.every_ns : 0;
  auto close_windows_before = [&](uint64_t t) {
    while (window_end && t >= window_end) {
      sink.Window(plan, interp.TakeWindow(Realtime(info, window_end)));
      window_end += plan.every_ns;
    }
  };
  auto run = [&](const Event& e, uint64_t t, uint64_t last) {
    if (plan.mode == PlanMode::kSelect) {
      if (auto row = interp.Select(e)) sink.SelectRow(plan, *row, Realtime(info, t));
    } else {
      interp.Process(e);
      last_ns = std::max(last_ns, last);
    }
  };
  // A signal record has no uid or comm of its own: its thread's, from the calls before it.
  struct ThreadIds {
    uint32_t uid = 0;
    std::array<char, 16> comm{};
  };
  std::unordered_map<int32_t, ThreadIds> thread_ids;
  const bool signals = builder.signal_probe() >= 0 || state_signals;
  // A state pipeline remembers at a call's entry, as its probe does; the query reads at the
  // entry, or at the exit when it needs one, so a call both remembers and reads in that order.
  // One that reads ret or errno remembers at the exit, after the query's read of that call.
  // `snapshot NAME`: the aggregation as it stands, each time NAME's trigger fires.
  auto snapshot = [&](size_t state, uint64_t t) {
    if (static_cast<int>(state) != plan.snapshot_state) return;
    ResultSet rs = interp.PeekWindow(Realtime(info, t));
    rs.snapshot = true;
    sink.Window(plan, rs);
  };
  auto remember = [&](const SyscallEvent& ev, std::string_view p, bool at_exit) {
    for (size_t i = 0; i < state_builders.size(); ++i)
      if (plan.states[i]->remember_at_exit == at_exit && state_builders[i]->ProbeOf(ev.nr) >= 0 &&
          interp.Remember(i, state_builders[i]->Build(ev, p)))
        snapshot(i, at_exit ? ev.exit_ns : ev.entry_ns);
  };
  auto on_syscall = [&](const SyscallEvent& ev) {
    std::string_view p = needs_paths ? paths.Apply(ev) : std::string_view();
    if (signals) thread_ids[ev.tid] = {ev.uid, ev.comm};
    if (!InRange(ev, o.from_ns, o.to_ns)) return;
    ++stats->events_read;
    close_windows_before(ev.entry_ns);
    if (plan.needs_exit) remember(ev, p, false);
    if (builder.ProbeOf(ev.nr) >= 0)
      run(builder.Build(ev, p), ev.entry_ns, ev.exit_ns ? ev.exit_ns : ev.entry_ns);
    if (!plan.needs_exit) remember(ev, p, false);
    // A call that never returned (exit_group, one in flight at the end) has no return to run at.
    if (!(ev.flags & kEventNoExit)) remember(ev, p, true);
  };
  auto on_process = [&](const ProcessEvent& ev) {
    paths.OnProcess(ev);
    if (!signals) return;
    if (ev.kind == ProcessEventKind::kFork) {
      // A child has its parent's names until its own calls say otherwise.
      auto parent = thread_ids.find(ev.parent_pid);
      if (parent != thread_ids.end()) thread_ids.try_emplace(ev.tid, parent->second);
    }
    if (ev.kind != ProcessEventKind::kSignal) return;
    if (ev.time_ns < o.from_ns || ev.time_ns > o.to_ns) return;
    ++stats->events_read;
    close_windows_before(ev.time_ns);
    const ThreadIds& ids = thread_ids[ev.tid];
    const std::string_view comm(ids.comm.data(), strnlen(ids.comm.data(), 16));
    if (builder.signal_probe() >= 0)
      run(builder.BuildSignal(ev, ids.uid, comm), ev.time_ns, ev.time_ns);
    for (size_t i = 0; i < state_builders.size(); ++i)
      if (state_builders[i]->signal_probe() >= 0 &&
          interp.Remember(i, state_builders[i]->BuildSignal(ev, ids.uid, comm)))
        snapshot(i, ev.time_ns);
  };
  const double cpu0 = ThreadCpuSeconds();
  reader.SkipBlobs(!builder.needs_bytes() && !state_bytes);
  Status st = reader.ForEach(filter, on_syscall, on_process);
  stats->cpu_seconds = ThreadCpuSeconds() - cpu0;
  stats->chunks_skipped = reader.stats().chunks_skipped;
  stats->seconds = Since(t0);
  if (plan.mode == PlanMode::kAggregate) {
    uint64_t end =
        window_end ? std::min(window_end, std::max(last_ns, window_end - plan.every_ns)) : last_ns;
    sink.Window(plan, interp.TakeWindow(Realtime(info, end)));
  }
  stats->run = interp.stats();
  // An expression that cannot be evaluated is a defect of the query's checks, never a silent
  // empty answer.
  if (st.ok() && !interp.first_error().ok()) return interp.first_error();
  return st;
}

// Folds `from` into `into`, key by key, with the exact merge of each aggregate. A key past
// max_keys is counted in *map_full and left out, as a full map refuses it live.
void MergeResults(ResultSet& into, const ResultSet& from, size_t max_keys, uint64_t* map_full) {
  // Keyed as the interpreter keys its groups.
  std::map<std::vector<Value>, size_t> at;
  for (size_t i = 0; i < into.rows.size(); ++i) at.emplace(into.rows[i].keys, i);
  for (const Row& row : from.rows) {
    auto it = at.find(row.keys);
    if (it == at.end()) {
      if (into.rows.size() >= max_keys) {
        ++*map_full;
        continue;
      }
      at.emplace(row.keys, into.rows.size());
      into.rows.push_back(row);
      continue;
    }
    Row& mine = into.rows[it->second];
    for (size_t a = 0; a < mine.aggs.size() && a < row.aggs.size(); ++a)
      mine.aggs[a].Merge(row.aggs[a]);
  }
  into.window_end_ns = std::max(into.window_end_ns, from.window_end_ns);
}

void AddStats(TraceQueryStats* to, const TraceQueryStats& s) {
  to->run += s.run;
  to->events_read += s.events_read;
  to->chunks_skipped += s.chunks_skipped;
  to->cpu_seconds += s.cpu_seconds;
}

}  // namespace

Status RunTracesQuery(const Plan& plan, const std::vector<std::string>& paths,
                      const TraceQueryOptions& opt, OutputSink& sink, TraceQueryStats* stats) {
  auto t0 = std::chrono::steady_clock::now();
  *stats = TraceQueryStats{};
  if (paths.size() == 1 && !opt.relative_range)
    return RunTraceQuery(plan, paths[0], opt, sink, stats);
  if (plan.every_ns && paths.size() > 1)
    return Error(Code::kInvalidArgument,
                 "every over several traces: each has its own clock, so their windows do not "
                 "line up; query them one by one, or drop every and key by trace");
  if (plan.snapshot_state >= 0 && paths.size() > 1)
    return Error(Code::kInvalidArgument,
                 "snapshot over several traces: a trigger fires in one trace at a time, so there "
                 "is no moment that holds them all; query them one by one");
  Status first_error;
  // Rows stream to the sink trace after trace, in the order given.
  if (plan.mode == PlanMode::kSelect) {
    for (const std::string& p : paths) {
      TraceQueryStats one;
      TraceQueryOptions o = opt;
      o.trace_name = p;
      Status st = RunTraceQuery(plan, p, o, sink, &one);
      AddStats(stats, one);
      if (!st.ok() && first_error.ok()) first_error = st;
    }
    stats->seconds = Since(t0);
    return first_error;
  }
  // Aggregates: every trace into a sink of its own, in parallel, then merged in path order so
  // that the answer does not depend on which trace finished first.
  const unsigned cpus =
      opt.threads ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  const unsigned workers = static_cast<unsigned>(std::min<size_t>(cpus, paths.size()));
  TraceQueryOptions per = opt;
  per.threads = std::max(1u, cpus / workers);
  struct One {
    CollectSink sink;
    TraceQueryStats stats;
    Status status;
  };
  std::vector<One> results(paths.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
      TraceQueryOptions o = per;
      o.trace_name = paths[i];
      results[i].status = RunTraceQuery(plan, paths[i], o, results[i].sink, &results[i].stats);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < workers; ++k) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  std::vector<std::pair<const Plan*, ResultSet>> merged;
  for (size_t i = 0; i < results.size(); ++i) {
    One& r = results[i];
    AddStats(stats, r.stats);
    // Name the trace, unless the reader's message does already.
    if (!r.status.ok() && first_error.ok())
      first_error = r.status.message().rfind(paths[i], 0) == 0
                        ? r.status
                        : Status(r.status.code(), paths[i] + ": " + r.status.message());
    // A trace that failed before its first table has nothing to add; one cut short by damage
    // adds what it read before it, as a single trace does.
    for (size_t w = 0; w < r.sink.windows.size(); ++w) {
      if (w >= merged.size())
        merged.push_back(std::move(r.sink.windows[w]));
      else
        MergeResults(merged[w].second, r.sink.windows[w].second, plan.max_keys,
                     &stats->run.map_full);
    }
  }
  for (auto& [p, rs] : merged) {
    std::sort(rs.rows.begin(), rs.rows.end(),
              [](const Row& a, const Row& b) { return a.keys < b.keys; });
    sink.Window(*p, rs);
  }
  stats->threads = workers;
  stats->seconds = Since(t0);
  return first_error;
}

}  // namespace fay
