// Reads a stopped tracee's memory with process_vm_readv: one syscall per buffer, no ptrace
// word-at-a-time peeking.
#pragma once

#include <sys/types.h>

#include "schema/syscall_capture.h"

namespace fay::record {

class ProcessVmMemory : public TraceeMemory {
 public:
  explicit ProcessVmMemory(pid_t tid) : tid_(tid) {}
  size_t Read(uint64_t addr, void* dst, size_t len) override;

 private:
  pid_t tid_;
};

}  // namespace fay::record
