// fay dump FILE: a recorded trace as `strace -f -T` would have printed it.
#include <fmt/core.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "schema/decode/siginfo.h"
#include "schema/syscall_format.h"
#include "schema/syscall_set.h"
#include "trace/reader.h"

namespace fay::cli {
namespace {

constexpr size_t kReturnColumn = 40;

struct DumpOptions {
  std::string path;
  bool hex = false;
  int timestamps = 0;  // -t: 1, -tt: 2, -ttt: 3
  std::vector<int32_t> pids;
  std::vector<int32_t> tids;
  std::string syscalls;
  size_t string_limit = 0;  // 0: the printer's default
};

// strace -t/-tt/-ttt: wall-clock time of the call's entry, from the header's clock anchor.
std::string Timestamp(const RecordingInfo& info, uint64_t mono_ns, int level) {
  uint64_t real_ns = info.anchor_realtime_ns + (mono_ns - info.anchor_monotonic_ns);
  time_t secs = static_cast<time_t>(real_ns / 1'000'000'000);
  uint64_t usec = (real_ns % 1'000'000'000) / 1000;
  if (level >= 3) return fmt::format("{}.{:06} ", secs, usec);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char hms[16];
  std::strftime(hms, sizeof(hms), "%H:%M:%S", &tm);
  if (level == 2) return fmt::format("{}.{:06} ", hms, usec);
  return fmt::format("{} ", hms);
}

// strace's "+++ exited with 3 +++" / "+++ killed by SIGKILL +++".
std::string ExitLine(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    std::string sig = name ? fmt::format("SIG{}", name) : fmt::format("{}", WTERMSIG(status));
    return fmt::format("+++ killed by {}{} +++", sig, WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return fmt::format("+++ exited with {} +++", WEXITSTATUS(status));
}

bool Wanted(const std::vector<int32_t>& list, int32_t v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

int Run(const DumpOptions& o) {
  auto reader = trace::Reader::Open(o.path);
  if (!reader.ok()) {
    fmt::print(stderr, "fay dump: {}\n", reader.status().message());
    return 1;
  }
  SyscallSet set = SyscallSet::All();
  if (!o.syscalls.empty()) {
    auto parsed = ParseSyscallSet(o.syscalls);
    if (!parsed.ok()) {
      fmt::print(stderr, "fay dump: -e {}: {}\n", o.syscalls, parsed.status().message());
      return 1;
    }
    set = *parsed;
  }
  FormatOptions fopts;
  if (o.string_limit) fopts.string_limit = o.string_limit;
  const RecordingInfo& info = reader->info();
  trace::ReadFilter filter;
  filter.tids = o.tids;  // lets the footer index skip chunks of other threads
  std::string line;
  auto prefix = [&](int32_t tid, uint64_t t) {
    line = fmt::format("{:<5} ", tid);
    if (o.timestamps) line += Timestamp(info, t, o.timestamps);
  };
  Status st = reader->ForEach(
      filter,
      [&](const SyscallEvent& ev) {
        if (!Wanted(o.pids, ev.pid) || !set.Contains(ev.nr)) return;
        prefix(ev.tid, ev.entry_ns);
        std::string call = FormatSyscall(ev, fopts);
        // strace pads the call out to column 40 before " = " (its -a default).
        size_t eq = call.rfind(" = ");
        if (eq != std::string::npos) {
          line += std::string_view(call).substr(0, eq);
          // strace pads the call so that " = " starts at column 40 (1-based).
          if (line.size() + 1 < kReturnColumn) line.append(kReturnColumn - 1 - line.size(), ' ');
          line += std::string_view(call).substr(eq);
        } else {
          line += call;
        }
        if (ev.exit_ns != 0 && !(ev.flags & kEventNoExit)) {
          uint64_t ns = ev.exit_ns >= ev.entry_ns ? ev.exit_ns - ev.entry_ns : 0;
          line += fmt::format(" <{}.{:06}>", ns / 1'000'000'000, (ns % 1'000'000'000) / 1000);
        }
        line += '\n';
        if (o.hex) line += FormatHexDump(ev);
        std::fwrite(line.data(), 1, line.size(), stdout);
      },
      [&](const ProcessEvent& ev) {
        if (!Wanted(o.pids, ev.pid)) return;
        if (ev.kind == ProcessEventKind::kSignal) {
          // strace -e trace= narrows the calls, not the signals.
          prefix(ev.tid, ev.time_ns);
          line += SignalLine(ev.signo, ev.siginfo);
          line += '\n';
          std::fwrite(line.data(), 1, line.size(), stdout);
          return;
        }
        if (ev.kind != ProcessEventKind::kExit) return;
        prefix(ev.tid, ev.time_ns);
        line += ExitLine(ev.exit_status);
        line += '\n';
        std::fwrite(line.data(), 1, line.size(), stdout);
      });
  std::fflush(stdout);
  if (!st.ok()) {
    fmt::print(stderr, "fay dump: {}\n", st.message());
    return trace::kIncompleteExit;
  }
  uint64_t lost = reader->stats().lost_events;
  if (lost) fmt::print(stderr, "fay dump: note: the recorder lost {} events\n", lost);
  if (reader->truncated()) {
    fmt::print(stderr, "fay dump: {}\n", reader->TruncationNotice());
    return trace::kIncompleteExit;
  }
  return 0;
}

}  // namespace

Runner RegisterDump(CLI::App& app) {
  auto o = std::make_shared<DumpOptions>();
  CLI::App* cmd = app.add_subcommand("dump", "Print a recorded trace as strace -f -T would");
  cmd->add_option("file", o->path, "trace file (.fay)")->required();
  cmd->add_flag("-x", o->hex, "hex dump of every captured data buffer");
  cmd->add_flag_function(
      "-t", [o](int64_t n) { o->timestamps = static_cast<int>(std::min<int64_t>(n, 3)); },
      "prefix the wall-clock time; -tt adds microseconds, -ttt prints epoch seconds");
  cmd->add_option("-p,--pid", o->pids, "only these processes")->delimiter(',');
  cmd->add_option("--tid", o->tids, "only these threads")->delimiter(',');
  cmd->add_option("-e", o->syscalls, "only these syscalls, as strace -e trace= ('%file,read')");
  cmd->add_option("-s", o->string_limit, "print at most N bytes of each string (default 32)");
  return [o] { return Run(*o); };
}

}  // namespace fay::cli
