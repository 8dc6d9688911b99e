// Getting the in-process runtime into a process that is already running (fay query -p):
// every thread is stopped with ptrace, one of them calls dlopen on libfay_inproc.so and then
// the runtime's fay_inproc_attach, which patches while the others stay stopped, and all are let
// go. Apart from the patched functions the process then runs with no ptrace stop. The end
// does the same with fay_inproc_detach, which puts every function's bytes back.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace fay::inproc {

struct InjectResult {
  long patched = 0;         // what fay_inproc_attach returned
  uint64_t elapsed_ns = 0;  // from the first stop to the last thread let go
};

// A function about to be patched: the file as the process's maps name it, and its offset.
struct FunctionAt {
  std::string path;
  uint64_t file_offset = 0;
};

// Loads `library` into `pid` and starts its runtime on the region `spec` names ("FD,PID" of
// fay's region: the runtime opens /proc/PID/fd/FD). No thread is left stopped inside the first
// bytes of `functions` when the runtime patches them.
Expected<InjectResult> InjectRuntime(pid_t pid, const std::string& library, const std::string& spec,
                                     const std::vector<FunctionAt>& functions);

// Calls fay_inproc_detach in `pid`: every patched function gets its bytes back. Returns the
// functions restored.
Expected<long> EjectRuntime(pid_t pid, const std::string& library);

}  // namespace fay::inproc
