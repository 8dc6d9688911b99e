// `fay doctor`: really exercises each kernel capability fay may use and says why one is refused.
#pragma once

#include <string>
#include <vector>

namespace fay {

struct DoctorCheck {
  bool ok = false;
  // fay cannot run live queries without it (bpf, tracepoints, ring buffers, uprobes, tracefs).
  bool required = false;
  // One line: "kernel 6.18.44 with BTF (/sys/kernel/btf/vmlinux)",
  // "kprobes: no kprobe PMU in /sys/bus/event_source/devices (kernel built without ...)".
  std::string text;
  // What to do about a refused capability; empty when ok.
  std::string fix;
};

struct DoctorReport {
  std::vector<DoctorCheck> checks;
  // Every required check passed.
  bool ready() const;
};

// Runs every check. As root it mounts tracefs when it is missing, as fay itself would.
DoctorReport RunDoctor();

// "EPERM (Operation not permitted)".
std::string ErrnoText(int err);

}  // namespace fay
