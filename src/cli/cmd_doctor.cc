// fay doctor: one verdict per line about what this machine lets fay do.
#include <fmt/core.h>

#include "cli/commands.h"
#include "probes/doctor.h"

namespace fay::cli {

Runner RegisterDoctor(CLI::App& app) {
  app.add_subcommand("doctor", "Check what this machine permits: BPF, tracefs, uprobes, ptrace...");
  return [] {
    DoctorReport report = RunDoctor();
    for (const auto& c : report.checks) {
      fmt::print("{:<6}{}\n", c.ok ? "ok" : "no", c.text);
      if (!c.ok && !c.fix.empty()) fmt::print("      fix: {}\n", c.fix);
    }
    if (!report.ready()) {
      fmt::print(stderr, "fay cannot run live queries here: fix the required checks above\n");
      return 1;
    }
    return 0;
  };
}

}  // namespace fay::cli
