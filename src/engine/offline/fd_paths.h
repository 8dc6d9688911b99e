// The path behind each open descriptor, per process, rebuilt from the recorded calls in file
// order: opens add, dups copy, close removes, fork copies the parent's table, chdir/fchdir move
// the working directory that relative paths join. It is what gives fd-based calls (read, write,
// fstat, close...) a `path` field offline.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "schema/syscall_event.h"

namespace fay {

class FdPaths {
 public:
  // The root process's working directory, from the trace header.
  void SetCwd(int32_t pid, std::string cwd);

  // The path of this call, then the table updated with it. Every recorded call must pass here
  // in file order. For opens it is the opened path (joined to the directory it is relative to);
  // for calls whose first descriptor argument is known, that descriptor's path; else empty.
  std::string_view Apply(const SyscallEvent& ev);
  void OnProcess(const ProcessEvent& ev);

 private:
  struct Proc {
    std::string cwd;
    std::unordered_map<int64_t, std::string> fds;
  };
  std::string Resolve(const Proc& p, int64_t dirfd, std::string_view path) const;

  std::unordered_map<int32_t, Proc> procs_;
  std::string current_;
};

// The NUL-terminated string captured for argument `arg` of ev (empty when not captured).
std::string_view CapturedString(const SyscallEvent& ev, int arg);

}  // namespace fay
