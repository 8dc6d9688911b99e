#include "record/ptrace/seccomp_filter.h"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace fay::record {
namespace {

sock_filter Stmt(uint16_t code, uint32_t k) {
  return sock_filter{code, 0, 0, k};
}
sock_filter Jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
  return sock_filter{code, jt, jf, k};
}

}  // namespace

std::vector<sock_filter> BuildSeccompFilter(const SyscallSet& traced) {
  std::vector<int> nrs = traced.Numbers();
  std::vector<sock_filter> f;
  f.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  // Not x86-64: allow (skip the nr load, the compares and the trace return).
  f.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
  f.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  // One compare per traced number, each jumping to the RET_TRACE at the end. Jump offsets are
  // 8-bit, so long sets go in runs that each end on their own RET_TRACE.
  constexpr size_t kRun = 200;
  for (size_t start = 0; start < nrs.size(); start += kRun) {
    size_t n = std::min(kRun, nrs.size() - start);
    for (size_t i = 0; i < n; ++i) {
      uint8_t to_trace = static_cast<uint8_t>(n - i);  // past the remaining compares + ALLOW jump
      f.push_back(
          Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nrs[start + i]), to_trace, 0));
    }
    // None of this run matched: skip its RET_TRACE.
    f.push_back(Jump(BPF_JMP | BPF_JA, 1, 0, 0));
    f.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_TRACE));
  }
  f.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  return f;
}

int InstallSeccompFilter(const std::vector<sock_filter>& filter) {
  sock_fprog prog{static_cast<unsigned short>(filter.size()),
                  const_cast<sock_filter*>(filter.data())};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return static_cast<int>(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
}

}  // namespace fay::record
