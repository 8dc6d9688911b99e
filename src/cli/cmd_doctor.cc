// fay doctor: one verdict per line about what this machine lets fay do.
#include <fmt/core.h>

#include "cli/commands.h"
#include "probes/doctor.h"
#include "record/ebpf/ebpf_recorder.h"

namespace fay::cli {

Runner RegisterDoctor(CLI::App& app) {
  app.add_subcommand("doctor", "Check what this machine permits: BPF, tracefs, uprobes, ptrace...");
  return [] {
    DoctorReport report = RunDoctor();
    // Not required for live queries: fay record falls back to ptrace without it.
    DoctorCheck rec;
    Status st = record::CheckEbpfRecording();
    rec.ok = st.ok();
    if (rec.ok) {
      rec.text = "fay record: eBPF backend (the default; probes load and verify)";
    } else {
      std::string why = st.message();
      if (size_t nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
      rec.text = "fay record: eBPF backend unavailable, records with ptrace: " + why;
      rec.fix = "run as root on a kernel with BTF, bpf_loop and ring buffers (5.17 or later)";
    }
    report.checks.push_back(rec);
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
