// The replay run: workers, ordering, timing, progress and the tallies the summary prints.
//
// One worker thread per recorded thread by default (--threads auto). With --threads N < the
// recorded thread count each worker takes several recorded threads and runs whichever has its
// next call ready, so a worker never waits on a thread it owns itself.
//
// Waiting needs no lock: each recorded thread publishes how many calls it has completed in its
// own cache line; a call's dependencies name (thread, count) pairs, and a worker waits on the
// counter it needs (std::atomic::wait, a futex). Per-process fd tables have their own lock,
// shared by that process's threads only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "replay/sandbox.h"
#include "replay/schedule.h"
#include "replay/verify.h"

namespace fay::replay {

enum class Timing : uint8_t { kAsap, kOriginal, kScaled };

struct ReplayOptions {
  bool verify = false;
  Timing timing = Timing::kAsap;
  double speed = 1.0;    // kScaled: recorded gaps are divided by this
  unsigned threads = 0;  // 0: one worker per recorded thread
  bool progress = false;
  size_t max_listed = 50;  // mismatches listed in full
  // Files --prepare made other than recorded (set-id bits stripped, owners not given): their
  // stat results verify without those differences, counted in ReplayReport::as_prepared.
  PreparedDiffs* prepared = nullptr;
};

struct Mismatch {
  uint64_t index = 0;  // the call's position in the trace
  int32_t tid = 0;
  int nr = 0;
  std::string path;  // the call's first path argument, if it has one
  std::string expected;
  std::string actual;
};

struct ReplayReport {
  uint64_t calls = 0;
  uint64_t replayed = 0;
  uint64_t emulated = 0;
  uint64_t verified = 0;     // replayed calls whose result (and data) matched
  uint64_t as_prepared = 0;  // of them, stat results that differ only as --prepare made them
  uint64_t withheld = 0;     // replayed calls whose setuid/setgid bits were left out
  uint64_t mismatches = 0;
  std::vector<Mismatch> listed;            // the first max_listed, in trace order
  std::map<int, uint64_t> emulated_by_nr;  // syscall number -> calls
  // Of the emulated, those a signal cut short in the recording: (number, errno) -> calls.
  std::map<std::pair<int, int>, uint64_t> interrupted;
  std::map<int, uint64_t> mismatch_by_nr;
  uint64_t wall_ns = 0;
  uint64_t recorded_ns = 0;
  unsigned workers = 0;
  unsigned recorded_threads = 0;
  uint64_t processes = 0;
};

Expected<ReplayReport> Replay(const Schedule& schedule, const Sandbox& sandbox,
                              const ReplayOptions& options);

// Replays a one-thread trace while it still loads (CallStream::streaming): call k runs once `gate`
// allows it, and the replay ends when the gate has ended and every call ran. The report's
// calls and recorded time are the loader's to fill in (they are known only at the end).
struct StreamedTrace {
  bool lazy = false;
  std::string path;
  std::string cwd;
  uint64_t expected_calls = 0;  // for the progress bar
  static StreamedTrace Of(const CallStream& calls) {
    return {calls.lazy(), calls.path(), calls.info().cwd, calls.expected()};
  }
};
Expected<ReplayReport> ReplayStreaming(const StreamedTrace& trace, const CallGate& gate,
                                       const Sandbox& sandbox, const ReplayOptions& options);

// "-2 (ENOENT)", "3": how a return value prints in a mismatch.
std::string FormatRet(int64_t ret);

}  // namespace fay::replay
