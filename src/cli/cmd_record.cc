// fay record [-o FILE] [--backend auto|ebpf|ptrace] [-e SET] [--max-buffer BYTES]
//            [--ring-size BYTES] [--consumers N] [--loss block|drop]
//            [--flight SIZE [--dump-on SIGNAL|exit|PREDICATE]... [--max-dumps N]]
//            [-p PID | -- CMD...]
#include <sys/stat.h>

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "cli/commands.h"
#include "record/dump_signals.h"
#include "record/dump_trigger.h"
#include "record/recorder.h"
#include "replay/end_state_check.h"
#include "replay/prepare.h"
#include "replay/sandbox.h"
#include "schema/syscall_set.h"
#include "schema/syscall_table.h"
#include "trace/end_state.h"
#include "trace/flight.h"

namespace fay::cli {
namespace {

// The end line's note on --loss=block's pauses. A waiting call a pause interrupted is made again
// by the kernel, and the trace holds it once; saying how many shows that this happened.
std::string PauseNote(const record::RecordResult& r) {
  std::string s = fmt::format("; the command was paused {} times for fay to catch up", r.pauses);
  if (r.restarts_folded == 1) s += " (1 waiting call they interrupted is recorded once)";
  if (r.restarts_folded > 1)
    s += fmt::format(" ({} waiting calls they interrupted are recorded once each)",
                     r.restarts_folded);
  return s;
}

struct RecordCli {
  record::RecordOptions opt;
  std::string max_buffer;
  std::string ring_size;
  bool no_end_state = false;
  std::string flight;
  std::vector<std::string> dump_on;
  uint32_t max_dumps = 16;
};

// Feeds the recorder's calls to a ChangeTracker.
struct EndStateObserver : record::SyscallObserver {
  explicit EndStateObserver(const std::string& cwd) : tracker(cwd) {}
  bool Wants(int nr) const override { return replay::ChangeTracker::Wants(nr); }
  void Observe(const SyscallEvent& ev) override { tracker.Observe(ev); }
  bool FileOf(int32_t pid, int fd, std::string* path, uint64_t* offset) const override {
    return tracker.FileOf(pid, fd, path, offset);
  }
  replay::ChangeTracker tracker;
};

// Where the recorded calls' relative paths start: fay's directory for a command, the process's
// for -p ("" when it cannot be read: relative paths are then not followed).
std::string StartingDirectory(pid_t pid) {
  std::string link = pid ? fmt::format("/proc/{}/cwd", pid) : "/proc/self/cwd";
  char buf[4096];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// "4096", "64K", "1M", "1G".
bool ParseSize(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (...) {
    return false;
  }
  std::string unit = s.substr(pos);
  uint64_t mul = 1;
  if (unit == "K" || unit == "k" || unit == "KiB")
    mul = 1ull << 10;
  else if (unit == "M" || unit == "MiB")
    mul = 1ull << 20;
  else if (unit == "G" || unit == "GiB")
    mul = 1ull << 30;
  else if (!unit.empty())
    return false;
  *out = v * mul;
  return true;
}

// What a flight recording wrote: each dump, with its reason and window.
int FlightSummary(const RecordCli& c, const record::RecordResult& r,
                  const trace::FlightControl& flight, bool usr1) {
  std::vector<trace::FlightDumpResult> dumps = flight.results();
  bool failed = false;
  if (!c.opt.quiet) {
    fmt::print(stderr,
               "fay: flight recorder: {} syscalls from {} processes ({} threads) in {:.2f}s, the "
               "last {:.1f} MiB kept in memory; {} dump{}{}\n",
               r.syscalls, r.processes, r.threads, r.seconds, flight.ring_bytes() / 1048576.0,
               dumps.size(), dumps.size() == 1 ? "" : "s", r.pauses ? PauseNote(r) : "");
  }
  for (const auto& d : dumps) {
    if (!d.error.empty()) {
      failed = true;
      fmt::print(stderr, "fay: dump ({}) failed: {}\n", d.reason, d.error);
      continue;
    }
    if (!c.opt.quiet)
      fmt::print(stderr, "fay:   {} ({:.1f} KiB): {} syscalls over {:.3f}s before {}\n", d.path,
                 d.bytes / 1024.0, d.syscalls, (d.to_ns - d.from_ns) / 1e9, d.reason);
  }
  if (flight.refused())
    fmt::print(stderr, "fay: {} more dumps were asked for past --max-dumps {}\n", flight.refused(),
               c.max_dumps);
  if (dumps.empty() && !c.opt.quiet)
    fmt::print(stderr, "fay: nothing was dumped: no trigger fired{}\n",
               usr1 ? " (send SIGUSR1 to fay, or add --dump-on exit)" : " (add --dump-on exit)");
  return failed ? 1 : r.exit_code;
}

// --flight's parts, which live as long as the recording.
struct Flight {
  std::unique_ptr<trace::FlightControl> control;
  std::unique_ptr<record::DumpSignals> signals;
  std::vector<std::unique_ptr<record::DumpTrigger>> triggers;
  bool usr1 = false;  // whether SIGUSR1 asks for a dump (the summary's hint says so)
};

// --flight and --dump-on: the trace stays in a ring in memory and is written when a trigger
// asks. 0, or the exit status of a usage error it printed.
int StartFlight(RecordCli& c, Flight& f) {
  if (!c.flight.empty()) {
    uint64_t size = 0;
    if (!ParseSize(c.flight, &size) || size < (1u << 20)) {
      fmt::print(stderr,
                 "fay: --flight: '{}' is not a size of at least 1M (examples: 16M, 256M, 1G)\n",
                 c.flight);
      return 2;
    }
    std::string out = c.opt.output.empty() ? record::DefaultOutputName(c.opt) : c.opt.output;
    c.opt.output = out;
    f.control = std::make_unique<trace::FlightControl>(size, out, c.max_dumps);
    c.opt.flight = f.control.get();
    std::vector<int> sigs;
    for (const std::string& d : c.dump_on) {
      if (d == "exit") {
        f.control->set_dump_on_exit(true);
      } else if (d.find(':') != std::string::npos) {
        auto t = record::DumpTrigger::Compile(d, f.control.get(), c.opt.observer);
        if (!t.ok()) {
          fmt::print(stderr, "fay: {}\n", t.status().message());
          return 2;
        }
        // A call -e leaves out never reaches the trigger.
        if (!c.opt.syscall_filter.empty()) {
          auto set = ParseSyscallSet(c.opt.syscall_filter);
          for (int nr : (*t)->Syscalls())
            if (set.ok() && !set->Contains(nr)) {
              fmt::print(stderr,
                         "fay: --dump-on '{}': {} is not recorded with -e {}: add it to -e\n", d,
                         SyscallName(nr), c.opt.syscall_filter);
              return 2;
            }
        }
        f.triggers.push_back(std::move(t).value());
        c.opt.observer = f.triggers.back().get();
      } else if (int s = record::ParseSignal(d); record::IsDumpSignal(s)) {
        sigs.push_back(s);
      } else if (s > 0) {
        fmt::print(stderr,
                   "fay: --dump-on '{}': fay stops on SIGINT, SIGTERM and SIGHUP and cannot "
                   "take faults or job-control signals: use SIGUSR1, SIGUSR2 or a real-time "
                   "signal\n",
                   d);
        return 2;
      } else {
        fmt::print(stderr,
                   "fay: --dump-on '{}': expected a signal (SIGUSR1), exit, or a probe and a "
                   "predicate ('syscall:openat where errno == 13')\n",
                   d);
        return 2;
      }
    }
    if (c.dump_on.empty()) sigs.push_back(SIGUSR1);
    f.usr1 = std::find(sigs.begin(), sigs.end(), SIGUSR1) != sigs.end();
    if (!sigs.empty()) {
      auto ds = record::DumpSignals::Start(sigs, f.control.get());
      if (!ds.ok()) {
        fmt::print(stderr, "fay: {}\n", ds.status().message());
        return 1;
      }
      f.signals = std::move(ds).value();
    }
  } else if (!c.dump_on.empty()) {
    fmt::print(stderr, "fay: --dump-on needs --flight SIZE (a flight recorder's ring)\n");
    return 2;
  }
  return 0;
}

int Run(RecordCli& c) {
  if (!c.max_buffer.empty() && !ParseSize(c.max_buffer, &c.opt.max_buffer)) {
    fmt::print(stderr, "fay: --max-buffer: '{}' is not a size (examples: 4096, 64K, 1M)\n",
               c.max_buffer);
    return 2;
  }
  if (!c.ring_size.empty() && !ParseSize(c.ring_size, &c.opt.ring_size)) {
    fmt::print(stderr, "fay: --ring-size: '{}' is not a size (examples: 8M, 64M, 1G)\n",
               c.ring_size);
    return 2;
  }
  // The paths the program changes, followed as the calls are recorded, for the end state. A
  // flight recording writes dumps, which never hold one (a dump does not replay).
  std::optional<EndStateObserver> changes;
  if (!c.no_end_state && c.flight.empty()) {
    changes.emplace(StartingDirectory(c.opt.pid));
    c.opt.observer = &*changes;
  }
  Flight flight;
  if (int rc = StartFlight(c, flight); rc != 0) return rc;
  auto r = record::Record(c.opt);
  flight.signals.reset();
  if (flight.control) {
    if (!r.ok()) {
      fmt::print(stderr, "fay: {}\n", r.status().message());
      return 1;
    }
    if (!r->error.empty()) fmt::print(stderr, "fay: {}\n", r->error);
    return FlightSummary(c, *r, *flight.control, flight.usr1);
  }
  if (!r.ok()) {
    fmt::print(stderr, "fay: {}\n", r.status().message());
    return 1;
  }
  if (!r->error.empty()) fmt::print(stderr, "fay: {}\n", r->error);
  // The end state: what the program left on disk, for `fay replay --verify` to compare its
  // tree with. Only for a whole recording; a trace without it still replays and verifies calls.
  std::string end_note;
  // -o /dev/null (a run measured, not kept) or another device has no trace file to append it
  // to: nothing to say. A file that is gone or unreadable is still said.
  struct stat out_st;
  const bool device = stat(r->path.c_str(), &out_st) == 0 && !S_ISREG(out_st.st_mode);
  if (changes && r->error.empty() && !r->detached && !device) {
    auto live = replay::Sandbox::Open("/");
    Expected<trace::EndState> es = live.status();
    if (live.ok()) es = replay::NoteEndState(*live, changes->tracker.Changed());
    if (es.ok()) es->symlinks = changes->tracker.MetSymlinks();
    Status st = es.ok() ? trace::AppendEndState(r->path, *es) : es.status();
    if (!st.ok()) {
      fmt::print(stderr, "fay: the end state was not noted: {}\n", st.message());
    } else {
      end_note = fmt::format("; end state of {} changed paths noted", es->entries.size());
      if (es->skipped) end_note += fmt::format(" ({} could not be looked at)", es->skipped);
    }
  }
  if (!c.opt.quiet)
    fmt::print(
        stderr,
        "fay: recorded {} syscalls from {} processes ({} threads) in {:.2f}s to {} "
        "({:.1f} KiB, {:.1f} KiB of buffers){}\n",
        r->syscalls, r->processes, r->threads, r->seconds, r->path, r->file_bytes / 1024.0,
        r->bytes_captured / 1024.0,
        (r->pauses ? PauseNote(*r) : std::string(r->detached ? "; detached" : "")) + end_note);
  return r->exit_code;
}

}  // namespace

Runner RegisterRecord(CLI::App& app) {
  auto c = std::make_shared<RecordCli>();
  CLI::App* cmd = app.add_subcommand(
      "record", "record every syscall of a program, buffers included, into a .fay trace");
  cmd->add_option("-o,--output", c->opt.output, "trace file (default fay-CMD-TIME.fay)");
  cmd->add_option("--backend", c->opt.backend,
                  "auto (default: ebpf where the kernel permits it, else ptrace), ebpf or ptrace")
      ->check(CLI::IsMember({"auto", "ptrace", "ebpf"}));
  cmd->add_option("-e", c->opt.syscall_filter,
                  "record only these syscalls, strace style: read,write or %file,%net or !%memory");
  cmd->add_option(
      "--max-buffer", c->max_buffer,
      "capture at most this many bytes of each buffer (default: whole buffers; ebpf: up to "
      "a quarter of the ring, 8M by default)");
  cmd->add_option("--ring-size", c->ring_size,
                  "ebpf: each ring buffer between probes and fay, a power of two (default: 32M; "
                  "64M shared by several rings)");
  cmd->add_option("--consumers", c->opt.consumers,
                  "ebpf: threads writing the trace, each reading a ring of its own; a thread's "
                  "calls all go to one (default: one per 4 CPUs, at most 8)")
      ->check(CLI::Range(1, 8));
  cmd->add_option("--loss", c->opt.loss,
                  "ebpf, when the ring fills: block (default; pause the program until fay "
                  "catches up) or drop (count what is lost)")
      ->check(CLI::IsMember({"block", "drop"}));
  cmd->add_option("-p,--pid", c->opt.pid, "attach to a running process and its threads")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("-q,--quiet", c->opt.quiet, "no summary on stderr");
  cmd->add_flag("--no-end-state", c->no_end_state,
                "do not note the final state of the paths the program changed (replay --verify "
                "compares its tree with it)");
  cmd->add_option("--flight", c->flight,
                  "flight recorder: keep only the last SIZE of trace in memory (e.g. 64M), and "
                  "write it to -o when a --dump-on trigger fires");
  cmd->add_option("--dump-on", c->dump_on,
                  "with --flight, repeatable: a signal to fay (default SIGUSR1), exit, or a probe "
                  "and a predicate, e.g. 'syscall:openat where errno == 13'; later dumps are "
                  "numbered (out.2.fay)");
  cmd->add_option("--max-dumps", c->max_dumps, "with --flight: at most this many dumps (16)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("command", c->opt.argv, "the command to run, after --");
  cmd->positionals_at_end();
  return [c]() { return Run(*c); };
}

}  // namespace fay::cli
