#include "schema/decode/siginfo.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <vector>

namespace fay {
namespace {

// A kernel_siginfo as x86-64 lays it out: signo, errno, code, then the union at byte 16.
struct Info {
  std::vector<uint8_t> b = std::vector<uint8_t>(48);
  Info(int signo, int code) {
    Put<int32_t>(0, signo);
    Put<int32_t>(8, code);
  }
  template <typename T>
  Info& Put(size_t off, T v) {
    std::memcpy(b.data() + off, &v, sizeof v);
    return *this;
  }
};

TEST(Siginfo, FromAProcessNamesTheSender) {
  EXPECT_EQ(FormatSiginfo(SIGUSR1, Info(SIGUSR1, SI_USER).Put<int32_t>(16, 42).b),
            "{si_signo=SIGUSR1, si_code=SI_USER, si_pid=42, si_uid=0}");
  EXPECT_EQ(FormatSiginfo(SIGUSR1, Info(SIGUSR1, SI_TKILL).Put<int32_t>(16, 7).Put(20, 1000u).b),
            "{si_signo=SIGUSR1, si_code=SI_TKILL, si_pid=7, si_uid=1000}");
  EXPECT_EQ(
      FormatSiginfo(SIGUSR2, Info(SIGUSR2, SI_QUEUE).Put<int32_t>(16, 7).Put<int64_t>(24, 42).b),
      "{si_signo=SIGUSR2, si_code=SI_QUEUE, si_pid=7, si_uid=0, si_int=42, si_ptr=0x2a}");
  EXPECT_EQ(FormatSiginfo(SIGALRM, Info(SIGALRM, SI_TIMER).Put<int32_t>(16, 3).b),
            "{si_signo=SIGALRM, si_code=SI_TIMER, si_timerid=0x3, si_overrun=0, si_int=0, "
            "si_ptr=NULL}");
}

TEST(Siginfo, ChildStatusIsANumberOnExitAndASignalOtherwise) {
  Info exited(SIGCHLD, CLD_EXITED);
  exited.Put<int32_t>(16, 99).Put<int32_t>(24, 3).Put<int64_t>(32, 153).Put<int64_t>(40, 0);
  EXPECT_EQ(FormatSiginfo(SIGCHLD, exited.b),
            "{si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=99, si_uid=0, si_status=3, "
            "si_utime=153 /* 1.53 s */, si_stime=0}");
  Info killed(SIGCHLD, CLD_KILLED);
  killed.Put<int32_t>(16, 99).Put<int32_t>(24, SIGTERM);
  EXPECT_EQ(FormatSiginfo(SIGCHLD, killed.b),
            "{si_signo=SIGCHLD, si_code=CLD_KILLED, si_pid=99, si_uid=0, si_status=SIGTERM, "
            "si_utime=0, si_stime=0}");
}

TEST(Siginfo, FaultsGiveTheAddressAndKernelSignalsNothingMore) {
  EXPECT_EQ(FormatSiginfo(SIGSEGV, Info(SIGSEGV, SEGV_MAPERR).Put<uint64_t>(16, 16).b),
            "{si_signo=SIGSEGV, si_code=SEGV_MAPERR, si_addr=0x10}");
  EXPECT_EQ(FormatSiginfo(SIGSEGV, Info(SIGSEGV, SI_KERNEL).b),
            "{si_signo=SIGSEGV, si_code=SI_KERNEL, si_addr=NULL}");
  EXPECT_EQ(FormatSiginfo(SIGHUP, Info(SIGHUP, SI_KERNEL).b),
            "{si_signo=SIGHUP, si_code=SI_KERNEL}");
  EXPECT_EQ(FormatSiginfo(SIGSYS, Info(SIGSYS, 1)
                                      .Put<uint64_t>(16, 0x401000)
                                      .Put<int32_t>(24, 39)
                                      .Put<uint32_t>(28, 0xc000003e)
                                      .b),
            "{si_signo=SIGSYS, si_code=SYS_SECCOMP, si_call_addr=0x401000, "
            "si_syscall=__NR_getpid, si_arch=AUDIT_ARCH_X86_64}");
}

TEST(Siginfo, ErrnoUnknownCodesAndNothingCaptured) {
  EXPECT_EQ(
      FormatSiginfo(
          SIGIO, Info(SIGIO, POLL_IN).Put<int32_t>(4, 5).Put<int64_t>(16, 1).Put<int32_t>(24, 3).b),
      "{si_signo=SIGIO, si_code=POLL_IN, si_errno=EIO, si_band=1, si_fd=3}");
  EXPECT_EQ(FormatSiginfo(SIGCHLD, Info(SIGCHLD, 77).b),
            "{si_signo=SIGCHLD, si_code=77, si_pid=0, si_uid=0, si_status=0, si_utime=0, "
            "si_stime=0}");
  EXPECT_EQ(FormatSiginfo(SIGCHLD, {}), "{si_signo=SIGCHLD}");
  EXPECT_EQ(FormatSiginfo(SIGUSR1, Info(SIGUSR1, SI_USER).Put<int32_t>(16, 1).Put(20, ~0u).b),
            "{si_signo=SIGUSR1, si_code=SI_USER, si_pid=1, si_uid=-1}");
  EXPECT_EQ(FormatSiginfo(0, std::vector<uint8_t>(48)), "{}");  // waitid with WNOHANG, none
  EXPECT_EQ(SignalLine(SIGUSR2, Info(SIGUSR2, SI_USER).b),
            "--- SIGUSR2 {si_signo=SIGUSR2, si_code=SI_USER, si_pid=0, si_uid=0} ---");
}

}  // namespace
}  // namespace fay
