// The consumer's folding of attempts the kernel restarts unseen (kEventInterrupted) into the
// call that completes them.
#include <gtest/gtest.h>

#include <sys/syscall.h>

#include <vector>

#include "record/ebpf/restart_merger.h"

namespace fay::record::ebpf {
namespace {

SyscallEvent Ev(int32_t tid, int32_t nr, int64_t ret, uint64_t entry, uint64_t exit,
                uint32_t flags = 0) {
  SyscallEvent ev;
  ev.tid = tid;
  ev.pid = tid;
  ev.nr = nr;
  ev.ret = ret;
  ev.entry_ns = entry;
  ev.exit_ns = exit;
  ev.flags = flags;
  ev.args = {1, 2, 3, 4, 5, 6};
  return ev;
}

TEST(RestartMergerTest, AnAttemptTheKernelMakesAgainTakesNoPlaceAndLendsItsEntryTime) {
  RestartMerger m;
  std::vector<SyscallEvent> calls = {
      Ev(7, SYS_futex, -512, 100, 200, kEventInterrupted),
      Ev(8, SYS_getppid, 1, 150, 160),
      Ev(7, SYS_futex, 0, 300, 900),
  };
  EXPECT_EQ(m.Apply(&calls), 1u);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].nr, SYS_getppid);
  EXPECT_EQ(calls[1].nr, SYS_futex);
  EXPECT_EQ(calls[1].ret, 0);
  EXPECT_EQ(calls[1].entry_ns, 100u);
  EXPECT_EQ(calls[1].exit_ns, 900u);
  EXPECT_EQ(calls[1].flags, 0u);
  EXPECT_EQ(m.pending(), 0u);
}

TEST(RestartMergerTest, RestartSyscallBecomesTheCallItCompletesAcrossBatchesAndFreezes) {
  RestartMerger m;
  SyscallEvent first = Ev(7, SYS_clock_nanosleep, -516, 100, 200, kEventInterrupted);
  CapturedBuffer req;
  req.arg = 2;
  req.length = 16;
  req.bytes.assign(16, 0xab);
  first.buffers.push_back(req);
  std::vector<SyscallEvent> calls = {first};
  EXPECT_EQ(m.Apply(&calls), 1u);
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(m.pending(), 1u);
  // Frozen again while restart_syscall waits: it too is folded.
  calls = {Ev(7, SYS_restart_syscall, -516, 250, 300, kEventInterrupted)};
  EXPECT_EQ(m.Apply(&calls), 1u);
  calls = {Ev(7, SYS_restart_syscall, 0, 350, 700)};
  EXPECT_EQ(m.Apply(&calls), 0u);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].nr, SYS_clock_nanosleep);
  EXPECT_EQ(calls[0].args, first.args);
  EXPECT_EQ(calls[0].entry_ns, 100u);
  EXPECT_EQ(calls[0].exit_ns, 700u);
  EXPECT_EQ(calls[0].ret, 0);
  ASSERT_EQ(calls[0].buffers.size(), 1u);
  EXPECT_EQ(calls[0].buffers[0].bytes, req.bytes);
  EXPECT_EQ(m.pending(), 0u);
}

TEST(RestartMergerTest, AnAttemptASignalInterruptedStaysAndSoDoesADifferentNextCall) {
  RestartMerger m;
  std::vector<SyscallEvent> calls = {
      // Not marked: a signal was pending, and ptrace shows this attempt too.
      Ev(7, SYS_read, -512, 100, 200),
      Ev(9, SYS_futex, -512, 100, 200, kEventInterrupted),
      // The thread did something else next (it was made to exit): kept as it is.
      Ev(9, SYS_exit, 0, 300, 0, kEventNoExit),
  };
  EXPECT_EQ(m.Apply(&calls), 1u);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].ret, -512);
  EXPECT_EQ(calls[1].nr, SYS_exit);
  EXPECT_EQ(calls[1].entry_ns, 300u);
  EXPECT_EQ(m.pending(), 0u);
}

}  // namespace
}  // namespace fay::record::ebpf
