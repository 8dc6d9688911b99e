// The planner's decisions, one property at a time: which programs attach where, what the probe
// part keeps (keys, states, layout) and what the machine part does (top, windows, duration).
#include "query/planner.h"

#include <gtest/gtest.h>

#include "fake_catalog.h"
#include "query/compile.h"

namespace fay {
namespace {

Plan Compile(const std::string& text, const PlanOptions& options = {}) {
  FakeCatalog catalog;
  auto plan = CompileQuery(text, catalog, options);
  EXPECT_TRUE(plan.ok()) << text << "\n" << plan.status().message();
  return plan.ok() ? std::move(plan).value() : Plan{};
}

TEST(PlannerTest, EntryOnlyWhenNoExitFieldIsRead) {
  Plan p = Compile("syscall:openat | count()");
  EXPECT_FALSE(p.needs_exit);
  EXPECT_TRUE(p.use_raw_syscalls);
  ASSERT_EQ(p.attachments.size(), 1u);
  EXPECT_EQ(p.attachments[0].kind, AttachKind::kRawSyscalls);
  EXPECT_EQ(p.attachments[0].role, ProgRole::kMain);
  EXPECT_EQ(p.attachments[0].name, "sys_enter");
  EXPECT_FALSE(p.attachments[0].is_exit);
  EXPECT_EQ(p.attachments[0].probe_index, -1);
}

// A syscall's input string is read at entry even where the kernel does not declare it const
// (mount's), by fay's signature table; an output buffer is read at exit, when it holds data.
TEST(PlannerTest, InputStringsAreReadAtEntryByTheSignatureTable) {
  class Catalog : public ProbeCatalog {
   public:
    Expected<std::vector<ProbeInfo>> Resolve(const std::string& spec) override {
      auto arg = [](const std::string& name, const std::string& c_type, int index) {
        Field f = F(name, Type::UserPtr());
        f.c_type = c_type;
        f.index = index;
        return f;
      };
      if (spec == "syscall:mount")
        return std::vector<ProbeInfo>{
            Probe(spec, ProbeKind::kSyscall,
                  SyscallTail({arg("args.dev_name", "char *", 0), arg("args.dir_name", "char *", 1),
                               arg("args.type", "char *", 2)}))};
      if (spec == "syscall:read")
        return std::vector<ProbeInfo>{
            Probe(spec, ProbeKind::kSyscall, SyscallTail({arg("args.buf", "char *", 1)}))};
      return Error(Code::kNotFound, spec);
    }
    std::vector<std::string> Nearest(const std::string&, size_t) override { return {}; }
  } catalog;
  auto mount = CompileQuery("syscall:mount | count() by str(args.dir_name), ret", catalog);
  ASSERT_TRUE(mount.ok()) << mount.status().message();
  ASSERT_EQ(mount->entry_strings.size(), 1u);
  EXPECT_EQ(mount->entry_strings[0]->text, "str(args.dir_name)");
  auto read = CompileQuery("syscall:read | count() by str(args.buf), ret", catalog);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE(read->entry_strings.empty());
}

TEST(PlannerTest, RetErrnoAndLatencyPairEntryWithExit) {
  for (const char* q : {"syscall:openat | where ret < 0 | count()",
                        "syscall:openat | count() by errno", "syscall:openat | hist(latency)"}) {
    Plan p = Compile(q);
    EXPECT_TRUE(p.needs_exit) << q;
    ASSERT_EQ(p.attachments.size(), 2u) << q;
    EXPECT_EQ(p.attachments[0].role, ProgRole::kEntry) << q;
    EXPECT_EQ(p.attachments[0].name, "sys_enter") << q;
    EXPECT_EQ(p.attachments[1].role, ProgRole::kMain) << q;
    EXPECT_EQ(p.attachments[1].name, "sys_exit") << q;
    EXPECT_TRUE(p.attachments[1].is_exit) << q;
  }
}

TEST(PlannerTest, SeveralSyscallsShareOneProgramPair) {
  Plan p = Compile("syscall:read, syscall:pread64 | hist(latency) by probe");
  EXPECT_EQ(p.probes.size(), 2u);
  EXPECT_EQ(p.attachments.size(), 2u);
  EXPECT_EQ(p.probes[0].syscall_nr, 0);
  EXPECT_EQ(p.probes[1].syscall_nr, 17);
}

TEST(PlannerTest, ThresholdKeepsPerSyscallTracepoints) {
  PlanOptions o;
  o.raw_syscalls_threshold = 8;
  Plan p = Compile("syscall:openat | where ret < 0 | count()", o);
  EXPECT_FALSE(p.use_raw_syscalls);
  ASSERT_EQ(p.attachments.size(), 2u);
  EXPECT_EQ(p.attachments[0].kind, AttachKind::kTracepoint);
  EXPECT_EQ(p.attachments[0].category, "syscalls");
  EXPECT_EQ(p.attachments[0].name, "sys_enter_openat");
  EXPECT_EQ(p.attachments[0].probe_index, 0);
  EXPECT_EQ(p.attachments[1].name, "sys_exit_openat");
}

TEST(PlannerTest, TracepointsAttachByName) {
  Plan p = Compile("tracepoint:sched:sched_switch | count() by prev_comm");
  ASSERT_EQ(p.attachments.size(), 1u);
  EXPECT_EQ(p.attachments[0].kind, AttachKind::kTracepoint);
  EXPECT_EQ(p.attachments[0].category, "sched");
  EXPECT_EQ(p.attachments[0].name, "sched_switch");
  EXPECT_FALSE(p.needs_exit);
  ASSERT_EQ(p.keys.size(), 1u);
  EXPECT_EQ(p.keys[0].size, 16);
  EXPECT_EQ(p.key_size, 16);
}

TEST(PlannerTest, KeysAndStatesAreLaidOutInOrder) {
  Plan p = Compile("syscall:read | count() as n, sum(args.count) as bytes by comm, args.fd");
  EXPECT_EQ(p.mode, PlanMode::kAggregate);
  ASSERT_EQ(p.keys.size(), 2u);
  EXPECT_EQ(p.keys[0].name, "comm");
  EXPECT_EQ(p.keys[0].offset, 0);
  EXPECT_EQ(p.keys[0].size, 16);
  EXPECT_EQ(p.keys[1].name, "args.fd");
  EXPECT_EQ(p.keys[1].offset, 16);
  EXPECT_EQ(p.keys[1].size, 8);
  EXPECT_EQ(p.key_size, 24);
  ASSERT_EQ(p.aggs.size(), 2u);
  EXPECT_EQ(p.aggs[0].offset, 0);
  EXPECT_EQ(p.aggs[1].offset, 8);
  EXPECT_EQ(p.value_size, 16);
}

TEST(PlannerTest, NoKeysUseOneZeroKey) {
  Plan p = Compile("syscall:read | count()");
  EXPECT_TRUE(p.keys.empty());
  EXPECT_EQ(p.key_size, 8);
}

TEST(PlannerTest, SelectStreamsItsColumns) {
  Plan p = Compile("syscall:read | select pid, comm, args.count");
  EXPECT_EQ(p.mode, PlanMode::kSelect);
  ASSERT_EQ(p.keys.size(), 3u);
  EXPECT_TRUE(p.aggs.empty());
}

TEST(PlannerTest, SamplingIsAFraction) {
  Plan pct = Compile("syscall:read | sample 1% | count()");
  EXPECT_EQ(pct.sample_num, 1u);
  EXPECT_EQ(pct.sample_den, 100u);
  Plan big = Compile("syscall:read | sample 5000000000/10000000000 | count()");
  EXPECT_EQ(big.sample_num, 1u);
  EXPECT_EQ(big.sample_den, 2u);
  Plan frac = Compile("syscall:read | sample 1/8 | count()");
  EXPECT_EQ(frac.sample_num, 1u);
  EXPECT_EQ(frac.sample_den, 8u);
  Plan none = Compile("syscall:read | count()");
  EXPECT_EQ(none.sample_num, none.sample_den);
}

TEST(PlannerTest, MachinePartStages) {
  Plan p = Compile("syscall:read | count() by comm | top 10 | every 1s | for 5s");
  EXPECT_EQ(p.top_n, 10);
  EXPECT_EQ(p.every_ns, 1000000000u);
  EXPECT_EQ(p.for_ns, 5000000000u);
}

TEST(PlannerTest, WhereStagesBecomeOneConjunction) {
  Plan one = Compile("syscall:read | where args.fd == 3 | count()");
  ASSERT_NE(one.predicate, nullptr);
  EXPECT_EQ(one.predicate->text, "args.fd == 3");
  Plan two = Compile("syscall:read | where args.fd == 3 | where args.count > 1 | count()");
  ASSERT_NE(two.predicate, nullptr);
  EXPECT_NE(two.predicate, one.predicate);
  Plan none = Compile("syscall:read | count()");
  EXPECT_EQ(none.predicate, nullptr);
}

TEST(PlannerTest, MaxKeysComesFromTheOptions) {
  PlanOptions o;
  o.max_keys = 77;
  EXPECT_EQ(Compile("syscall:read | count() by comm", o).max_keys, 77u);
}

TEST(PlannerTest, UprobesAttachAtTheSymbol) {
  Plan p = Compile("uprobe:/bin/bash:readline | count() by arg0");
  ASSERT_EQ(p.attachments.size(), 1u);
  EXPECT_EQ(p.attachments[0].kind, AttachKind::kUprobe);
  EXPECT_EQ(p.attachments[0].probe_index, 0);
  EXPECT_FALSE(p.needs_exit);
}

TEST(PlannerTest, UprobesOfOneBinaryShareOneMultiLink) {
  Plan p = Compile("uprobe:/bin/bash:* | count() by func");
  ASSERT_EQ(p.probes.size(), 2u);
  ASSERT_EQ(p.attachments.size(), 1u);
  EXPECT_EQ(p.attachments[0].kind, AttachKind::kUprobeMulti);
  EXPECT_EQ(p.attachments[0].probe_index, -1);
  EXPECT_EQ(p.attachments[0].name, "/bin/bash");
  EXPECT_EQ(p.attachments[0].probes, (std::vector<int>{0, 1}));
  PlanOptions old_kernel;
  old_kernel.uprobe_multi = false;
  Plan each = Compile("uprobe:/bin/bash:* | count() by func", old_kernel);
  ASSERT_EQ(each.attachments.size(), 2u);
  EXPECT_EQ(each.attachments[0].kind, AttachKind::kUprobe);
}

TEST(PlannerTest, ProfileKeysOnTheStack) {
  Plan p = Compile("profile:99 | count() by ustack");
  ASSERT_EQ(p.attachments.size(), 1u);
  EXPECT_EQ(p.attachments[0].kind, AttachKind::kPerfSoftware);
  ASSERT_EQ(p.keys.size(), 1u);
  EXPECT_EQ(p.keys[0].type, Type::Stack());
}

}  // namespace
}  // namespace fay
