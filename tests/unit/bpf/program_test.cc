#include "bpf/program.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

#include "bpf/attach.h"
#include "bpf/map.h"
#include "bpf/stack_map.h"
#include "bpf_test_util.h"

namespace fay::bpf {
namespace {

using testing::CounterProgram;
using testing::SumCounter;
using testing::TracepointId;

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void GetPpidTimes(int n) {
  for (int i = 0; i < n; ++i) syscall(SYS_getppid);
}

TEST(Program, TracepointCountsExactlyAndDetaches) {
  FAY_SKIP_WITHOUT_BPF();
  int tp = TracepointId("syscalls", "sys_enter_getppid");
  ASSERT_GT(tp, 0) << "syscalls:sys_enter_getppid not found in tracefs";
  auto counter = Map::Create(BPF_MAP_TYPE_PERCPU_ARRAY, "t_count", 4, 8, 1);
  ASSERT_TRUE(counter.ok()) << counter.status().message();
  auto prog = Program::Load(CounterProgram(BPF_PROG_TYPE_TRACEPOINT, "count_getppid", getpid()),
                            {counter->fd()});
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  EXPECT_GE(prog->fd(), 0);
  EXPECT_EQ(prog->name(), "count_getppid");
  {
    auto link = AttachTracepoint(*prog, tp);
    ASSERT_TRUE(link.ok()) << link.status().message();
    EXPECT_GE(link->size(), 1u);
    EXPECT_EQ(SumCounter(*counter), 0u);
    GetPpidTimes(1000);
    EXPECT_EQ(SumCounter(*counter), 1000u);
  }
  GetPpidTimes(100);
  EXPECT_EQ(SumCounter(*counter), 1000u);
}

TEST(Program, RawTracepointCountsExactly) {
  FAY_SKIP_WITHOUT_BPF();
  auto counter = Map::Create(BPF_MAP_TYPE_PERCPU_ARRAY, "t_raw", 4, 8, 1);
  ASSERT_TRUE(counter.ok()) << counter.status().message();
  // raw_syscalls:sys_enter has (struct pt_regs *regs, long id): id is args[1], at ctx + 8.
  Emitter e;
  Label out = e.NewLabel();
  e.Load(8, R6, R1, 8);
  testing::EmitTgidFilter(e, getpid(), out);
  e.JmpIfImm(BPF_JNE, R6, SYS_getppid, out);
  testing::EmitBumpCounter(e, 0, out);
  e.Bind(out);
  e.MovImm(R0, 0);
  e.Exit();
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  auto prog = Program::Load({BPF_PROG_TYPE_RAW_TRACEPOINT, "raw_getppid", *insns, e.relocs()},
                            {counter->fd()});
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  {
    auto link = AttachRawTracepoint(*prog, "sys_enter");
    ASSERT_TRUE(link.ok()) << link.status().message();
    EXPECT_EQ(link->size(), 1u);
    GetPpidTimes(777);
    getpid();
    EXPECT_EQ(SumCounter(*counter), 777u);
  }
  GetPpidTimes(10);
  EXPECT_EQ(SumCounter(*counter), 777u);
}

TEST(Program, VerifierRejectionCarriesTheLog) {
  FAY_SKIP_WITHOUT_BPF();
  Emitter e;
  e.Mov(R0, R2);  // r2 was never written
  e.Exit();
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  auto prog = Program::Load({BPF_PROG_TYPE_TRACEPOINT, "bad_probe", *insns, {}}, {});
  ASSERT_FALSE(prog.ok());
  const Status& st = prog.status();
  EXPECT_EQ(st.code(), Code::kVerifier);
  EXPECT_EQ(st.message().rfind("the kernel verifier rejected probe program bad_probe: ", 0), 0u)
      << st.message();
  EXPECT_NE(st.message().find("R2 !read_ok"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("hint:"), std::string::npos) << st.message();
}

TEST(Program, BadRelocationIsAnInternalError) {
  Emitter e;
  e.LdMap(R1, 3);
  e.MovImm(R0, 0);
  e.Exit();
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  auto prog = Program::Load({BPF_PROG_TYPE_TRACEPOINT, "reloc", *insns, e.relocs()}, {5});
  ASSERT_FALSE(prog.ok());
  EXPECT_EQ(prog.status().code(), Code::kInternal);
  EXPECT_NE(prog.status().message().find("names map 3 of 1"), std::string::npos);
}

TEST(Program, MoveLeavesSourceEmpty) {
  FAY_SKIP_WITHOUT_BPF();
  Emitter e;
  e.MovImm(R0, 0);
  e.Exit();
  auto prog = Program::Load({BPF_PROG_TYPE_TRACEPOINT, "noop", *e.Finish(), {}}, {});
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  int fd = prog->fd();
  Program p = std::move(*prog);
  EXPECT_EQ(prog->fd(), -1);
  EXPECT_EQ(p.fd(), fd);
}

TEST(Attach, UnknownTargetsAreReported) {
  FAY_SKIP_WITHOUT_BPF();
  Emitter e;
  e.MovImm(R0, 0);
  e.Exit();
  auto raw = Program::Load({BPF_PROG_TYPE_RAW_TRACEPOINT, "noop_raw", *e.Finish(), {}}, {});
  ASSERT_TRUE(raw.ok()) << raw.status().message();
  auto link = AttachRawTracepoint(*raw, "no_such_tracepoint_fay");
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), Code::kNotFound) << link.status().message();

  auto up = Program::Load({BPF_PROG_TYPE_KPROBE, "noop_up", *e.Finish(), {}}, {});
  ASSERT_TRUE(up.ok()) << up.status().message();
  auto ul = AttachUprobe(*up, "/no/such/binary", 0, false);
  ASSERT_FALSE(ul.ok());
  EXPECT_EQ(ul.status().code(), Code::kNotFound) << ul.status().message();
}

TEST(Attach, PerfSoftwareSamplesEveryCpuWithUserStacks) {
  FAY_SKIP_WITHOUT_BPF();
  auto counter = Map::Create(BPF_MAP_TYPE_PERCPU_ARRAY, "t_prof", 4, 8, 1);
  ASSERT_TRUE(counter.ok()) << counter.status().message();
  auto stacks = CreateStackMap("t_pstacks", 64);
  ASSERT_TRUE(stacks.ok()) << stacks.status().message();
  auto last = Map::Create(BPF_MAP_TYPE_ARRAY, "t_lastid", 4, 8, 1);
  ASSERT_TRUE(last.ok()) << last.status().message();

  // Count samples of this process and remember the last user stack id it produced.
  Emitter e;
  Label out = e.NewLabel();
  e.Mov(R6, R1);
  testing::EmitTgidFilter(e, getpid(), out);
  e.Mov(R1, R6);
  e.LdMap(R2, 1);
  e.MovImm(R3, BPF_F_USER_STACK);
  e.Call(BPF_FUNC_get_stackid);
  e.JmpIfImm(BPF_JSLT, R0, 0, out);
  e.Mov(R7, R0);
  e.StoreImm(4, R10, -4, 0);
  e.Store(8, R10, -16, R7);
  e.LdMap(R1, 2);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, -4);
  e.Mov(R3, R10);
  e.AluImm(BPF_ADD, R3, -16);
  e.MovImm(R4, BPF_ANY);
  e.Call(BPF_FUNC_map_update_elem);
  testing::EmitBumpCounter(e, 0, out);
  e.Bind(out);
  e.MovImm(R0, 0);
  e.Exit();
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  auto prog = Program::Load({BPF_PROG_TYPE_PERF_EVENT, "profile", *insns, e.relocs()},
                            {counter->fd(), stacks->fd(), last->fd()});
  ASSERT_TRUE(prog.ok()) << prog.status().message();

  auto link = AttachPerfSoftware(*prog, PERF_COUNT_SW_CPU_CLOCK, 997, 0);
  ASSERT_TRUE(link.ok()) << link.status().message();
  EXPECT_EQ(link->size(), 2u * static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  // Burn 300 ms of this thread's own CPU time (not wall time, so a busy machine does not
  // starve the sampler): about 300 samples at 997 Hz.
  volatile uint64_t sink = 0;
  const uint64_t t0 = ThreadCpuNs();
  while (ThreadCpuNs() - t0 < 300'000'000) sink = sink + 1;
  link = Link();
  uint64_t samples = SumCounter(*counter);
  EXPECT_GT(samples, 50u);
  EXPECT_LT(samples, 1000u);

  uint32_t k = 0;
  uint64_t id = 0;
  ASSERT_TRUE(last->Lookup(&k, &id).ok());
  auto ips = ReadStack(*stacks, static_cast<uint32_t>(id));
  ASSERT_TRUE(ips.ok()) << ips.status().message();
  EXPECT_GE(ips->size(), 1u);

  EXPECT_FALSE(AttachPerfSoftware(*prog, PERF_COUNT_SW_CPU_CLOCK, 0, 0).ok());
  auto one = AttachPerfSoftware(*prog, PERF_COUNT_SW_CPU_CLOCK, 0, 10'000'000, 0);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->size(), 2u);
}

}  // namespace
}  // namespace fay::bpf
