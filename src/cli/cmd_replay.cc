// fay replay FILE --root DIR [--prepare] [--verify] [--timing asap|original|xN]
//                 [--threads auto|N] [--progress] [--max-mismatches N]
//                 [--lazy-data auto|on|off] [--stream auto|off]
#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "replay/prepare.h"
#include "replay/replayer.h"
#include "replay/sandbox.h"
#include "replay/schedule.h"
#include "schema/syscall_table.h"
#include "trace/reader.h"

namespace fay::cli {
namespace {

struct ReplayCli {
  std::string path;
  std::string root;
  bool prepare = false;
  bool verify = false;
  std::string timing = "asap";
  std::string threads = "auto";
  bool progress = false;
  bool no_progress = false;
  size_t max_mismatches = 50;
  std::string lazy_data = "auto";
  std::string stream = "auto";
};

std::string Label(int nr) {
  std::string_view name = SyscallName(nr);
  return name.empty() ? fmt::format("syscall_{}", nr) : std::string(name);
}

// "read 12, write 3": most frequent first.
std::string CountList(const std::map<int, uint64_t>& by_nr) {
  std::vector<std::pair<int, uint64_t>> v(by_nr.begin(), by_nr.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : Label(a.first) < Label(b.first);
  });
  std::string s;
  for (const auto& [nr, n] : v) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", Label(nr), n);
  return s;
}

int Run(const ReplayCli& c) {
  replay::ReplayOptions opt;
  opt.verify = c.verify;
  opt.max_listed = c.max_mismatches;
  if (c.timing == "asap") {
    opt.timing = replay::Timing::kAsap;
  } else if (c.timing == "original") {
    opt.timing = replay::Timing::kOriginal;
  } else if (c.timing.size() > 1 && c.timing[0] == 'x') {
    opt.timing = replay::Timing::kScaled;
    try {
      size_t used = 0;
      opt.speed = std::stod(c.timing.substr(1), &used);
      if (used != c.timing.size() - 1) opt.speed = 0;
    } catch (...) {
      opt.speed = 0;
    }
    if (!(opt.speed > 0)) {
      fmt::print(stderr, "fay replay: --timing {}: N in xN must be a number > 0 (x2, x0.5)\n",
                 c.timing);
      return 2;
    }
  } else {
    fmt::print(stderr, "fay replay: --timing {}: expected asap, original or xN (x2, x0.5)\n",
               c.timing);
    return 2;
  }
  if (c.threads != "auto") {
    try {
      size_t used = 0;
      long n = std::stol(c.threads, &used);
      if (used != c.threads.size() || n < 1 || n > 65536) throw 0;
      opt.threads = static_cast<unsigned>(n);
    } catch (...) {
      fmt::print(stderr, "fay replay: --threads {}: expected auto or a number from 1\n", c.threads);
      return 2;
    }
  }
  opt.progress = !c.no_progress && (c.progress || ::isatty(STDERR_FILENO));

  // A replayed write into a pipe whose reader has exited must fail with EPIPE, as it did for
  // the program (which the signal then killed), not kill the replayer.
  std::signal(SIGPIPE, SIG_IGN);
  auto sandbox = replay::Sandbox::Open(c.root);
  if (!sandbox.ok()) {
    fmt::print(stderr, "fay replay: {}\n", sandbox.status().message());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  // --prepare walks the calls while they load, where the trace allows it (see CallStream). A
  // one-thread trace also starts replaying then: the walk lets through the calls that need
  // nothing --prepare makes (see Preparer::StreamTo), and the rest once it is all made.
  replay::Preparer preparer;
  replay::CallGate gate;
  std::thread streamer;
  std::optional<Expected<replay::ReplayReport>> streamed;
  bool stream = c.stream == "auto";
  if (stream && c.prepare) preparer.StreamTo(*sandbox, &gate);
  std::function<void(replay::CallStream&)> walk;
  if (c.prepare || stream) {
    walk = [&](replay::CallStream& calls) {
      if (stream && calls.streaming() && !streamer.joinable()) {
        streamer = std::thread([&, trace = replay::StreamedTrace::Of(calls)] {
          streamed = replay::ReplayStreaming(trace, gate, *sandbox, opt);
        });
        // The replay is what is timed; the load and this walk keep ahead of it with less. On
        // two cores the three threads share them: the replay should not be the one waiting.
        ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
        ::setpriority(PRIO_PROCESS, static_cast<id_t>(::getpid()), 10);
      } else if (streamer.joinable() && !calls.streaming()) {
        // The index named one thread and the trace holds more, or out of order: what was
        // replayed ran from a schedule that is not the one now built.
        gate.Fail();
      }
      if (c.prepare) {
        preparer.Walk(calls);
      } else if (calls.streaming()) {
        uint64_t k = 0;
        while (calls.Next()) gate.Allow(++k, calls.calls());
      }
    };
  }
  // Every way out below stops the streaming replay first: it reads the schedule.
  auto stop = [&] {
    if (!streamer.joinable()) return;
    gate.Fail();
    streamer.join();
  };
  replay::LoadOptions load;
  if (c.lazy_data == "on") load.lazy_blob_bytes = 0;
  if (c.lazy_data == "off") load.lazy_blob_bytes = UINT64_MAX;
  load.walk_complete = c.prepare;
  load.stop_streaming = stop;
  auto schedule = replay::LoadSchedule(c.path, walk, load);
  if (!schedule.ok()) {
    stop();
    fmt::print(stderr, "fay replay: {}\n", schedule.status().message());
    return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  if (c.prepare) {
    auto st = preparer.Apply(*sandbox, *schedule);
    if (!st.ok()) {
      stop();
      fmt::print(stderr, "fay replay: {}\n", st.status().message());
      return 1;
    }
    fmt::print(
        "prepared:   {} directories, {} files ({} bytes of recorded content), {} symlinks"
        " in {}{}\n",
        st->dirs, st->files, st->bytes, st->symlinks, c.root,
        st->existing ? fmt::format(" ({} already there)", st->existing) : "");
  }
  auto t2 = std::chrono::steady_clock::now();
  Expected<replay::ReplayReport> report = Error(Code::kInternal, "no replay ran");
  if (streamer.joinable() || streamed) {
    if (streamer.joinable() && !gate.failed()) {
      // Streaming means one thread (the index said so, and the load held to it), or none.
      static const std::vector<replay::Call> kNone;
      const auto& calls = schedule->threads.empty() ? kNone : schedule->threads[0].calls;
      gate.End(calls.size(), calls.data());
    }
    if (streamer.joinable()) streamer.join();
    if (gate.failed() && streamed->ok()) {
      streamed = Error(Code::kInvalidArgument,
                       "the trace's index says it holds one thread's calls in order, and it does "
                       "not: replay it again with --stream off");
    }
    report = std::move(*streamed);
    if (report.ok()) {
      report->calls = schedule->calls;
      report->recorded_ns =
          schedule->last_ns > schedule->first_ns ? schedule->last_ns - schedule->first_ns : 0;
    }
  } else {
    report = replay::Replay(*schedule, *sandbox, opt);
  }
  if (!report.ok()) {
    fmt::print(stderr, "fay replay: {}\n", report.status().message());
    return 1;
  }
  const replay::ReplayReport& r = *report;
  for (const replay::Mismatch& m : r.listed) {
    fmt::print("mismatch: call {} tid {} {}{}: expected {}, got {}\n", m.index, m.tid, Label(m.nr),
               m.path.empty() ? "" : fmt::format(" \"{}\"", m.path), m.expected, m.actual);
  }
  if (r.mismatches > r.listed.size()) {
    fmt::print("mismatch: ... and {} more\n", r.mismatches - r.listed.size());
  }
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  fmt::print("calls:      {} from {} threads in {} processes ({} replay workers)\n", r.calls,
             r.recorded_threads, r.processes, r.workers);
  fmt::print("replayed:   {}\n", r.replayed);
  if (c.verify) {
    fmt::print("verified:   {} ({:.2f}%)\n", r.verified,
               r.replayed ? 100.0 * r.verified / r.replayed : 100.0);
    fmt::print("mismatches: {}{}\n", r.mismatches,
               r.mismatches ? " (" + CountList(r.mismatch_by_nr) + ")" : "");
  }
  if (streamed) {
    fmt::print("streamed:   {} of {} calls could run while the trace loaded{}\n", gate.early(),
               r.calls,
               gate.early() < r.calls && c.prepare
                   ? " (the rest touch what --prepare makes, and waited for it)"
                   : "");
  }
  fmt::print("emulated:   {}{}\n", r.emulated,
             r.emulated ? " (" + CountList(r.emulated_by_nr) + ")" : "");
  fmt::print(
      "wall:       {:.3f} s replay ({}) vs {:.3f} s recorded ({:.2f}x); load {:.3f} s, "
      "prepare {:.3f} s\n",
      r.wall_ns / 1e9, streamed ? c.timing + ", from the start of the load" : c.timing,
      r.recorded_ns / 1e9, r.recorded_ns ? static_cast<double>(r.wall_ns) / r.recorded_ns : 0.0,
      secs(t1 - t0), secs(t2 - t1));
  int code = r.mismatches ? 1 : 0;
  // A trace cut short replays up to the cut, and says so as every command reading one does.
  if (!schedule->truncation.empty()) {
    std::fflush(stdout);
    fmt::print(stderr, "fay replay: {}\n", schedule->truncation);
    code = trace::kIncompleteExit;
  }
  // The schedule holds every buffer of the trace, in as many allocations; handing them back one
  // by one takes longer than a small replay. The kernel takes them all at once.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace

Runner RegisterReplay(CLI::App& app) {
  auto c = std::make_shared<ReplayCli>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "replay a .fay trace's file calls inside a directory, optionally verifying them");
  cmd->add_option("file", c->path, "the trace")->required();
  cmd->add_option("--root", c->root, "directory every path is resolved inside (must exist)")
      ->required();
  cmd->add_flag("--prepare", c->prepare,
                "first create in --root the files and directories the trace found existing");
  cmd->add_flag("--verify", c->verify,
                "compare results and returned data with the recording; exit 1 on a mismatch");
  cmd->add_option("--timing", c->timing,
                  "asap (default), original (recorded gaps between calls) or xN (gaps / N)");
  cmd->add_option("--threads", c->threads,
                  "replay workers: auto (one per recorded thread, default) or N");
  cmd->add_flag("--progress", c->progress, "progress on stderr even when it is not a terminal");
  cmd->add_flag("--no-progress", c->no_progress, "no progress bar, even on a terminal");
  cmd->add_option("--max-mismatches", c->max_mismatches, "mismatches listed in full (default 50)");
  cmd->add_option("--lazy-data", c->lazy_data,
                  "read and write data stays in the trace until its call runs: auto (default: "
                  "when the trace holds 64 MiB of buffers or more), on or off (all in memory)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--stream", c->stream,
                  "auto (default): a one-thread trace starts replaying while it loads; off: "
                  "load (and prepare) everything first")
      ->check(CLI::IsMember({"auto", "off"}));
  return [c]() { return Run(*c); };
}

}  // namespace fay::cli
