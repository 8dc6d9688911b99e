// BuildSeccompFilter: its shape, its verdict for every syscall number (run through a small
// classic-BPF interpreter), and the kernel's verdict (a child installs the filter and, with no
// tracer attached, sees ENOSYS for the traced calls and normal results for the others).
#include "record/ptrace/seccomp_filter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "schema/syscall_set.h"

namespace fay::record {
namespace {

// Runs the filter over one seccomp_data the way the kernel would: only the instructions
// BuildSeccompFilter may emit are accepted; anything else fails the test.
uint32_t RunFilter(const std::vector<sock_filter>& f, uint32_t arch, uint32_t nr) {
  seccomp_data d{};
  d.nr = static_cast<int>(nr);
  d.arch = arch;
  uint32_t acc = 0;
  size_t pc = 0;
  for (size_t steps = 0; steps <= f.size(); ++steps) {
    if (pc >= f.size()) {
      ADD_FAILURE() << "ran off the end of the filter at " << pc;
      return 0xdeadbeef;
    }
    const sock_filter& i = f[pc];
    switch (i.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (i.k + 4 > sizeof d) {
          ADD_FAILURE() << "load past seccomp_data at " << pc;
          return 0xdeadbeef;
        }
        std::memcpy(&acc, reinterpret_cast<const char*>(&d) + i.k, 4);
        ++pc;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += 1 + (acc == i.k ? i.jt : i.jf);
        break;
      case BPF_JMP | BPF_JA:
        pc += 1 + i.k;
        break;
      case BPF_RET | BPF_K:
        return i.k;
      default:
        ADD_FAILURE() << "unexpected instruction code " << i.code << " at " << pc;
        return 0xdeadbeef;
    }
  }
  ADD_FAILURE() << "no return within " << f.size() << " steps";
  return 0xdeadbeef;
}

SyscallSet SetOf(std::initializer_list<int> nrs) {
  SyscallSet s;
  for (int nr : nrs) s.Add(nr);
  return s;
}

TEST(BuildSeccompFilter, OneSyscallIsEightInstructions) {
  std::vector<sock_filter> f = BuildSeccompFilter(SetOf({SYS_getppid}));
  ASSERT_EQ(f.size(), 8u);
  EXPECT_EQ(f[0].code, BPF_LD | BPF_W | BPF_ABS);
  EXPECT_EQ(f[0].k, offsetof(seccomp_data, arch));
  EXPECT_EQ(f[1].code, BPF_JMP | BPF_JEQ | BPF_K);
  EXPECT_EQ(f[1].k, AUDIT_ARCH_X86_64);
  EXPECT_EQ(f[1].jt, 1);
  EXPECT_EQ(f[1].jf, 0);
  EXPECT_EQ(f[2].code, BPF_RET | BPF_K);
  EXPECT_EQ(f[2].k, SECCOMP_RET_ALLOW);
  EXPECT_EQ(f[3].code, BPF_LD | BPF_W | BPF_ABS);
  EXPECT_EQ(f[3].k, offsetof(seccomp_data, nr));
  EXPECT_EQ(f[4].code, BPF_JMP | BPF_JEQ | BPF_K);
  EXPECT_EQ(f[4].k, static_cast<uint32_t>(SYS_getppid));
  EXPECT_EQ(f[4].jt, 1);  // over the JA, onto RET_TRACE
  EXPECT_EQ(f[4].jf, 0);
  EXPECT_EQ(f[5].code, BPF_JMP | BPF_JA);
  EXPECT_EQ(f[5].k, 1u);
  EXPECT_EQ(f[6].code, BPF_RET | BPF_K);
  EXPECT_EQ(f[6].k, SECCOMP_RET_TRACE);
  EXPECT_EQ(f[7].code, BPF_RET | BPF_K);
  EXPECT_EQ(f[7].k, SECCOMP_RET_ALLOW);
}

TEST(BuildSeccompFilter, EmptySetAllowsEverything) {
  std::vector<sock_filter> f = BuildSeccompFilter(SyscallSet());
  EXPECT_EQ(f.size(), 5u);
  for (uint32_t nr = 0; nr < SyscallSet::kMaxNr; ++nr)
    ASSERT_EQ(RunFilter(f, AUDIT_ARCH_X86_64, nr), SECCOMP_RET_ALLOW) << nr;
}

TEST(BuildSeccompFilter, LongSetsSplitIntoRunsOf200) {
  // Each run of up to 200 compares ends on its own JA and RET_TRACE.
  SyscallSet all = SyscallSet::All();
  size_t n = all.Numbers().size();
  ASSERT_GT(n, 200u);
  ASSERT_LE(n, 400u);
  EXPECT_EQ(BuildSeccompFilter(all).size(), 4 + n + 2 * 2 + 1);
  SyscallSet every;
  for (int nr = 0; nr < SyscallSet::kMaxNr; ++nr) every.Add(nr);
  std::vector<sock_filter> f = BuildSeccompFilter(every);
  EXPECT_EQ(f.size(), 4 + 512 + 3 * 2 + 1);  // runs of 200, 200 and 112
  size_t traces = 0;
  for (const sock_filter& i : f) {
    if (i.code == (BPF_JMP | BPF_JEQ | BPF_K) && i.k != AUDIT_ARCH_X86_64) {
      EXPECT_LE(i.jt, 200) << "jump offset out of an 8-bit run";
    }
    traces += i.code == (BPF_RET | BPF_K) && i.k == SECCOMP_RET_TRACE;
  }
  EXPECT_EQ(traces, 3u);
  for (uint32_t nr = 0; nr < SyscallSet::kMaxNr; ++nr)
    ASSERT_EQ(RunFilter(f, AUDIT_ARCH_X86_64, nr), SECCOMP_RET_TRACE) << nr;
  EXPECT_EQ(RunFilter(f, AUDIT_ARCH_X86_64, SyscallSet::kMaxNr), SECCOMP_RET_ALLOW);
}

TEST(BuildSeccompFilter, VerdictForEveryNumberMatchesTheSet) {
  std::vector<SyscallSet> sets = {SetOf({SYS_getppid}), SetOf({0, 1, 2, 3}),
                                  SetOf({SYS_read, SYS_write, SYS_openat, SYS_execve, 435}),
                                  SyscallSet::All()};
  auto file = ParseSyscallSet("%file");
  ASSERT_TRUE(file.ok()) << file.status().message();
  sets.push_back(*file);
  auto not_memory = ParseSyscallSet("!%memory");
  ASSERT_TRUE(not_memory.ok()) << not_memory.status().message();
  sets.push_back(*not_memory);
  // Every other number, so runs span wide gaps too.
  SyscallSet every_other;
  for (int nr = 0; nr < SyscallSet::kMaxNr; nr += 2) every_other.Add(nr);
  sets.push_back(every_other);
  for (size_t s = 0; s < sets.size(); ++s) {
    std::vector<sock_filter> f = BuildSeccompFilter(sets[s]);
    for (uint32_t nr = 0; nr < SyscallSet::kMaxNr + 8; ++nr) {
      uint32_t want =
          sets[s].Contains(static_cast<int>(nr)) ? SECCOMP_RET_TRACE : SECCOMP_RET_ALLOW;
      ASSERT_EQ(RunFilter(f, AUDIT_ARCH_X86_64, nr), want) << "set " << s << " nr " << nr;
    }
    // Other ABIs run unfiltered whatever the number.
    EXPECT_EQ(RunFilter(f, AUDIT_ARCH_I386, SYS_getppid), SECCOMP_RET_ALLOW);
    EXPECT_EQ(RunFilter(f, AUDIT_ARCH_AARCH64, 0), SECCOMP_RET_ALLOW);
  }
}

// In a forked child: install the filter, then report each call's errno (0 for success) through
// the exit status as a bit per call. With no tracer, RET_TRACE fails the call with ENOSYS.
int ChildResults(const SyscallSet& traced, const std::vector<std::function<long()>>& calls) {
  std::vector<sock_filter> f = BuildSeccompFilter(traced);
  pid_t pid = fork();
  if (pid == 0) {
    if (InstallSeccompFilter(f) != 0) _exit(255);
    int bits = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      errno = 0;
      long r = calls[i]();
      if (r == -1 && errno == ENOSYS) bits |= 1 << i;
    }
    _exit(bits);
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  return WEXITSTATUS(status);
}

TEST(InstallSeccompFilter, TracedCallsFailWithEnosysWithoutATracer) {
  std::vector<std::function<long()>> calls = {
      [] { return syscall(SYS_getppid); },
      [] { return syscall(SYS_getpid); },
      [] { return syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY); },
      [] { return syscall(SYS_getuid); },
  };
  // Only getppid is traced: bit 0.
  EXPECT_EQ(ChildResults(SetOf({SYS_getppid}), calls), 0b0001);
  // %file holds openat and not the others: bit 2.
  auto file = ParseSyscallSet("%file");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ChildResults(*file, calls), 0b0100);
  // Nothing traced: every call runs.
  EXPECT_EQ(ChildResults(SyscallSet(), calls), 0);
  // getpid and getuid: bits 1 and 3.
  EXPECT_EQ(ChildResults(SetOf({SYS_getpid, SYS_getuid}), calls), 0b1010);
}

TEST(InstallSeccompFilter, AlmostEverythingTraced) {
  // Every number but the two the child needs to end: the long, multi-run filter holds in the
  // kernel as it does in RunFilter.
  SyscallSet most = SyscallSet::All();
  most.Remove(SYS_exit);
  most.Remove(SYS_exit_group);
  std::vector<std::function<long()>> calls = {[] { return syscall(SYS_getpid); },
                                              [] { return syscall(SYS_getppid); }};
  EXPECT_EQ(ChildResults(most, calls), 0b11);
}

}  // namespace
}  // namespace fay::record
