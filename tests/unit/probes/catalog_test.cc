#include "probes/catalog.h"

#include <gtest/gtest.h>

#include "probes/interval_provider.h"

namespace fay {
namespace {

TEST(SystemCatalog, RoutesEveryProvider) {
  SystemCatalog catalog;
  EXPECT_EQ(catalog.ProviderNames(),
            (std::vector<std::string>{"syscall", "tracepoint", "uprobe", "uretprobe", "interval",
                                      "profile", "software"}));
  auto sys = catalog.Resolve("  syscall:getppid ");
  ASSERT_TRUE(sys.ok()) << sys.status().message();
  EXPECT_EQ((*sys)[0].name, "syscall:getppid");
  EXPECT_EQ((*sys)[0].syscall_nr, 110);
  auto tp = catalog.Resolve("tracepoint:sched:sched_switch");
  ASSERT_TRUE(tp.ok());
  EXPECT_EQ((*tp)[0].kind, ProbeKind::kTracepoint);
  auto up = catalog.Resolve("uretprobe:libc:malloc");
  ASSERT_TRUE(up.ok()) << up.status().message();
  EXPECT_EQ((*up)[0].kind, ProbeKind::kUretprobe);
  EXPECT_EQ((*up)[0].symbol, "malloc");
}

TEST(SystemCatalog, IntervalAndProfile) {
  SystemCatalog catalog;
  auto interval = catalog.Resolve("interval:500ms");
  ASSERT_TRUE(interval.ok()) << interval.status().message();
  ASSERT_EQ(interval->size(), 1u);
  EXPECT_EQ((*interval)[0].name, "interval:500ms");
  EXPECT_EQ((*interval)[0].kind, ProbeKind::kInterval);
  EXPECT_EQ((*interval)[0].period_ns, 500000000u);
  // The common fields and the interrupted task's two stacks.
  EXPECT_EQ((*interval)[0].fields.size(), CommonFields().size() + StackFields().size());
  // bpftrace's spellings: UNIT:N and hz:N.
  for (auto [spec, ns] :
       {std::pair{"interval:s:1", 1'000'000'000ull}, std::pair{"interval:ms:250", 250'000'000ull},
        std::pair{"interval:us:10", 10'000ull}, std::pair{"interval:hz:4", 250'000'000ull}}) {
    auto b = catalog.Resolve(spec);
    ASSERT_TRUE(b.ok()) << spec << ": " << b.status().message();
    EXPECT_EQ((*b)[0].period_ns, ns) << spec;
  }
  EXPECT_FALSE(catalog.Resolve("interval:hz:0").ok());
  EXPECT_FALSE(catalog.Resolve("interval:parsecs:3").ok());

  auto profile = catalog.Resolve("profile:99");
  ASSERT_TRUE(profile.ok());
  const ProbeInfo& p = (*profile)[0];
  EXPECT_EQ(p.name, "profile:99");
  EXPECT_EQ(p.kind, ProbeKind::kProfile);
  EXPECT_EQ(p.hz, 99u);
  ASSERT_EQ(p.fields.size(), CommonFields().size() + 2);
  EXPECT_EQ(p.fields[p.fields.size() - 2].name, "ustack");
  EXPECT_EQ(p.fields.back().name, "kstack");
  EXPECT_EQ(p.fields.back().type, Type::Stack());
  EXPECT_EQ(p.fields.back().source, FieldSource::kKernelStack);
  EXPECT_EQ(p.fields[p.fields.size() - 2].source, FieldSource::kUserStack);
  auto bpftrace_style = catalog.Resolve("profile:hz:49");
  ASSERT_TRUE(bpftrace_style.ok());
  EXPECT_EQ((*bpftrace_style)[0].name, "profile:49");

  EXPECT_EQ(catalog.Resolve("profile:0").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(catalog.Resolve("profile:fast").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(catalog.Resolve("profile:1000000").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(catalog.Resolve("interval:0s").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(catalog.Resolve("interval:5").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(catalog.Resolve("interval:1fortnight").status().code(), Code::kInvalidArgument);
}

TEST(ParseProbeDuration, Units) {
  EXPECT_EQ(*ParseProbeDuration("1s"), 1000000000u);
  EXPECT_EQ(*ParseProbeDuration("250ms"), 250000000u);
  EXPECT_EQ(*ParseProbeDuration("100us"), 100000u);
  EXPECT_EQ(*ParseProbeDuration("10ns"), 10u);
  EXPECT_EQ(*ParseProbeDuration("2m"), 120000000000u);
  EXPECT_EQ(*ParseProbeDuration("1h"), 3600000000000u);
  EXPECT_FALSE(ParseProbeDuration("").ok());
  EXPECT_FALSE(ParseProbeDuration("ms").ok());
  EXPECT_FALSE(ParseProbeDuration("-1s").ok());
  EXPECT_FALSE(ParseProbeDuration("99999999999999999h").ok());
}

TEST(SystemCatalog, UnknownProvider) {
  SystemCatalog catalog;
  auto bad = catalog.Resolve("sycall:openat");
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
  EXPECT_EQ(bad.status().message(),
            "unknown probe provider 'sycall' in 'sycall:openat'; providers: syscall, tracepoint, "
            "uprobe, uretprobe, interval, profile, software");
  EXPECT_EQ(catalog.Nearest("sycall:openat", 3), (std::vector<std::string>{"syscall:openat"}));
  auto bare = catalog.Resolve("openat");
  EXPECT_EQ(bare.status().code(), Code::kNotFound);
  EXPECT_NE(bare.status().message().find("PROVIDER:NAME"), std::string::npos);
  EXPECT_NE(catalog.Resolve("kprobe:do_sys_open").status().message().find("fay doctor"),
            std::string::npos);
}

TEST(SystemCatalog, NearestNames) {
  SystemCatalog catalog;
  std::vector<std::string> near = catalog.Nearest("syscall:getppi", 3);
  ASSERT_FALSE(near.empty());
  EXPECT_EQ(near[0], "syscall:getppid");
  EXPECT_EQ(catalog.Nearest("openatt", 1), (std::vector<std::string>{"syscall:openat"}));
  EXPECT_EQ(catalog.Nearest("uprobe:libc:malocc", 1),
            (std::vector<std::string>{"uprobe:" + (*catalog.Resolve("uprobe:libc:malloc"))[0].path +
                                      ":malloc"}));
  EXPECT_TRUE(catalog.Nearest("syscall:qqqqqqqqqqqqqqqqqqqqqq", 3).empty());
}

TEST(SystemCatalog, ListIsCheapAndSorted) {
  SystemCatalog catalog;
  auto all = catalog.List("syscall:*");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(std::is_sorted(all->begin(), all->end()));
  auto sched = catalog.List("tracepoint:sched:sched_process_f*");
  ASSERT_TRUE(sched.ok());
  EXPECT_EQ(*sched, (std::vector<std::string>{"tracepoint:sched:sched_process_fork",
                                              "tracepoint:sched:sched_process_free"}));
}

}  // namespace
}  // namespace fay

namespace fay {
namespace {

TEST(SoftwareProvider, PerfNamesAliasesAndPeriods) {
  SystemCatalog catalog;
  auto pf = catalog.Resolve("software:faults");
  ASSERT_TRUE(pf.ok()) << pf.status().message();
  EXPECT_EQ((*pf)[0].name, "software:page-faults");
  EXPECT_EQ((*pf)[0].kind, ProbeKind::kSoftware);
  EXPECT_EQ((*pf)[0].period_events, 1u);
  ASSERT_NE((*pf)[0].FindField("addr"), nullptr);
  ASSERT_NE((*pf)[0].FindField("ustack"), nullptr);
  auto cs = catalog.Resolve("software:cs:100");
  ASSERT_TRUE(cs.ok()) << cs.status().message();
  EXPECT_EQ((*cs)[0].name, "software:context-switches:100");
  EXPECT_EQ((*cs)[0].period_events, 100u);
  EXPECT_EQ((*cs)[0].FindField("addr"), nullptr);  // not a fault
  auto bad = catalog.Resolve("software:page-fault");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("there are page-faults, minor-faults"), std::string::npos);
  EXPECT_FALSE(catalog.Resolve("software:cs:0").ok());
}

}  // namespace
}  // namespace fay
