// SIGINT, SIGTERM and SIGHUP stop a recording. Both recorders block them while they create
// their threads (threads inherit the mask, and only the recording thread may take them), then
// install a handler; every early return must undo both, which this does.
#pragma once

#include <signal.h>

namespace fay::record {

class StopSignals {
 public:
  // Blocks the three signals on this thread.
  StopSignals();
  ~StopSignals() { Restore(); }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The mask from before construction: what a spawned command must run with.
  // Installs handler for the three signals, then unblocks them.
  void Handle(void (*handler)(int));
  // Puts the previous handlers (if Handle ran) and mask back. Idempotent.
  void Restore();

 private:
  sigset_t old_mask_{};
  struct sigaction old_actions_[3]{};
  bool handled_ = false;
  bool restored_ = false;
};

}  // namespace fay::record
