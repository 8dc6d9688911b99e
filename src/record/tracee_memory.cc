#include "record/tracee_memory.h"

#include <sys/uio.h>

#include <cerrno>

namespace fay::record {

size_t ProcessVmMemory::Read(uint64_t addr, void* dst, size_t len) {
  if (addr == 0 || len == 0) return 0;
  size_t done = 0;
  char* out = static_cast<char*>(dst);
  while (done < len) {
    iovec local{out + done, len - done};
    iovec remote{reinterpret_cast<void*>(addr + done), len - done};
    ssize_t n = process_vm_readv(tid_, &local, 1, &remote, 1, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // A read that starts on an unmapped page fails outright; one that crosses into an unmapped
    // page stops there. Either way what was copied is what the tracee could see.
    break;
  }
  return done;
}

}  // namespace fay::record
