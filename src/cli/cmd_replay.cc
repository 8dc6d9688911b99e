// fay replay FILE --root DIR [--prepare] [--verify] [--timing asap|original|xN]
//                 [--threads auto|N] [--progress] [--max-mismatches N]
//                 [--lazy-data auto|on|off] [--stream auto|off] [--keep-owners]
//                 [--allow-nonempty-root]
#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "replay/end_state_check.h"
#include "replay/prepare.h"
#include "replay/replayer.h"
#include "replay/root_guard.h"
#include "replay/sandbox.h"
#include "replay/schedule.h"
#include "schema/syscall_table.h"
#include "schema/syscall_values.h"
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
  bool keep_owners = false;
  bool allow_nonempty_root = false;
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

// The calls that change a file or a directory entry, for the summary's "not replayed".
bool ChangesFiles(int nr) {
  static const std::set<int> calls = {
      sysno::mknod,          sysno::mknodat,      sysno::mkdir,        sysno::mkdirat,
      sysno::unlink,         sysno::unlinkat,     sysno::rmdir,        sysno::rename,
      sysno::renameat,       sysno::renameat2,    sysno::link,         sysno::linkat,
      sysno::symlink,        sysno::symlinkat,    sysno::chmod,        sysno::fchmod,
      sysno::fchmodat,       sysno::fchmodat2,    sysno::chown,        sysno::lchown,
      sysno::fchown,         sysno::fchownat,     sysno::truncate,     sysno::ftruncate,
      sysno::fallocate,      sysno::setxattr,     sysno::lsetxattr,    sysno::fsetxattr,
      sysno::removexattr,    sysno::lremovexattr, sysno::fremovexattr, sysno::utimensat,
      sysno::copy_file_range};
  return calls.count(nr) > 0;
}

int Run(const ReplayCli& c) {
  // A flight recorder's dump starts in the middle of the run: the files its calls use were
  // opened before it, so no replay of it could say "verified" and mean it.
  if (auto r = trace::Reader::Open(c.path); r.ok() && r->info().is_flight_dump()) {
    fmt::print(stderr,
               "fay replay: {} is a flight recorder dump ({}): it holds only the calls just "
               "before that, not the run from its start, so it cannot be replayed or verified. "
               "Query it with fay query -i; record with fay record (no --flight) to replay.\n",
               c.path, r->info().flight_reason);
    return 2;
  }
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
  auto verdict = replay::CheckRoot(*sandbox, c.root, c.allow_nonempty_root);
  if (!verdict.ok()) {
    fmt::print(stderr, "fay replay: {}\n", verdict.status().message());
    return 1;
  }
  // A root that starts empty holds no FIFO until --prepare or the replay makes one: the replay
  // then need not look at what it opens first.
  if (verdict->empty) sandbox->SetMayHoldFifos(false);
  // The mark that lets a later replay into this root through, written just before the first
  // thing is made in it (a trace that does not load leaves the root as it was).
  std::once_flag marked;
  auto mark = [&] {
    if (!verdict->mark) return;
    std::call_once(marked, [&] {
      if (Status st = replay::MarkRoot(*sandbox); !st.ok()) {
        fmt::print(stderr,
                   "fay replay: note: --root {}: {}; a later replay into it will need "
                   "--allow-nonempty-root\n",
                   c.root, st.message());
      }
    });
  };
  // What fay made other than recorded, for --verify: filled by Apply (--prepare), and by the
  // replay where it withholds set-id bits from a chmod or a creating open.
  replay::PreparedDiffs prepared_diffs;
  opt.prepared = &prepared_diffs;
  auto t0 = std::chrono::steady_clock::now();
  // --prepare walks the calls while they load, where the trace allows it (see CallStream). A
  // one-thread trace also starts replaying then: the walk lets through the calls that need
  // nothing --prepare makes (see Preparer::StreamTo), and the rest once it is all made.
  replay::Preparer preparer;
  if (c.prepare) {
    // The symlinks the recorder met are in the end state, at the trace's end: read before the
    // walk, which resolves paths through them.
    auto r = trace::Reader::Open(c.path);
    if (r.ok() && r->end_state()) preparer.SetMetSymlinks(r->end_state()->symlinks);
  }
  replay::CallGate gate;
  std::thread streamer;
  std::optional<Expected<replay::ReplayReport>> streamed;
  bool stream = c.stream == "auto";
  if (stream && c.prepare) preparer.StreamTo(*sandbox, &gate);
  std::function<void(replay::CallStream&)> walk;
  if (c.prepare || stream) {
    walk = [&](replay::CallStream& calls) {
      if (calls.streaming()) mark();  // the replay, and --prepare's directories, start now
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
  mark();
  if (c.prepare) {
    replay::PrepareOptions popt;
    popt.keep_owners = c.keep_owners;
    auto st = preparer.Apply(*sandbox, *schedule, popt, &prepared_diffs);
    if (!st.ok()) {
      stop();
      fmt::print(stderr, "fay replay: {}\n", st.status().message());
      return 1;
    }
    // What was not made as the trace says: a trace from someone else gets no set-id bits,
    // device nodes or owners (unless --keep-owners).
    std::vector<std::string> notes;
    auto plural = [](uint64_t n, const char* one, const char* many) {
      return fmt::format("{} {}", n, n == 1 ? one : many);
    };
    if (st->existing) notes.push_back(fmt::format("{} already there", st->existing));
    if (st->setid_stripped) {
      notes.push_back(plural(st->setid_stripped, "file's setuid/setgid/sticky bits stripped",
                             "files' setuid/setgid/sticky bits stripped"));
    }
    if (st->devices_skipped) {
      notes.push_back(
          plural(st->devices_skipped, "device node not created", "device nodes not created"));
    }
    if (st->owners_not_kept) {
      notes.push_back(fmt::format(
          "ownership not kept: {}{}",
          plural(st->owners_not_kept, "file not owned as recorded", "files not owned as recorded"),
          c.keep_owners ? "" : " (--keep-owners)"));
    }
    std::string joined;
    for (const std::string& n : notes) joined += (joined.empty() ? "" : ", ") + n;
    fmt::print(
        "prepared:   {} directories, {} files ({} bytes of recorded content), {} symlinks"
        " in {}{}\n",
        st->dirs, st->files, st->bytes, st->symlinks, c.root,
        joined.empty() ? "" : " (" + joined + ")");
    if (st->chown_refused) {
      fmt::print(stderr,
                 "fay replay: --keep-owners: {}; carrying on without the recorded owners "
                 "({} refused)\n",
                 st->chown_error, plural(st->chown_refused, "chown", "chowns"));
    }
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
    if (r.as_prepared) {
      fmt::print(
          "as withheld: {} verified stat results differ from the recording only by what fay "
          "withholds from a trace's files (setuid/setgid/sticky bits, owners)\n",
          r.as_prepared);
    }
  }
  if (r.withheld) {
    fmt::print(
        "withheld:   setuid/setgid bits left out of {} replayed calls (chmod, fchmod, "
        "creating opens) that asked for them\n",
        r.withheld);
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
  if (!r.interrupted.empty()) {
    uint64_t n = 0;
    std::string what;
    for (const auto& [key, count] : r.interrupted) {
      n += count;
      what += fmt::format("{}{} {} {}", what.empty() ? "" : ", ", Label(key.first),
                          ErrnoName(key.second), count);
    }
    fmt::print("interrupted: {} ({}): a signal cut them short in the recording; not run\n", n,
               what);
  }
  if (!schedule->signals.empty()) {
    // Nothing to send: the calls the handlers made are in the trace, each replayed in its place,
    // and a call the signal cut short is replayed as cut short (above).
    uint64_t n = 0;
    std::string what;
    for (const auto& [sig, count] : schedule->signals) {
      n += count;
      what += fmt::format("{}{} {}", what.empty() ? "" : ", ", SignalName(sig), count);
    }
    fmt::print(
        "signals:    {} taken in the recording ({}); not sent again: their handlers' "
        "calls replay in place\n",
        n, what);
  }
  // Emulated calls that change files (a device node, a call on a descriptor the replay does not
  // hold): what they did is not in the replayed tree, and the end-state check says where.
  std::map<int, uint64_t> unreplayed;
  for (auto [nr, count] : r.emulated_by_nr) {
    uint64_t cut = 0;
    for (const auto& [key, k] : r.interrupted)
      if (key.first == nr) cut += k;
    if (ChangesFiles(nr) && count > cut) unreplayed[nr] = count - cut;
  }
  if (!unreplayed.empty())
    fmt::print("not replayed: {} (calls that change files, emulated)\n", CountList(unreplayed));
  fmt::print(
      "wall:       {:.3f} s replay ({}) vs {:.3f} s recorded ({:.2f}x); load {:.3f} s, "
      "prepare {:.3f} s\n",
      r.wall_ns / 1e9, streamed ? c.timing + ", from the start of the load" : c.timing,
      r.recorded_ns / 1e9, r.recorded_ns ? static_cast<double>(r.wall_ns) / r.recorded_ns : 0.0,
      secs(t1 - t0), secs(t2 - t1));
  int code = r.mismatches ? 1 : 0;
  // Files the program wrote through shared mappings get the content the recording kept of
  // them (the calls hold none of it), then the end-state check: the tree the replay left
  // against what the recording left.
  auto reader = trace::Reader::Open(c.path);
  const std::optional<trace::EndState>* es = reader.ok() ? &reader->end_state() : nullptr;
  if (es && *es) {
    if (uint64_t n = replay::RestoreKept(**es, *sandbox))
      fmt::print("restored:   {} file{} written through a shared mapping, from the end state\n", n,
                 n == 1 ? "" : "s");
  }
  if (c.verify) {
    if (!es || !*es) {
      fmt::print(
          "end state:  not in this trace (recorded with --no-end-state, cut short, or by "
          "a fay before trace format 1.4): the tree was not compared\n");
    } else {
      replay::EndStateReport e = replay::CompareEndState(**es, *sandbox, c.max_mismatches);
      for (const std::string& m : e.listed) fmt::print("end state mismatch: {}\n", m);
      if (e.differ > e.listed.size())
        fmt::print("end state mismatch: ... and {} more\n", e.differ - e.listed.size());
      fmt::print("end state:  {} of {} changed paths as recorded{}{}\n", e.paths - e.differ,
                 e.paths,
                 e.undetermined ? fmt::format(" ({} only where the trace determines them: files "
                                              "that existed before and were only appended to or "
                                              "chmod'ed elsewhere)",
                                              e.undetermined)
                                : "",
                 e.differ ? fmt::format("; {} differ", e.differ) : "");
      if ((*es)->skipped)
        fmt::print("end state:  {} changed paths could not be looked at when recorded\n",
                   (*es)->skipped);
      if (e.differ) code = 1;
    }
  }
  // A trace cut short replays up to the cut, and says so as every command reading one does.
  if (!schedule->truncation.empty()) {
    fmt::print("truncated:  only the calls before the cut were replayed\n");
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
  cmd->add_option("--root", c->root,
                  "directory every path is resolved inside: an empty one, or one fay replay "
                  "used before (never / or a system or home directory)")
      ->required();
  cmd->add_flag("--allow-nonempty-root", c->allow_nonempty_root,
                "accept a --root that is not empty and was not made by fay replay: the trace's "
                "creates, unlinks, renames and truncations may change or delete what is in it");
  cmd->add_flag("--keep-owners", c->keep_owners,
                "--prepare gives files their recorded owner and group (by default they belong to "
                "whoever replays; setuid/setgid bits are stripped either way)");
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
