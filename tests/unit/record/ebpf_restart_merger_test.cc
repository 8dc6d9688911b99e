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

ProcessEvent Exit(int32_t tid, uint64_t t) {
  ProcessEvent pe;
  pe.kind = ProcessEventKind::kExit;
  pe.pid = pe.tid = tid;
  pe.time_ns = t;
  return pe;
}

TEST(RestartMergerTest, AnAttemptTheKernelMakesAgainTakesNoPlaceAndLendsItsEntryTime) {
  RestartMerger m;
  std::vector<SyscallEvent> calls = {
      Ev(7, SYS_futex, -512, 100, 200, kEventInterrupted),
      Ev(8, SYS_getppid, 1, 150, 160),
      Ev(7, SYS_futex, 0, 300, 900),
  };
  m.Apply(&calls, {});
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].nr, SYS_getppid);
  EXPECT_EQ(calls[1].nr, SYS_futex);
  EXPECT_EQ(calls[1].ret, 0);
  EXPECT_EQ(calls[1].entry_ns, 100u);
  EXPECT_EQ(calls[1].exit_ns, 900u);
  EXPECT_EQ(calls[1].flags, 0u);
  EXPECT_EQ(m.folded(), 1u);
  EXPECT_EQ(m.held(), 0u);
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
  m.Apply(&calls, {});
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(m.held(), 1u);
  // Frozen again while restart_syscall waits: it too is folded.
  calls = {Ev(7, SYS_restart_syscall, -516, 250, 300, kEventInterrupted)};
  m.Apply(&calls, {});
  EXPECT_TRUE(calls.empty());
  calls = {Ev(7, SYS_restart_syscall, 0, 350, 700)};
  m.Apply(&calls, {});
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].nr, SYS_clock_nanosleep);
  EXPECT_EQ(calls[0].args, first.args);
  EXPECT_EQ(calls[0].entry_ns, 100u);
  EXPECT_EQ(calls[0].exit_ns, 700u);
  EXPECT_EQ(calls[0].ret, 0);
  ASSERT_EQ(calls[0].buffers.size(), 1u);
  EXPECT_EQ(calls[0].buffers[0].bytes, req.bytes);
  EXPECT_EQ(m.folded(), 2u);
  EXPECT_EQ(m.held(), 0u);
}

// A signal sent while the thread was frozen is handled after the thaw: the attempt returned to
// the program (EINTR, or a handler ran and called rt_sigreturn), so it stays, unmarked, ahead of
// what the thread did next.
TEST(RestartMergerTest, AnAttemptFollowedBySomethingElseIsPutBackAheadOfIt) {
  RestartMerger m;
  std::vector<SyscallEvent> calls = {
      // Not marked: a signal was pending, and ptrace shows this attempt too.
      Ev(7, SYS_read, -512, 100, 200),
      Ev(9, SYS_futex, -512, 110, 210, kEventInterrupted),
      Ev(8, SYS_getppid, 1, 220, 230),
  };
  m.Apply(&calls, {});
  ASSERT_EQ(calls.size(), 2u);
  calls = {Ev(8, SYS_getppid, 1, 240, 250), Ev(9, SYS_rt_sigreturn, -4, 300, 310)};
  m.Apply(&calls, {});
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].nr, SYS_getppid);
  EXPECT_EQ(calls[1].nr, SYS_futex);
  EXPECT_EQ(calls[1].ret, -512);
  EXPECT_EQ(calls[1].exit_ns, 210u);
  EXPECT_EQ(calls[1].flags, 0u);
  EXPECT_EQ(calls[2].nr, SYS_rt_sigreturn);
  EXPECT_EQ(m.folded(), 0u);
  EXPECT_EQ(m.held(), 0u);
}

TEST(RestartMergerTest, AThreadThatEndsHoldingAnAttemptNeverReturnedFromIt) {
  RestartMerger m;
  std::vector<SyscallEvent> calls = {
      Ev(9, SYS_getppid, 1, 50, 60),
      Ev(9, SYS_futex, -512, 100, 200, kEventInterrupted),
      Ev(8, SYS_getppid, 1, 300, 310),
  };
  m.Apply(&calls, {Exit(9, 400)});
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].nr, SYS_getppid);
  EXPECT_EQ(calls[0].tid, 9);
  EXPECT_EQ(calls[1].nr, SYS_futex);
  EXPECT_EQ(calls[1].flags, kEventNoExit);
  EXPECT_EQ(calls[1].exit_ns, 0u);
  EXPECT_EQ(calls[2].tid, 8);
  EXPECT_EQ(m.held(), 0u);
}

TEST(RestartMergerTest, AttemptsStillHeldWhenTheRecordingEndsAreWrittenAsTheyReturned) {
  RestartMerger m;
  std::vector<SyscallEvent> calls = {Ev(9, SYS_read, -512, 100, 200, kEventInterrupted)};
  m.Apply(&calls, {});
  EXPECT_TRUE(calls.empty());
  calls = {Ev(8, SYS_getppid, 1, 300, 310)};
  m.Flush(&calls);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].nr, SYS_read);
  EXPECT_EQ(calls[0].ret, -512);
  EXPECT_EQ(calls[0].flags, 0u);
  EXPECT_EQ(calls[1].nr, SYS_getppid);
  EXPECT_EQ(m.held(), 0u);
}

}  // namespace
}  // namespace fay::record::ebpf
