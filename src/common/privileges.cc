#include "common/privileges.h"

#include <linux/capability.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <fstream>
#include <string>

namespace fay {

Privileges CurrentPrivileges() {
  Privileges p;
  p.root = geteuid() == 0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const uint64_t eff = std::stoull(line.substr(7), nullptr, 16);
    auto has = [&](int cap) { return (eff >> cap) & 1; };
    p.bpf = has(CAP_BPF);
    p.perfmon = has(CAP_PERFMON);
    p.sys_ptrace = has(CAP_SYS_PTRACE);
    p.sys_admin = has(CAP_SYS_ADMIN);
  }
  return p;
}

std::vector<std::string> MissingCapabilities(const Privileges& p) {
  std::vector<std::string> out;
  if (p.root) return out;
  // CAP_SYS_ADMIN stands for CAP_BPF and CAP_PERFMON, as the kernel lets it.
  if (!p.bpf && !p.sys_admin) out.push_back("CAP_BPF");
  if (!p.perfmon && !p.sys_admin) out.push_back("CAP_PERFMON");
  if (!p.sys_ptrace) out.push_back("CAP_SYS_PTRACE");
  return out;
}

std::string SetcapCommand() {
  char path[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return std::string("sudo setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep ") +
         (n > 0 ? std::string(path, static_cast<size_t>(n)) : "$(command -v fay)");
}

std::string PrivilegeFix() {
  const Privileges p = CurrentPrivileges();
  if (p.root)
    return "fay runs as root, so this is not a missing privilege: a kernel policy (lockdown, a "
           "security module) or the event itself refuses it";
  const std::vector<std::string> missing = MissingCapabilities(p);
  if (missing.empty())
    return "fix: fay has CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE, and this kernel still refuses "
           "this to a user who is not root (kernel-placed uprobes, on some kernels): run fay as "
           "root; uprobes of -c and -p commands run in the process and need no kernel uprobe";
  std::string names;
  for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
  return "fix: run as root, or grant fay " + names + ": " + SetcapCommand();
}

}  // namespace fay
