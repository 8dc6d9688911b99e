// What fay may do here: root, or the capabilities a `setcap` on fay gives an unprivileged user
// (CAP_BPF and CAP_PERFMON for probes, CAP_SYS_PTRACE for -p and fay record), and the exact
// command that grants the missing ones to this very binary.
#pragma once

#include <string>
#include <vector>

namespace fay {

struct Privileges {
  bool root = false;  // effective uid 0
  bool bpf = false, perfmon = false, sys_ptrace = false, sys_admin = false;
};

// The calling process's, from its effective capability set (/proc/self/status).
Privileges CurrentPrivileges();

// Which of CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE the process lacks (none for root).
std::vector<std::string> MissingCapabilities(const Privileges& p);

// "sudo setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep /usr/local/bin/fay": this binary's path.
std::string SetcapCommand();

// The fix for an operation the kernel refused with EPERM or EACCES, as one "fix: ..." line.
std::string PrivilegeFix();

}  // namespace fay
