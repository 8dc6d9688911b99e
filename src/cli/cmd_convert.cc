// fay convert FILE --to ctf|chrome|jsonl|csv -o OUT: a recorded trace in the formats other tools
// read. The conversion streams; a damaged or truncated trace converts up to its last readable
// chunk and the damage is reported (exit status 1 for damage
// and for a file cut short alike, as every command reading a trace: docs/FORMAT.md 7.4).
#include <fmt/core.h>

#include "cli/commands.h"
#include "trace/export/exporter.h"
#include "trace/reader.h"

namespace fay::cli {
namespace {

struct ConvertOptions {
  std::string path;
  std::string to;
  std::string out;
  bool buffers = false;
};

int Run(const ConvertOptions& o) {
  auto fail = [](const std::string& msg) {
    fmt::print(stderr, "fay convert: {}\n", msg);
    return 1;
  };
  auto reader = trace::Reader::Open(o.path);
  if (!reader.ok()) return fail(reader.status().message());
  trace::ExportOptions eopt;
  eopt.buffers = o.buffers;
  if (o.buffers && o.to != "csv" && o.to != "jsonl")
    return fail("--buffers applies to csv and jsonl only");
  auto exporter = trace::MakeExporter(o.to, o.out, reader->info(), eopt);
  if (!exporter.ok()) return fail(exporter.status().message());
  trace::ExportStats stats;
  Status st = trace::ExportTrace(*reader, **exporter, &stats);
  if (!st.ok()) {
    fmt::print(stderr,
               "fay convert: {}\nfay convert: the {} syscalls{} before the damage were "
               "written to {}\n",
               st.message(), stats.syscalls,
               (*exporter)->WritesProcesses()
                   ? fmt::format(" and {} process events", stats.processes)
                   : std::string(),
               o.out);
    return trace::kIncompleteExit;
  }
  if (o.out != "-") {
    if (stats.processes_left_out)
      fmt::print(stderr,
                 "fay convert: {} syscalls written to {} ({}); {} process events (fork, exec, "
                 "exit, signal) left out: {} has no event class for them\n",
                 stats.syscalls, o.out, o.to, stats.processes_left_out, o.to);
    else
      fmt::print(stderr, "fay convert: {} syscalls and {} process events written to {} ({})\n",
                 stats.syscalls, stats.processes, o.out, o.to);
  }
  if (reader->truncated()) {
    fmt::print(stderr, "fay convert: {}\n", reader->TruncationNotice());
    return trace::kIncompleteExit;
  }
  return 0;
}

}  // namespace

Runner RegisterConvert(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Convert a recorded trace to CTF (babeltrace2), Chrome JSON (Perfetto), JSONL or CSV");
  cmd->add_option("file", o->path, "trace file (.fay)")->required();
  cmd->add_option("--to", o->to, "ctf, chrome, jsonl or csv")
      ->required()
      ->check(CLI::IsMember({"ctf", "chrome", "jsonl", "csv"}));
  cmd->add_option("-o,--output", o->out, "output file (a directory for ctf); - for stdout")
      ->required();
  cmd->add_flag("--buffers", o->buffers, "csv, jsonl: include the captured buffers as hex");
  return [o] { return Run(*o); };
}

}  // namespace fay::cli
