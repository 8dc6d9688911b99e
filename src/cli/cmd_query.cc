// fay query: compile a query, load it into the kernel, run until the command ends, the duration
// passes or a signal arrives, then print the results and detach.
#include <fcntl.h>
#include <algorithm>
#include <functional>
#include <map>

#include <fmt/core.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include "bpf/runtime.h"
#include "cli/commands.h"
#include "cluster/coordinator.h"
#include "common/child_process.h"
#include "common/privileges.h"
#include "common/unique_fd.h"
#include "engine/offline/table_catalog.h"
#include "engine/offline/trace_catalog.h"
#include "engine/offline/trace_query.h"
#include "engine/output/sink.h"
#include "inproc/host.h"
#include "probes/catalog.h"
#include "probes/elf_symbols.h"
#include "probes/tracefs.h"
#include "query/compile.h"
#include "record/task_info.h"
#include "sinks/clickhouse.h"
#include "trace/reader.h"

namespace fay::cli {
namespace {

struct QueryOptions {
  std::string query;
  std::string format = "text";
  std::string command;
  bool command_given = false;  // -c was on the command line, even as ''
  int pid = 0;
  uint32_t max_keys = 10240;
  bool verbose = false;
  // Offline: a recorded trace instead of the live kernel.
  std::vector<std::string> input;  // -i: traces or glob patterns, one or more
  std::string from, to;            // offsets from the start of the recording: "1.5s", "200ms"
  unsigned threads = 0;
  // Across hosts (src/cluster): the agents, the tree's fanout, each window's grace.
  std::string hosts, hosts_file;
  uint32_t fanout = 32;
  std::string deadline = "1s";
  uint64_t max_merge_mib = 512;
  cluster::TlsFiles tls;
  std::string uprobes = "auto";  // where uprobe probes run (src/inproc/host.h)
  // Every window also into ClickHouse (src/sinks/clickhouse.h), creating its tables if asked.
  std::string sink;
  bool sink_create = false;
};

// The ClickHouse sinks of --sink, one per table of the query (ClickHouseTableUrl), started
// (schema created, server checked) before any probe.
using ClickHouseSinks = std::vector<std::unique_ptr<sinks::ClickHouseSink>>;
Expected<ClickHouseSinks> StartSinks(const QueryOptions& opt, const Plan& plan,
                                     const std::function<bool()>& interrupted = nullptr) {
  ClickHouseSinks out;
  if (opt.sink.empty()) {
    if (opt.sink_create)
      return Error(Code::kInvalidArgument,
                   "--sink-create needs --sink clickhouse://HOST:PORT/DB.TABLE");
    return out;
  }
  // The sink's table holds windows that add up; snapshots are running totals that overlap.
  if (plan.snapshot_state >= 0)
    return Error(Code::kInvalidArgument,
                 "--sink stores windows that add up, and snapshots are running totals: use "
                 "every with --sink, or snapshot without it");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::vector<const Plan*> tables = AllTables(plan);
  for (size_t t = 0; t < tables.size(); ++t) {
    // A server slow to answer takes seconds a table: a Ctrl-C meanwhile ends it here.
    if (interrupted && interrupted())
      return Error(Code::kInvalidArgument, "stopped while --sink started");
    FAY_ASSIGN_OR_RETURN(
        auto ch, sinks::ClickHouseSink::Start(sinks::ClickHouseTableUrl(opt.sink, t), *tables[t],
                                              host, opt.sink_create));
    out.push_back(std::move(ch));
  }
  return out;
}

std::vector<sinks::ClickHouseSink*> Pointers(const ClickHouseSinks& chs) {
  std::vector<sinks::ClickHouseSink*> out;
  for (const auto& ch : chs) out.push_back(ch.get());
  return out;
}

// Each sink's summary line; with several tables, each says which table it wrote.
void FinishSinks(const ClickHouseSinks& chs) {
  for (const auto& ch : chs) {
    const std::string line = ch->Finish(5);
    if (chs.size() == 1)
      fmt::print(stderr, "fay: {}\n", line);
    else
      fmt::print(stderr, "fay: {} {}\n", ch->name(), line);
  }
}

uint64_t NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

int Fail(const Status& st) {
  // Query diagnostics carry their own "query:L:C:" location; everything else gets "fay:".
  bool located = st.message().rfind("query:", 0) == 0;
  fmt::print(stderr, "{}{}\n", located ? "" : "fay: ", st.message());
  return 1;
}

// The signals that end a query, printing what it gathered.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};

bool IsStopSignal(int sig) {
  for (int s : kStopSignals)
    if (s == sig) return true;
  return false;
}

// The exact fix for the privilege errors users hit first.
Status WithPrivilegeHint(Status st) {
  if (st.code() == Code::kPermission && st.message().find("fix:") == std::string::npos)
    st.Append(PrivilegeFix());
  return st;
}

// "1.5s", "200ms", "10us", "42ns", "2m": a duration with a unit, as in the query language.
Expected<uint64_t> ParseOffset(const std::string& flag, const std::string& text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
  size_t n = 0;
  while (n < text.size() && (isdigit(static_cast<unsigned char>(text[n])) || text[n] == '.')) ++n;
  std::string_view unit = std::string_view(text).substr(n);
  for (const auto& [name, scale] : kUnits) {
    if (n == 0 || unit != name) continue;
    try {
      return static_cast<uint64_t>(std::stod(text.substr(0, n)) * scale + 0.5);
    } catch (...) {
      break;
    }
  }
  return Error(Code::kInvalidArgument,
               fmt::format("{} '{}': expected a duration from the start of the recording, with a "
                           "unit (ns, us, ms, s, m, h), e.g. {} 1.5s",
                           flag, text, flag));
}

// -i's traces in the order given, each glob expanded in name order. A pattern that matches
// nothing, or the same trace twice, is an error: counts would silently miss or double it.
Expected<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& in : inputs) {
    struct stat st {};
    // A name that exists is that file, brackets and all.
    if (in.find_first_of("*?[") == std::string::npos || ::stat(in.c_str(), &st) == 0) {
      out.push_back(in);
      continue;
    }
    glob_t g{};
    int rc = ::glob(in.c_str(), GLOB_ERR, nullptr, &g);
    if (rc != 0) globfree(&g);
    if (rc == GLOB_NOMATCH)
      return Error(Code::kNotFound, fmt::format("-i '{}': no trace matches it", in));
    if (rc != 0) return Error(Code::kIo, fmt::format("-i '{}': cannot list its directory", in));
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    globfree(&g);
  }
  // The same file under two names (./a.fay and a.fay, a symlink) counts twice just the same.
  std::map<std::pair<dev_t, ino_t>, std::string> seen;
  for (const std::string& p : out) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;  // the reader reports it
    auto [it, fresh] = seen.emplace(std::make_pair(st.st_dev, st.st_ino), p);
    if (!fresh)
      return Error(Code::kInvalidArgument,
                   it->second == p
                       ? fmt::format("-i: {} is given twice: its events would count twice", p)
                       : fmt::format("-i: {} and {} are the same file: its events would count "
                                     "twice",
                                     it->second, p));
  }
  return out;
}

int RunTraceQuery(const QueryOptions& opt) {
  if (opt.format != "text" && opt.format != "json")
    return Fail(Error(Code::kInvalidArgument, "--format must be text or json"));
  if (!opt.command.empty() || opt.pid)
    return Fail(Error(Code::kInvalidArgument,
                      "-c and -p select live processes; they cannot be combined with -i"));
  auto paths = ExpandInputs(opt.input);
  if (!paths.ok()) return Fail(paths.status());
  // The traces are opened first: a bad file is reported before any query error. Each is closed
  // again (a thousand traces would not fit the descriptors), keeping what the end must say.
  std::vector<std::string> cut_short;
  uint64_t start = 0;
  for (const std::string& p : *paths) {
    auto reader = trace::Reader::Open(p);
    if (!reader.ok()) return Fail(reader.status());
    if (reader->truncated()) cut_short.push_back(reader->TruncationNotice());
    start = reader->info().anchor_monotonic_ns;
  }
  const bool many = paths->size() > 1;
  // With several traces, --from and --to count from each one's own start.
  if (many) start = 0;
  TraceQueryOptions topt;
  topt.threads = opt.threads;
  topt.relative_range = many;
  if (!opt.from.empty()) {
    auto v = ParseOffset("--from", opt.from);
    if (!v.ok()) return Fail(v.status());
    topt.from_ns = start + *v;
  }
  if (!opt.to.empty()) {
    auto v = ParseOffset("--to", opt.to);
    if (!v.ok()) return Fail(v.status());
    topt.to_ns = start + *v;
  }
  if (topt.from_ns > topt.to_ns) return Fail(Error(Code::kInvalidArgument, "--from is after --to"));

  SystemCatalog live;
  TraceCatalog catalog(live);
  PlanOptions popt;
  popt.max_keys = opt.max_keys;
  auto plan = CompileQuery(opt.query, catalog, popt);
  if (!catalog.fallback_reason().empty())
    fmt::print(stderr,
               "fay: note: syscall probes described by fay's syscall table, not tracefs ({}); "
               "arguments carry the table's names\n",
               catalog.fallback_reason());
  if (!plan.ok()) return Fail(plan.status());
  auto ch = StartSinks(opt, *plan);
  if (!ch.ok()) return Fail(ch.status());

  std::unique_ptr<OutputSink> sink = sinks::WithClickHouse(
      opt.format == "json" ? MakeJsonSink(stdout) : MakeTextSink(stdout), Pointers(*ch));
  TraceQueryStats stats;
  Status st = fay::RunTracesQuery(*plan, *paths, topt, *sink, &stats);
  sink->Flush();
  fflush(stdout);
  PrintSummary(stderr, stats.run, stats.seconds);
  FinishSinks(*ch);
  if (opt.verbose) {
    fmt::print(stderr,
               "fay: read {} events in {:.3f} s with {} thread{}: {:.2f} M events/s; "
               "{:.2f} M events per CPU-second; {} chunks skipped by the index\n",
               stats.events_read, stats.seconds, stats.threads, stats.threads == 1 ? "" : "s",
               stats.seconds > 0 ? stats.events_read / stats.seconds / 1e6 : 0.0,
               stats.cpu_seconds > 0 ? stats.events_read / stats.cpu_seconds / 1e6 : 0.0,
               stats.chunks_skipped);
  }
  if (!st.ok()) return Fail(st);
  // Counts over part of a recording look like counts over all of it: say so, as every command
  // reading a trace does, and exit as they do.
  for (const std::string& notice : cut_short) fmt::print(stderr, "fay query: {}\n", notice);
  return cut_short.empty() ? 0 : trace::kIncompleteExit;
}

int RunHostsQuery(const QueryOptions& opt) {
  cluster::ClusterQueryOptions o;
  o.query = opt.query;
  o.format = opt.format;
  o.fanout = opt.fanout;
  o.max_keys = opt.max_keys;
  o.max_merge_bytes = opt.max_merge_mib << 20;
  o.tls = opt.tls;
  if (opt.max_merge_mib < 1 || opt.max_merge_mib > (1u << 20))
    return Fail(Error(Code::kInvalidArgument,
                      fmt::format("--max-merge-memory must be 1 to {} MiB", 1u << 20)));
  if (!opt.command.empty() || opt.pid || !opt.input.empty())
    return Fail(Error(Code::kInvalidArgument, "--hosts cannot be combined with -c, -p or -i"));
  // Each agent writes its own host's states (fay agent --standing ... --sink): the merged
  // answer at the root is not a host's.
  if (!opt.sink.empty())
    return Fail(Error(Code::kInvalidArgument,
                      "--sink writes one host's states: give it to each agent's standing queries "
                      "(fay agent --sink), not to a --hosts query"));
  auto d = ParseOffset("--deadline", opt.deadline);
  if (!d.ok()) return Fail(d.status());
  o.deadline_ns = *d;
  o.hosts = cluster::SplitHosts(opt.hosts);
  if (!opt.hosts_file.empty()) {
    auto more = cluster::ReadHostsFile(opt.hosts_file);
    if (!more.ok()) return Fail(more.status());
    o.hosts.insert(o.hosts.end(), more->begin(), more->end());
  }
  if (o.fanout < 2) return Fail(Error(Code::kInvalidArgument, "--fanout must be at least 2"));
  return cluster::RunClusterQuery(o);
}

int RunQuery(const QueryOptions& opt) {
  if (!opt.hosts.empty() || !opt.hosts_file.empty()) return RunHostsQuery(opt);
  if (!opt.input.empty()) return RunTraceQuery(opt);
  uint64_t t0 = NowNs(CLOCK_MONOTONIC);
  if (opt.format != "text" && opt.format != "json")
    return Fail(Error(Code::kInvalidArgument, "--format must be text or json"));
  if (!opt.command.empty() && opt.pid)
    return Fail(Error(Code::kInvalidArgument, "-c and -p cannot be combined"));
  // An empty -c is a mistake (an unset shell variable), not a request to trace the machine.
  if (opt.command_given && opt.command.find_first_not_of(" \t\n") == std::string::npos)
    return Fail(Error(Code::kInvalidArgument, "-c needs a command, e.g. -c 'ls -l'"));
  if (opt.max_keys < 1 || opt.max_keys > (1u << 22))
    return Fail(Error(Code::kInvalidArgument,
                      fmt::format("--max-keys must be 1 to {}, not {}", 1u << 22, opt.max_keys)));
  // -p: the process itself, held from here, whatever takes its pid once it is gone. Its end
  // ends the query, even when it comes while the probes are compiled and attached: before, a
  // process gone by then was waited for until Ctrl-C.
  UniqueFd target;
  if (opt.pid) {
    target.reset(static_cast<int>(syscall(SYS_pidfd_open, opt.pid, 0)));
    if (!target && errno == ESRCH)
      return Fail(Error(Code::kNotFound, fmt::format("-p {}: no such process", opt.pid)));
    if (record::HasExited(opt.pid))
      return Fail(Error(Code::kNotFound,
                        fmt::format("-p {}: the process has already exited (a zombie its parent "
                                    "has not reaped): there is nothing left to trace",
                                    opt.pid)));
  }
  auto uprobe_mode = inproc::ParseUprobeMode(opt.uprobes);
  if (!uprobe_mode.ok()) return Fail(uprobe_mode.status());
  if (Status st = EnsureTracefs(); !st.ok()) return Fail(st);

  SystemCatalog system;
  // Without read access to tracefs (a user given capabilities: tracefs is root's alone), syscall
  // probes are described by fay's table and run on raw tracepoints all the same.
  SyscallFallbackCatalog catalog(system);
  PlanOptions popt;
  popt.max_keys = opt.max_keys;
  popt.uprobe_multi = bpf::UprobeMultiSupported();
  auto plan = CompileQuery(opt.query, catalog, popt);
  if (!catalog.fallback_reason().empty())
    fmt::print(stderr,
               "fay: note: syscall probes described by fay's syscall table, not tracefs ({}); "
               "arguments carry the table's names\n",
               catalog.fallback_reason());
  if (!plan.ok()) return Fail(plan.status());
  // Signals arrive through a signalfd so the loop below can wait on everything at once. Blocked
  // before any thread starts (the sinks', the start program's closer), which inherit the mask:
  // a thread that did not block them took SIGCHLD (the command's end unseen, fay waiting on)
  // or died of SIGINT with fay.
  sigset_t mask;
  sigemptyset(&mask);
  // SIGHUP (a closed terminal or session) and SIGUSR1 end the query as SIGINT does: with the
  // results gathered so far, never silently.
  for (int sig : kStopSignals) sigaddset(&mask, sig);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  auto ch = StartSinks(opt, *plan, [] {
    sigset_t pending;
    if (sigpending(&pending) != 0) return false;
    for (int sig : kStopSignals)
      if (sigismember(&pending, sig)) return true;
    return false;
  });
  if (!ch.ok()) return Fail(ch.status());

  bool scoped = !opt.command.empty() || opt.pid;
  bpf::CodegenOptions copt;
  copt.scoped = scoped;
  copt.held_command = !opt.command.empty();
  copt.self_tgid = static_cast<uint32_t>(getpid());
  auto live = bpf::LiveQuery::Load(*plan, copt);
  if (!live.ok()) return Fail(WithPrivilegeHint(live.status()));

  // Uprobes of a -c command run inside it where they can (docs/INPROCESS.md).
  std::optional<std::vector<std::string>> command_argv;
  if (!opt.command.empty()) {
    auto argv = SplitCommand(opt.command);
    if (!argv.ok()) return Fail(argv.status());
    command_argv = std::move(argv).value();
  }
  inproc::HostOptions hopt;
  hopt.mode = *uprobe_mode;
  hopt.pid = opt.pid;
  if (command_argv) {
    auto exe = ResolveBinaryPath((*command_argv)[0]);
    hopt.command_exe = exe.ok() ? *exe : (*command_argv)[0];
  }
  std::vector<std::string> inproc_notes;
  auto host = inproc::InprocHost::Create(*plan, hopt, &inproc_notes);
  if (!host.ok()) return Fail(host.status());
  for (const std::string& n : inproc_notes) fmt::print(stderr, "fay: {}\n", n);
  uint64_t t_loaded = NowNs(CLOCK_MONOTONIC);

  // After the stop signals are blocked: fay killed in the middle would leave a thread of the
  // process running fay's call.
  // -p: the runtime goes in now, while fay holds every thread (src/inproc/inject.h); a process
  // it cannot go into is traced through the kernel (auto) or refused (inprocess).
  if (*host && opt.pid) {
    auto in =
        inproc::InjectRuntime(opt.pid, (*host)->library(), (*host)->Spec(), (*host)->Functions());
    if (!in.ok()) {
      if (*uprobe_mode == inproc::UprobeMode::kInProcess)
        return Fail(Error(in.status().code(), "--uprobes inprocess: " + in.status().message()));
      fmt::print(stderr, "fay: uprobes on the kernel's path: {}\n", in.status().message());
      host->reset();
    } else if (opt.verbose) {
      fmt::print(stderr, "fay: in-process runtime loaded into {} in {:.1f} ms\n", opt.pid,
                 in->elapsed_ns / 1e6);
    }
  }
  if (*host) (*live)->SetStateSource(host->get(), (*host)->in_process());

  std::optional<HeldChild> child;
  if (command_argv) {
    const auto* argv = &*command_argv;
    // If fay is killed, the command gets the SIGTERM a normal stop sends it, rather than
    // running on untraced.
    HeldChild::SpawnOptions so;
    so.die_with_parent = true;
    so.death_signal = SIGTERM;
    if (*host) {
      so.env = (*host)->Environment();
      so.inherit_fd = (*host)->fd();
    }
    auto c = HeldChild::Spawn(*argv, so);
    if (!c.ok()) return Fail(c.status());
    // Stack frames of a command that exits before its maps are read can still be named from
    // its executable when that is not position-independent.
    if (auto exe = ResolveBinaryPath((*argv)[0]); exe.ok())
      (*live)->symbolizer().SetFallbackBinary(*exe);
    child = std::move(c).value();
    if (Status st = (*live)->AddScopePid(child->pid(), /*pending_exec=*/true); !st.ok())
      return Fail(st);
  }
  const int pidfd = target.get();
  if (opt.pid) {
    if (Status st = (*live)->AddScopePid(opt.pid); !st.ok()) return Fail(st);
  }
  if (plan->probes.size() >= 64)
    fmt::print(stderr, "fay: attaching {} probes with {} programs (Ctrl-C stops)\n",
               plan->probes.size(), (*live)->generated().programs.size());
  // Ctrl-C or SIGTERM during a long attach (a libc-wide uprobe glob) stops it at once.
  auto interrupted = [&] {
    signalfd_siginfo si;
    bool stop_now = false;
    while (read(sfd, &si, sizeof(si)) == sizeof(si))
      if (IsStopSignal(static_cast<int>(si.ssi_signo))) stop_now = true;
    return stop_now;
  };
  if (Status st = (*live)->Attach(interrupted); !st.ok()) return Fail(WithPrivilegeHint(st));
  for (const std::string& w : (*live)->warnings()) fmt::print(stderr, "fay: warning: {}\n", w);
  uint64_t t_attached = NowNs(CLOCK_MONOTONIC);
  if (opt.verbose)
    fmt::print(stderr, "fay: compiled and loaded {} programs in {:.1f} ms, attached in {:.1f} ms\n",
               (*live)->generated().programs.size(), (t_loaded - t0) / 1e6,
               (t_attached - t_loaded) / 1e6);
  if (opt.verbose) {
    // The absolute stamp lets a harness that noted CLOCK_MONOTONIC before exec'ing fay measure
    // exec-to-attached exactly, without fay's teardown in the figure.
    fmt::print(stderr, "fay: probes attached at CLOCK_MONOTONIC {} ns\n", t_attached);
  }
  // The query's start, for `every`'s windows and `for`: when the command is let go, not after
  // the start program's detach, which waits out an RCU grace period (up to 200 ms here).
  const uint64_t start = NowNs(CLOCK_MONOTONIC);
  if (child) {
    if (*host) (*host)->Heartbeat();  // attaching may have taken longer than its timeout
    if (Status st = child->Release(); !st.ok()) return Fail(st);
    (*live)->CommandStarted();
  }

  std::unique_ptr<OutputSink> sink = sinks::WithClickHouse(
      opt.format == "json" ? MakeJsonSink(stdout) : MakeTextSink(stdout), Pointers(*ch));
  const Plan& p = *plan;
  // The probe's time on the wall clock: CLOCK_REALTIME's offset from CLOCK_MONOTONIC as the
  // row is read (the wall clock may be stepped while the query runs).
  bpf::LiveQuery::RowCallback on_row = [&](std::vector<Value> row, int, uint64_t time_ns) {
    const int64_t offset =
        static_cast<int64_t>(NowNs(CLOCK_REALTIME)) - static_cast<int64_t>(NowNs(CLOCK_MONOTONIC));
    sink->SelectRow(p, row, static_cast<uint64_t>(static_cast<int64_t>(time_ns) + offset));
  };
  // The window of every table, the query's own first.
  auto print_window = [&]() -> Status {
    FAY_ASSIGN_OR_RETURN(std::vector<ResultSet> tables,
                         (*live)->ReadWindows(NowNs(CLOCK_REALTIME)));
    for (size_t t = 0; t < tables.size(); ++t)
      sink->Window(t == 0 ? p : *p.tables[t - 1], tables[t]);
    return Status::Ok();
  };

  // `snapshot NAME`: the aggregation as it stands whenever NAME's trigger fired since the last
  // look (every 10 ms), stamped with the firing's time.
  uint64_t last_fired = 0;
  auto print_snapshot = [&]() -> Status {
    FAY_ASSIGN_OR_RETURN(uint64_t fired, (*live)->TriggerTime(p.snapshot_state));
    if (fired == 0 || fired == last_fired) return Status::Ok();
    last_fired = fired;
    const uint64_t mono = NowNs(CLOCK_MONOTONIC), real = NowNs(CLOCK_REALTIME);
    FAY_ASSIGN_OR_RETURN(ResultSet rs,
                         (*live)->ReadWindow(real - (mono > fired ? mono - fired : 0)));
    rs.snapshot = true;
    sink->Window(p, rs);
    sink->Flush();
    return Status::Ok();
  };

  uint64_t deadline = p.for_ns ? start + p.for_ns : 0;
  uint64_t next_window = p.every_ns ? start + p.every_ns : 0;
  // `for` ended right on a window's end, which was printed then: no partial window follows.
  bool ended_on_window = false;
  int exit_code = 0;
  bool stop = false;
  bool child_done = false;
  int ring_fd = -1;
  if (p.mode == PlanMode::kSelect) {
    // The ring reader is created lazily; a zero-timeout poll creates it.
    auto n = (*live)->PollEvents(0, on_row);
    if (!n.ok()) return Fail(n.status());
  }
  while (!stop) {
    uint64_t now = NowNs(CLOCK_MONOTONIC);
    uint64_t wake = 0;
    if (deadline) wake = deadline;
    if (next_window && (!wake || next_window < wake)) wake = next_window;
    int timeout = -1;
    if (wake) timeout = wake > now ? static_cast<int>((wake - now + 999999) / 1000000) : 0;
    if (p.mode == PlanMode::kSelect && (timeout < 0 || timeout > 100)) timeout = 100;
    // Stacks are named from /proc/PID/maps, which vanish with the process: look often.
    if ((HasStackKeys(p) || HasUserAddresses(p)) && (timeout < 0 || timeout > 200)) timeout = 200;
    if (p.snapshot_state >= 0 && (timeout < 0 || timeout > 10)) timeout = 10;
    // The command's in-process probes stop within a second of fay's last heartbeat.
    if (*host) {
      (*host)->Heartbeat();
      if (timeout < 0 || timeout > 100) timeout = 100;
    }
    pollfd fds[2] = {{sfd, POLLIN, 0}, {pidfd, POLLIN, 0}};
    poll(fds, pidfd >= 0 ? 2 : 1, timeout);
    signalfd_siginfo si;
    while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
      if (IsStopSignal(static_cast<int>(si.ssi_signo))) stop = true;
    }
    int status;
    if (child && child->TryWait(&status)) {
      child_done = true;
      stop = true;
    }
    if (pidfd >= 0 && (fds[1].revents & POLLIN)) stop = true;
    if (p.mode == PlanMode::kSelect) {
      auto n = (*live)->PollEvents(0, on_row);
      if (!n.ok()) return Fail(n.status());
      sink->Flush();
    }
    if (p.snapshot_state >= 0)
      if (Status st = print_snapshot(); !st.ok()) return Fail(st);
    now = NowNs(CLOCK_MONOTONIC);
    bool printed = false;
    if (next_window && now >= next_window && (!stop || (deadline && now >= deadline))) {
      if (Status st = print_window(); !st.ok()) return Fail(st);
      sink->Flush();
      next_window += p.every_ns;
      printed = true;
    }
    if (deadline && now >= deadline) {
      stop = true;
      ended_on_window = printed;
    }
    (*live)->RememberStackProcesses();
  }
  (void)ring_fd;
  (*live)->RememberStackProcesses();
  // A firing in the last moments, before the loop looked again.
  if (p.snapshot_state >= 0)
    if (Status st = print_snapshot(); !st.ok()) return Fail(st);

  (*live)->Detach();
  if (*host) {
    (*host)->Stop();
    // -p: the process goes on; its functions get their bytes back.
    if (opt.pid && kill(opt.pid, 0) == 0) {
      auto out = inproc::EjectRuntime(opt.pid, (*host)->library());
      if (!out.ok())
        fmt::print(stderr, "fay: warning: could not restore the patched functions of {}: {}\n",
                   opt.pid, out.status().message());
    }
  }
  if (p.mode == PlanMode::kSelect) {
    auto n = (*live)->PollEvents(-1, on_row);
    if (!n.ok()) return Fail(n.status());
  } else if (!ended_on_window) {
    // The last, partial window, with every event since the window before it: when the command
    // ends or fay is stopped, however soon after a window's end (a rule of "not within a tenth
    // of a window" lost the events of those last milliseconds); only `for` ending right on a
    // window's end has none.
    if (Status st = print_window(); !st.ok()) return Fail(st);
  }
  sink->Flush();
  fflush(stdout);
  RunStats stats = (*live)->Stats();
  PrintSummary(stderr, stats, (NowNs(CLOCK_MONOTONIC) - start) / 1e9);
  FinishSinks(*ch);
  if (*host)
    for (const std::string& line : (*host)->Report(opt.verbose))
      fmt::print(stderr, "fay: {}\n", line);
  if (child && !child_done) {
    kill(child->pid(), SIGTERM);
    int status;
    while (!child->TryWait(&status)) usleep(1000);
  }
  return exit_code;
}

}  // namespace

Runner RegisterQuery(CLI::App& app) {
  auto opt = std::make_shared<QueryOptions>();
  auto* cmd =
      app.add_subcommand("query", "Run a query, live or over a recorded trace (see docs/QUERY.md)");
  cmd->add_option("query", opt->query, "the query, e.g. 'syscall:openat | count() by comm'")
      ->required();
  cmd->add_option("--format", opt->format, "text (default) or json (JSON Lines)");
  cmd->add_option("-c,--command", opt->command,
                  "run CMD and trace only it and its descendants; stop when it exits");
  cmd->add_option("-p,--pid", opt->pid, "trace only PID and its descendants");
  cmd->add_option("--max-keys", opt->max_keys, "aggregation map capacity (default 10240)");
  cmd->add_option("--uprobes", opt->uprobes,
                  "where uprobes of a -c command or -p process run: auto (default: in the "
                  "process where they can, docs/INPROCESS.md), inprocess or kernel");
  cmd->add_flag("-v,--verbose", opt->verbose,
                "report compile, load and attach times (with -i: events read per second)");
  cmd->add_option("-i,--input", opt->input,
                  "query recorded traces (fay record) instead; repeat it or give a glob "
                  "('runs/*.fay') to query many as one, with `trace` and `host` as fields")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--from", opt->from, "with -i: start at this offset into the recording (1.5s)");
  cmd->add_option("--to", opt->to, "with -i: stop at this offset into the recording");
  cmd->add_option("--threads", opt->threads, "with -i: reader threads (default: one per CPU)");
  cmd->add_option("--hosts", opt->hosts, "run on these agents (fay agent): H1:P,H2:P,...");
  cmd->add_option("--hosts-file", opt->hosts_file,
                  "run on the agents listed, one ADDR:PORT a line");
  cmd->add_option("--fanout", opt->fanout, "with --hosts: children per node of the tree (32)");
  cmd->add_option("--deadline", opt->deadline,
                  "with --hosts: how long past its end a window waits for late hosts (1s)");
  cmd->add_option("--max-merge-memory", opt->max_merge_mib,
                  "with --hosts: MiB of merged windows each node keeps, past which a window is "
                  "truncated (512)");
  cmd->add_option("--tls-cert", opt->tls.cert, "with --hosts: this client's certificate (PEM)");
  cmd->add_option("--tls-key", opt->tls.key, "with --hosts: its private key (PEM)");
  cmd->add_option("--tls-ca", opt->tls.ca, "with --hosts: the CA that signed the agents' (PEM)");
  cmd->add_flag("--insecure", opt->tls.insecure, "with --hosts: plaintext, no authentication");
  cmd->add_option("--sink", opt->sink,
                  "also write each window to clickhouse://HOST[:PORT]/DB.TABLE (docs/SINKS.md)");
  cmd->add_flag("--sink-create", opt->sink_create, "with --sink: create its tables and views");
  return [opt, cmd] {
    opt->command_given = cmd->count("--command") > 0;
    return RunQuery(*opt);
  };
}

}  // namespace fay::cli
