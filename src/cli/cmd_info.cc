// fay info FILE: what a trace holds: the command, the machine, processes and threads, syscall
// counts, captured bytes, storage ratios, and any loss, truncation or damage.
#include <fmt/core.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "schema/syscall_table.h"
#include "schema/syscall_values.h"
#include "trace/reader.h"

namespace fay::cli {
namespace {

struct InfoOptions {
  std::string path;
  bool check = false;  // read every captured byte too
};

// Lists longer than this show their first entries and a count of the rest.
constexpr size_t kListMax = 32;

// 'a b' -> "'a b'": enough quoting for a person to read argv back.
std::string ShellWord(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;!#~") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string IdList(const std::set<int32_t>& ids) {
  std::string s;
  size_t n = 0;
  for (int32_t id : ids) {
    if (n == kListMax) return s + fmt::format(" ... and {} more", ids.size() - kListMax);
    s += fmt::format("{}{}", n++ ? " " : "", id);
  }
  return s;
}

std::string Bytes(uint64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < (1ull << 20)) return fmt::format("{:.1f} KiB ({} B)", n / 1024.0, n);
  if (n < (1ull << 30)) return fmt::format("{:.1f} MiB ({} B)", n / 1048576.0, n);
  return fmt::format("{:.2f} GiB ({} B)", n / 1073741824.0, n);
}

std::string Ratio(uint64_t num, uint64_t den) {
  if (den == 0) return "n/a";
  return fmt::format("{:.2f}x", static_cast<double>(num) / static_cast<double>(den));
}

std::string WallClock(const RecordingInfo& info, uint64_t mono_ns) {
  uint64_t real_ns = info.anchor_realtime_ns + (mono_ns - info.anchor_monotonic_ns);
  time_t secs = static_cast<time_t>(real_ns / 1'000'000'000);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  char zone[16];
  std::strftime(zone, sizeof(zone), "%z", &tm);
  return fmt::format("{}.{:06} {}", buf, (real_ns % 1'000'000'000) / 1000, zone);
}

struct Summary {
  uint64_t first_ns = UINT64_MAX;
  uint64_t last_ns = 0;
  std::set<int32_t> pids;
  std::set<int32_t> tids;
  std::map<int32_t, uint64_t> calls;  // by syscall number
  std::map<int32_t, uint64_t> errors;
  uint64_t syscalls = 0;
  uint64_t error_total = 0;
  uint64_t no_exit = 0;
  uint64_t buffers = 0;
  uint64_t truncated_buffers = 0;
  uint64_t not_captured_buffers = 0;
  uint64_t forks = 0, execs = 0, exits = 0;
  std::map<int, uint64_t> signals;  // delivered, by signal

  void Time(uint64_t a, uint64_t b) {
    first_ns = std::min(first_ns, a);
    last_ns = std::max(last_ns, std::max(a, b));
  }
};

std::string SyscallLabel(int32_t nr) {
  std::string_view name = SyscallName(nr);
  return name.empty() ? fmt::format("syscall_{}", nr) : std::string(name);
}

// What `replay --verify` has to compare against: "12 paths (3 absent)", "none", or "unreadable".
std::string EndStateSummary(const trace::Reader& r) {
  if (!r.end_state_error().empty()) return "unreadable (see below)";
  if (!r.end_state()) return "none";
  const trace::EndState& es = *r.end_state();
  size_t absent = 0;
  for (const trace::EndEntry& e : es.entries) absent += e.kind == trace::EndKind::kAbsent;
  return fmt::format("{} paths ({} absent{}){}", es.entries.size(), absent,
                     es.skipped ? fmt::format(", {} more changed but not noted", es.skipped) : "",
                     es.symlinks.empty()
                         ? ""
                         : fmt::format("; {} symlinks met, for --prepare", es.symlinks.size()));
}

void Print(const trace::Reader& r, const Summary& s) {
  const RecordingInfo& info = r.info();
  const trace::ReaderStats& st = r.stats();
  auto row = [](std::string_view key, const std::string& value) {
    fmt::print("{:<20}{}\n", fmt::format("{}:", key), value);
  };
  row("file", fmt::format("{} (format {}.{}, written by {})", r.path(), r.version_major(),
                          r.version_minor(), r.writer().empty() ? "?" : r.writer()));
  std::string cmd;
  for (const auto& a : info.argv) cmd += (cmd.empty() ? "" : " ") + ShellWord(a);
  row("command", info.argv.empty() ? fmt::format("(attached to pid {})", info.root_pid)
                                   : fmt::format("{}  (pid {})", cmd, info.root_pid));
  row("cwd", info.cwd);
  row("backend", info.backend);
  row("host", fmt::format("{} (Linux {}, {})", info.host, info.kernel, info.arch));
  row("syscall filter", info.syscall_filter.empty() ? "all" : info.syscall_filter);
  row("max buffer", info.max_buffer ? Bytes(info.max_buffer) : "unlimited");
  if (info.is_flight_dump()) {
    // A dump holds the ring's last calls, not the whole run: say which, and what came before.
    row("flight dump", fmt::format("number {}, of a {} ring, written on: {}", info.flight_dump,
                                   Bytes(info.flight_ring_bytes), info.flight_reason));
    row("flight window",
        info.flight_to_ns >= info.flight_from_ns && info.flight_from_ns
            ? fmt::format(
                  "{} to {} ({:.6f} s, from +{:.6f} s after the recording started); {} "
                  "earlier syscalls were not kept",
                  WallClock(info, info.flight_from_ns), WallClock(info, info.flight_to_ns),
                  (info.flight_to_ns - info.flight_from_ns) / 1e9,
                  (info.flight_from_ns - std::min(info.flight_from_ns, info.anchor_monotonic_ns)) /
                      1e9,
                  info.flight_evicted_syscalls)
            : fmt::format("no calls; {} earlier syscalls were not kept",
                          info.flight_evicted_syscalls));
  }
  if (s.first_ns <= s.last_ns) {
    row("start", WallClock(info, s.first_ns));
    row("duration", fmt::format("{:.6f} s", (s.last_ns - s.first_ns) / 1e9));
  } else {
    row("start", "(no events)");
  }
  row("processes",
      fmt::format("{}{}{}", s.pids.size(), s.pids.empty() ? "" : ": ", IdList(s.pids)));
  row("threads", fmt::format("{}{}{}", s.tids.size(), s.tids.empty() ? "" : ": ", IdList(s.tids)));
  row("process events",
      fmt::format("{} forks/clones, {} execs, {} exits", s.forks, s.execs, s.exits));
  {
    uint64_t total = 0;
    std::string names;
    for (const auto& [sig, n] : s.signals) {
      total += n;
      names += fmt::format("{}{} {}", names.empty() ? " (" : ", ", SignalName(sig), n);
    }
    row("signals delivered", fmt::format("{}{}", total, names.empty() ? "" : names + ")"));
  }
  row("syscalls",
      fmt::format("{} ({} failed, {} never returned)", s.syscalls, s.error_total, s.no_exit));
  row("bytes captured", fmt::format("{} in {} buffers", Bytes(st.bytes_captured), s.buffers));
  row("truncated buffers", fmt::format("{} (capped by --max-buffer)", s.truncated_buffers));
  row("not captured", fmt::format("{} buffers (memory unreadable)", s.not_captured_buffers));
  row("blob store", fmt::format("{} distinct blobs, {}", st.blobs, Bytes(st.blob_bytes)));
  row("dedup ratio",
      fmt::format("{} ({} referenced / {} stored)", Ratio(st.blob_bytes_referenced, st.blob_bytes),
                  st.blob_bytes_referenced, st.blob_bytes));
  row("compression ratio",
      fmt::format("{} ({} raw / {} stored in {} chunks)", Ratio(st.bytes_raw, st.bytes_stored),
                  st.bytes_raw, st.bytes_stored, st.chunks));
  row("file size", Bytes(st.file_bytes));
  {
    // Several streams: written by several consumer threads (record --consumers), read merged.
    std::set<uint16_t> streams;
    for (const trace::ChunkRef& c : r.chunks())
      if (c.type == trace::ChunkType::kEvents) streams.insert(c.stream);
    if (streams.size() > 1)
      row("streams", fmt::format("{} (one per consumer thread; each thread's events in one, "
                                 "read merged by time)",
                                 streams.size()));
  }
  std::string per_cpu;
  for (const auto& [cpu, n] : st.lost_by_cpu)
    if (cpu >= 0) per_cpu += fmt::format("{}cpu{}: {}", per_cpu.empty() ? " (" : ", ", cpu, n);
  row("lost events", fmt::format("{}{}", st.lost_events, per_cpu.empty() ? "" : per_cpu + ")"));
  row("truncated", r.truncated() ? fmt::format("yes (last whole chunk at offset {}: {})",
                                               r.last_chunk_offset(), r.TruncationMessage())
                                 : "no");
  row("end state", EndStateSummary(r));
  if (s.calls.empty()) return;
  std::vector<std::pair<int32_t, uint64_t>> by_count(s.calls.begin(), s.calls.end());
  std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return SyscallLabel(a.first) < SyscallLabel(b.first);
  });
  fmt::print("\n{:>10} {:>8}  {}\n", "calls", "errors", "syscall");
  for (const auto& [nr, n] : by_count) {
    auto e = s.errors.find(nr);
    fmt::print("{:>10} {:>8}  {}\n", n, e == s.errors.end() ? 0 : e->second, SyscallLabel(nr));
  }
}

int Run(const InfoOptions& o) {
  auto reader = trace::Reader::Open(o.path);
  if (!reader.ok()) {
    fmt::print(stderr, "fay info: {}\n", reader.status().message());
    return 1;
  }
  // The summary needs the buffers' sizes, not their bytes, and a trace's bytes are mostly its
  // blob store: a gigabyte read back is a second of this command's time.
  reader->SkipBlobs(!o.check);
  Summary s;
  Status st = reader->ForEach(
      [&](const SyscallEvent& ev) {
        ++s.syscalls;
        s.Time(ev.entry_ns, ev.exit_ns);
        s.pids.insert(ev.pid);
        s.tids.insert(ev.tid);
        ++s.calls[ev.nr];
        bool returned = ev.exit_ns != 0 && !(ev.flags & kEventNoExit);
        if (!returned) ++s.no_exit;
        if (returned && ev.ret < 0 && ev.ret >= -4095) {
          ++s.errors[ev.nr];
          ++s.error_total;
        }
        for (const CapturedBuffer& b : ev.buffers) {
          ++s.buffers;
          s.truncated_buffers += b.truncated;
          s.not_captured_buffers += b.not_captured;
        }
      },
      [&](const ProcessEvent& ev) {
        s.Time(ev.time_ns, ev.time_ns);
        s.pids.insert(ev.pid);
        s.tids.insert(ev.tid);
        s.forks += ev.kind == ProcessEventKind::kFork;
        s.execs += ev.kind == ProcessEventKind::kExec;
        s.exits += ev.kind == ProcessEventKind::kExit;
        if (ev.kind == ProcessEventKind::kSignal) ++s.signals[ev.signo];
      });
  Print(*reader, s);
  std::fflush(stdout);
  if (!st.ok()) {
    fmt::print(stderr, "fay info: {}\nfay info: the summary above covers the readable part\n",
               st.message());
    return trace::kIncompleteExit;
  }
  if (reader->truncated()) {
    fmt::print(stderr, "fay info: {}\n", reader->TruncationNotice());
    return trace::kIncompleteExit;
  }
  // Damage like any other: the trace was not read whole (docs/FORMAT.md 7.5).
  if (!reader->end_state_error().empty()) {
    fmt::print(stderr, "fay info: {}\n", reader->end_state_error());
    return trace::kIncompleteExit;
  }
  return 0;
}

}  // namespace

Runner RegisterInfo(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Summarize a recorded trace");
  cmd->add_option("file", o->path, "trace file (.fay)")->required();
  cmd->add_flag("--check", o->check,
                "also read back and checksum every captured buffer in the blob store (by "
                "default only the events and the index are read)");
  return [o] { return Run(*o); };
}

}  // namespace fay::cli
