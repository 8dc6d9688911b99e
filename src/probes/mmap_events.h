// The executable mappings of every process, as the kernel makes them: per-CPU perf dummy
// events with mmap, comm (exec) and task (fork) records, as `perf record` keeps them. A process
// that exits before fay reads /proc/PID/maps (a short-lived PIE program, whose addresses are
// random) can still have its stack frames and usym() addresses named: the Symbolizer gets its
// mappings from these records.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace fay {

class Symbolizer;

class MmapEvents {
 public:
  // One event and ring per CPU, machine-wide (root, or perf_event_paranoid <= 0 with
  // CAP_PERFMON). Processes started before it are named from /proc while they run.
  static Expected<std::unique_ptr<MmapEvents>> Open();
  ~MmapEvents();
  MmapEvents(const MmapEvents&) = delete;
  MmapEvents& operator=(const MmapEvents&) = delete;

  // Everything recorded since the last call, fed to `sym` in time order.
  void Drain(Symbolizer& sym);
  // Records the kernel could not write (a ring full between two drains).
  uint64_t lost() const { return lost_; }

  struct Ring;  // mmap_events.cc

 private:
  MmapEvents() = default;
  std::vector<std::unique_ptr<Ring>> rings_;
  uint64_t lost_ = 0;
  // Records newer than the last drain's start, kept for the next: a CPU drained earlier in a
  // pass may still write older ones.
  struct Pending {
    uint64_t time;
    std::vector<uint8_t> bytes;
  };
  std::vector<Pending> pending_;
};

}  // namespace fay
