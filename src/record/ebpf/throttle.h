// --loss=block: when the ring buffer passes its high-water mark, the traced processes are
// frozen (cgroup freezer) until the consumer has caught up. Freezing is invisible to the
// program: no signal, no stop state its parent could see; it simply runs later. The command is
// placed in a cgroup of its own, a child of the one it was started in, so every limit that
// applied to it still applies.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"

namespace fay::record::ebpf {

class Throttle {
  struct Key {};

 public:
  // Makes a freezable cgroup under fay's own (named for fay's pid). On cgroup v2 the command
  // is started inside it (cgroup_fd); otherwise Adopt moves it in.
  static Expected<std::unique_ptr<Throttle>> Create();
  int cgroup_fd() const { return fd_; }
  // Puts the held command (before it runs) in the cgroup, unless it was started there.
  Status Adopt(pid_t pid);
  Throttle(Key, std::string dir, std::string freeze_file, std::string frozen, std::string thawed,
           std::string home)
      : dir_(std::move(dir)),
        freeze_file_(std::move(freeze_file)),
        frozen_value_(std::move(frozen)),
        thawed_value_(std::move(thawed)),
        home_(std::move(home)) {}
  // Thaws, moves any process still inside back to where it came from, and removes the cgroup.
  ~Throttle();
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;

  // Starts the watchdog: a process of its own session that outlives fay. Should fay die
  // without ending the recording (kill -9), it kills every process left in the cgroup, frozen
  // ones included (cgroup.kill; on v1, a thaw then SIGKILL to each), and removes the cgroup, so
  // no grandchild runs on unrecorded or stays frozen. A normal end tells it to go.
  Status StartWatchdog();

  // Thread-safe: the governor freezes and thaws, a consumer that sees its ring past the mark
  // freezes too (the governor may be kept from running).
  void Freeze();
  void Thaw();
  bool frozen() const { return frozen_.load(std::memory_order_acquire); }
  uint64_t freezes() const {
    std::lock_guard lk(mu_);
    return freezes_;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string freeze_file_;
  std::string frozen_value_, thawed_value_;
  std::string home_;      // cgroup.procs of the cgroup the command came from
  int fd_ = -1;           // the cgroup directory (v2 only)
  int watchdog_fd_ = -1;  // the write end of the watchdog's pipe: EOF without a byte = fay died
  pid_t watchdog_pid_ = -1;
  mutable std::mutex mu_;  // orders the writes to freeze_file_ with frozen_
  std::atomic<bool> frozen_{false};
  uint64_t freezes_ = 0;
};

}  // namespace fay::record::ebpf
