// The signals that ask a flight recorder for a dump (`--dump-on SIGUSR1`). The handler only
// writes the signal's number to a pipe, which is all a handler may safely do; a thread of its own
// reads the pipe and asks for the dump. fay's own handler is reset by exec, so the recorded
// program keeps its own disposition of the signal.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>

#include "common/status.h"
#include "common/unique_fd.h"

namespace fay::trace {
class FlightControl;
}

namespace fay::record {

// "SIGUSR1", "USR1", "usr1" or "10": the signal's number, or 0 when it is none.
int ParseSignal(const std::string& name);
// Whether fay may take `sig` as a dump request: SIGUSR1, SIGUSR2 and the real-time signals.
// Not the ones that stop a recording, faults, or job control.
bool IsDumpSignal(int sig);

class DumpSignals {
  struct Key {};

 public:
  // One at a time per process (the handler has nowhere else to find its pipe).
  static Expected<std::unique_ptr<DumpSignals>> Start(const std::vector<int>& signals,
                                                      trace::FlightControl* flight);
  DumpSignals(Key, const std::vector<int>& signals, trace::FlightControl* flight);
  ~DumpSignals();  // stops the thread; the signals are ignored from then on
  DumpSignals(const DumpSignals&) = delete;
  DumpSignals& operator=(const DumpSignals&) = delete;

 private:
  std::vector<int> signals_;
  UniqueFd read_, write_;
  std::thread thread_;
};

}  // namespace fay::record
