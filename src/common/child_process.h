// Starting a traced command held at the starting line: the child exists (so its pid can be put
// in the probes' scope) but does not exec until Release(), after the probes are attached.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace fay {

// Splits a command line into words the way a shell would for simple commands: whitespace
// separates, single and double quotes group, backslash escapes.
Expected<std::vector<std::string>> SplitCommand(const std::string& cmd);

// Remembers the descriptors fay was started with (beyond stdin, stdout and stderr), the only
// ones a command it spawns may inherit. Call first thing in main(), before any thread exists;
// calling it again takes a new snapshot. Without it, a spawned command inherits whatever is
// open without close-on-exec.
void NoteInheritedFds();

// Remembers the signal mask fay was started with and which signals it was started ignoring,
// before fay blocks or handles any. Call first thing in main(), before any thread exists.
void NoteInheritedSignals();

// In a forked child, before its exec: gives the command exactly the dispositions and mask fay
// inherited (strace's rule: a command started under nohup, or with `trap '' INT`, behaves the
// same traced). Handlers fay installed would be reset by the exec anyway; a signal fay set to
// SIG_IGN, or one it blocks for its signalfd, would not. Async-signal-safe. Without
// NoteInheritedSignals: an empty mask and every disposition at its default.
void RestoreInheritedSignals();

// The descriptors a forked child closes before its exec: all above stderr that fay was not
// started with, but `keep` (the child's own pipe ends). Made before the fork, since the child
// may not allocate; CloseInChild is async-signal-safe. Closes nothing without NoteInheritedFds.
class StrayFds {
 public:
  explicit StrayFds(std::vector<int> keep);
  void CloseInChild() const;

 private:
  std::vector<std::pair<unsigned, unsigned>> ranges_;
};

class HeldChild {
 public:
  HeldChild() = default;
  HeldChild(HeldChild&&) noexcept;
  HeldChild& operator=(HeldChild&&) noexcept;
  ~HeldChild();  // a child never released is killed and reaped

  struct SpawnOptions {
    std::string exe;               // the program to exec; empty: argv[0] searched in PATH
    bool die_with_parent = false;  // keep a death signal on fay's death after the exec too
    // A cgroup v2 directory fd to start the child in (clone3 CLONE_INTO_CGROUP): moving it
    // there afterwards costs a synchronize_rcu, about 10 ms. -1: fay's own cgroup.
    int cgroup_fd = -1;
    int death_signal = SIGKILL;  // with die_with_parent
    // NAME=VALUE entries set in the command's environment (over fay's), and a descriptor it
    // keeps open across the exec (close-on-exec in fay); -1: none.
    std::vector<std::string> env;
    int inherit_fd = -1;
  };
  static Expected<HeldChild> Spawn(const std::vector<std::string>& argv,
                                   const SpawnOptions& options);
  static Expected<HeldChild> Spawn(const std::vector<std::string>& argv) {
    return Spawn(argv, SpawnOptions{});
  }
  // Lets the child exec. Fails (kNotFound) when exec failed, e.g. no such program.
  Status Release();
  pid_t pid() const { return pid_; }
  // Reaps the child if it exited; returns true and its exit status (128+signal when killed).
  bool TryWait(int* status);

 private:
  pid_t pid_ = -1;
  int go_fd_ = -1;   // parent writes one byte to release
  int err_fd_ = -1;  // child writes errno if exec fails; EOF on success (close-on-exec)
  bool released_ = false;
  bool reaped_ = false;
  std::string program_;
};

}  // namespace fay
