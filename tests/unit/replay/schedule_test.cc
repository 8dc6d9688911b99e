// The ordering rule as data: a call depends on exactly the calls of other threads that completed
// before it started, expressed as the smallest set of (thread, count) pairs.
#include "replay/schedule.h"

#include <gtest/gtest.h>

#include "replay_test_util.h"
#include "schema/syscall_table.h"

namespace fay::replay {
namespace {

SyscallEvent Call(int32_t tid, uint64_t entry, uint64_t exit, int nr = sysno::getpid,
                  int64_t ret = 0) {
  SyscallEvent ev;
  ev.pid = 1;
  ev.tid = tid;
  ev.nr = nr;
  ev.entry_ns = entry;
  ev.exit_ns = exit;
  ev.ret = ret;
  if (exit == 0) ev.flags = kEventNoExit;
  return ev;
}

std::string Deps(const Schedule& s, int t, int i) {
  std::string out;
  for (const Dep& d : s.threads[t].calls[i].deps) {
    out += (out.empty() ? "" : " ") + std::to_string(s.threads[d.thread].tid) + ":" +
           std::to_string(d.count);
  }
  return out;
}

TEST(ScheduleTest, OverlappingCallsAreIndependentAndCompletedOnesAreWaitedFor) {
  // Thread 1: [0,10] [12,40]; thread 2: [5,15] [20,30] [41,50].
  std::vector<SyscallEvent> ev = {Call(1, 0, 10), Call(2, 5, 15), Call(1, 12, 40), Call(2, 20, 30),
                                  Call(2, 41, 50)};
  Schedule s = BuildSchedule(ev, {});
  ASSERT_EQ(s.threads.size(), 2u);
  EXPECT_EQ(s.calls, 5u);
  EXPECT_EQ(s.first_ns, 0u);
  EXPECT_EQ(s.last_ns, 50u);
  EXPECT_EQ(Deps(s, 0, 0), "");
  EXPECT_EQ(Deps(s, 0, 1), "");     // [5,15] was still running at 12
  EXPECT_EQ(Deps(s, 1, 0), "");     // overlaps [0,10]
  EXPECT_EQ(Deps(s, 1, 1), "1:1");  // [0,10] ended before 20; [12,40] had not
  EXPECT_EQ(Deps(s, 1, 2), "1:2");  // [12,40] ended before 41
  EXPECT_EQ(s.dependencies, 2u);
}

TEST(ScheduleTest, OnlyNewDependenciesAreStored) {
  // Thread 2's second call needs nothing more of thread 1 than its first did.
  std::vector<SyscallEvent> ev = {Call(1, 0, 1), Call(2, 5, 6), Call(2, 7, 8)};
  Schedule s = BuildSchedule(ev, {});
  EXPECT_EQ(Deps(s, 1, 0), "1:1");
  EXPECT_EQ(Deps(s, 1, 1), "");
}

TEST(ScheduleTest, ACallThatNeverReturnedSatisfiesNothing) {
  std::vector<SyscallEvent> ev = {Call(1, 0, 0, sysno::exit), Call(1, 1, 2), Call(2, 10, 11)};
  Schedule s = BuildSchedule(ev, {});
  EXPECT_EQ(Deps(s, 1, 0), "");  // thread 1's calls count as still running
}

TEST(ScheduleTest, ProgramOrderIsEntryOrderAndTheIndexIsTheFilePosition) {
  std::vector<SyscallEvent> ev = {Call(1, 20, 21), Call(1, 10, 11)};
  Schedule s = BuildSchedule(ev, {});
  EXPECT_EQ(s.threads[0].calls[0].ev.entry_ns, 10u);
  EXPECT_EQ(s.threads[0].calls[0].index, 1u);
  EXPECT_EQ(s.threads[0].calls[1].index, 0u);
}

TEST(ScheduleTest, ANewTaskWaitsForTheCallThatCreatedIt) {
  // The child's first call starts before the parent's clone returns.
  std::vector<SyscallEvent> ev = {Call(1, 0, 1), Call(1, 10, 30, sysno::clone, 7), Call(7, 20, 21)};
  ProcessEvent fork;
  fork.kind = ProcessEventKind::kFork;
  fork.pid = 7;
  fork.tid = 7;
  fork.parent_pid = 1;
  Schedule s = BuildSchedule(ev, {fork});
  ASSERT_EQ(s.threads.size(), 2u);
  EXPECT_EQ(Deps(s, 1, 0), "1:1 1:2");
  EXPECT_EQ(s.parent_of.at(7), 1);
}

}  // namespace
}  // namespace fay::replay
