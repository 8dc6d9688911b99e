// The ptrace backend: PTRACE_SEIZE with fork/vfork/clone/exec tracing, PTRACE_GET_SYSCALL_INFO
// at each stop, buffers through process_vm_readv, and a seccomp filter when -e narrows the set.
#pragma once

#include "record/recorder.h"

namespace fay::record {

Expected<RecordResult> RecordWithPtrace(const RecordOptions& options);

}  // namespace fay::record
