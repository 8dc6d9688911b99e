// Where the signals the eBPF recorder notes as they are sent land among their thread's calls:
// where ptrace shows them, as the thread goes back to user space.
#include <gtest/gtest.h>

#include <sys/syscall.h>

#include <vector>

#include "record/ebpf/signal_placer.h"

namespace fay::record::ebpf {
namespace {

SyscallEvent Call(int32_t tid, uint64_t entry, uint64_t exit) {
  SyscallEvent ev;
  ev.pid = ev.tid = tid;
  ev.nr = SYS_wait4;
  ev.entry_ns = entry;
  ev.exit_ns = exit;
  return ev;
}

ProcessEvent Sent(int32_t tid, uint64_t t, int sig = 17) {
  ProcessEvent pe;
  pe.kind = ProcessEventKind::kSignal;
  pe.pid = pe.tid = tid;
  pe.time_ns = t;
  pe.signo = sig;
  pe.is_thread = true;  // the wire's mark: noted when sent
  return pe;
}

ProcessEvent Exit(int32_t tid, uint64_t t) {
  ProcessEvent pe;
  pe.kind = ProcessEventKind::kExit;
  pe.pid = pe.tid = tid;
  pe.time_ns = t;
  return pe;
}

std::vector<uint64_t> Times(const std::vector<ProcessEvent>& v) {
  std::vector<uint64_t> t;
  for (const ProcessEvent& pe : v) t.push_back(pe.time_ns);
  return t;
}

TEST(SignalPlacerTest, SentDuringACallLandsRightAfterItsReturn) {
  SignalPlacer p;
  std::vector<ProcessEvent> procs = {Sent(7, 150)};
  p.Apply({}, &procs);
  EXPECT_TRUE(procs.empty());  // waits: where the thread is is not known yet
  p.Apply({Call(8, 100, 300), Call(7, 100, 200)}, &procs);
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].time_ns, 201u);
  EXPECT_FALSE(procs[0].is_thread);
}

TEST(SignalPlacerTest, SentInUserSpaceKeepsItsTimeBeforeTheNextCall) {
  SignalPlacer p;
  std::vector<ProcessEvent> procs = {Sent(7, 250)};
  // A call that ended before it was sent tells nothing; the next one does.
  p.Apply({Call(7, 100, 200)}, &procs);
  EXPECT_TRUE(procs.empty());
  p.Apply({Call(7, 300, 400)}, &procs);
  EXPECT_EQ(Times(procs), std::vector<uint64_t>{250});
}

TEST(SignalPlacerTest, AThreadThatEndsTakesItsSignalsBeforeItsExit) {
  SignalPlacer p;
  std::vector<ProcessEvent> procs = {Sent(9, 500, 15), Exit(9, 400), Exit(5, 450)};
  p.Apply({}, &procs);
  ASSERT_EQ(procs.size(), 3u);
  EXPECT_EQ(Times(procs), (std::vector<uint64_t>{399, 400, 450}));
  EXPECT_EQ(procs[0].kind, ProcessEventKind::kSignal);
  EXPECT_EQ(procs[1].kind, ProcessEventKind::kExit);
}

TEST(SignalPlacerTest, ManyWaitingSignalsOfExitingThreadsAllLand) {
  // More signals land than the vector has room for: the exits they follow are read before
  // the vector grows.
  SignalPlacer p;
  std::vector<ProcessEvent> sent;
  for (int t = 0; t < 8; ++t)
    for (int k = 0; k < 8; ++k) sent.push_back(Sent(100 + t, 1000 + 10 * t + k, 10 + k));
  p.Apply({}, &sent);
  EXPECT_TRUE(sent.empty());
  std::vector<ProcessEvent> exits;
  for (int t = 0; t < 8; ++t) exits.push_back(Exit(100 + t, 1005 + 10 * t));
  exits.shrink_to_fit();
  p.Apply({}, &exits);
  ASSERT_EQ(exits.size(), 8u + 64u);
  for (size_t i = 1; i < exits.size(); ++i) EXPECT_LE(exits[i - 1].time_ns, exits[i].time_ns);
  // Each thread's exit comes after its signals.
  for (int t = 0; t < 8; ++t) {
    size_t last_signal = 0, exit_at = 0;
    for (size_t i = 0; i < exits.size(); ++i) {
      if (exits[i].tid != 100 + t) continue;
      if (exits[i].kind == ProcessEventKind::kSignal) last_signal = i;
      if (exits[i].kind == ProcessEventKind::kExit) exit_at = i;
    }
    EXPECT_LT(last_signal, exit_at) << "thread " << 100 + t;
  }
}

TEST(SignalPlacerTest, TakenSignalsPassAndTheRestLeaveAtTheEnd) {
  SignalPlacer p;
  ProcessEvent taken = Sent(7, 120, 10);
  taken.is_thread = false;  // from signal_deliver: already where the thread took it
  taken.siginfo = {10, 0, 0, 0};
  std::vector<ProcessEvent> procs = {taken, Sent(8, 130)};
  p.Apply({}, &procs);
  EXPECT_EQ(Times(procs), std::vector<uint64_t>{120});
  EXPECT_EQ(procs[0].siginfo, (std::vector<uint8_t>{10, 0, 0, 0}));  // kept whole in place
  std::vector<ProcessEvent> rest;
  p.Flush(&rest);
  EXPECT_EQ(Times(rest), std::vector<uint64_t>{130});
  p.Flush(&rest);
  EXPECT_EQ(rest.size(), 1u);
}

}  // namespace
}  // namespace fay::record::ebpf
