#include "record/stop_signals.h"

#include <pthread.h>

namespace fay::record {
namespace {

constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGHUP};

}  // namespace

StopSignals::StopSignals() {
  sigset_t block;
  sigemptyset(&block);
  for (int s : kStopSignals) sigaddset(&block, s);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask_);
}

void StopSignals::Handle(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &sa, &old_actions_[i]);
  handled_ = true;
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void StopSignals::Restore() {
  if (restored_) return;
  restored_ = true;
  if (handled_)
    for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &old_actions_[i], nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace fay::record
