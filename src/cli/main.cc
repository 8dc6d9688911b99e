// fay: one query language for live tracing, recorded traces and clusters.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "common/child_process.h"
#include "version.h"

int main(int argc, char** argv) {
  fay::NoteInheritedFds();      // before any thread: see HeldChild::Spawn
  fay::NoteInheritedSignals();  // before fay blocks or handles any
  CLI::App app{"fay: declarative tracing compiled to eBPF"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fay " FAY_VERSION " (" FAY_GIT_REVISION ")");
  std::map<std::string, fay::cli::Runner> runners;
  runners["query"] = fay::cli::RegisterQuery(app);
  runners["explain"] = fay::cli::RegisterExplain(app);
  runners["probes"] = fay::cli::RegisterProbes(app);
  runners["doctor"] = fay::cli::RegisterDoctor(app);
  runners["info"] = fay::cli::RegisterInfo(app);
  runners["dump"] = fay::cli::RegisterDump(app);
  runners["record"] = fay::cli::RegisterRecord(app);
  runners["convert"] = fay::cli::RegisterConvert(app);
  runners["replay"] = fay::cli::RegisterReplay(app);
  runners["agent"] = fay::cli::RegisterAgent(app);
  runners["cluster"] = fay::cli::RegisterCluster(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are successes; every other parse error is a usage error, exit 2 as
    // strace and perf give, not the parser's own code (105 and up).
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto* sub : app.get_subcommands()) {
    auto it = runners.find(sub->get_name());
    if (it != runners.end()) return it->second();
  }
  return 1;
}
