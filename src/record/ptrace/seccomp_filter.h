// With `-e`, a seccomp-bpf filter in the tracee stops it only on the syscalls being recorded
// (SECCOMP_RET_TRACE); every other call runs at full speed. This is strace's --seccomp-bpf.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "common/status.h"
#include "schema/syscall_set.h"

namespace fay::record {

// RET_TRACE for the set's x86-64 syscalls, RET_ALLOW for everything else (including other
// ABIs, which the recorder does not decode).
std::vector<sock_filter> BuildSeccompFilter(const SyscallSet& traced);

// Installs the filter in the calling process (no_new_privs first, as the kernel requires of an
// unprivileged caller). Async-signal-safe: runs in the forked child before exec.
int InstallSeccompFilter(const std::vector<sock_filter>& filter);

}  // namespace fay::record
