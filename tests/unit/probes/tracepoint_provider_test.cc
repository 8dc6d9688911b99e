#include "probes/tracepoint_provider.h"

#include <gtest/gtest.h>

namespace fay {
namespace {

std::vector<std::string> OwnFieldNames(const ProbeInfo& p) {
  std::vector<std::string> names;
  for (size_t i = CommonFields().size(); i < p.fields.size(); ++i)
    names.push_back(p.fields[i].name);
  return names;
}

TEST(TracepointFields, FromFormat) {
  EventFormat format;
  format.id = 7;
  format.fields = {
      {"common_type", "unsigned short", 0, 2, false, false, -1},
      {"prev_comm", "char", 8, 16, false, false, 16},
      {"prev_pid", "pid_t", 24, 4, true, false, -1},
      {"flags", "u8", 28, 1, false, false, -1},
      {"saddr", "__u8", 32, 4, false, false, 4},           // byte array: skipped
      {"args", "unsigned long", 40, 48, false, false, 6},  // number array: skipped
      {"name", "__data_loc char[]", 88, 4, false, true, 0},
      {"blob", "struct foo", 92, 12, false, false, -1},  // no loadable size: skipped
      {"delta", "s64", 104, 8, true, false, -1},
  };
  std::vector<Field> fields = TracepointFields(format);
  // Five loadable fields, each also as args.NAME, then ustack and kstack.
  ASSERT_EQ(fields.size(), CommonFields().size() + 12);
  const Field* f = &fields[CommonFields().size()];
  EXPECT_EQ(f[0].name, "prev_comm");
  EXPECT_EQ(f[0].type, Type::Str(16));
  EXPECT_EQ(f[0].source, FieldSource::kCtx);
  EXPECT_EQ(f[0].offset, 8);
  EXPECT_EQ(f[0].size, 16);
  EXPECT_EQ(f[0].c_type, "char[16]");
  EXPECT_EQ(f[1].name, "prev_pid");
  EXPECT_EQ(f[1].type, Type::Int(true));
  EXPECT_EQ(f[1].size, 4);
  EXPECT_EQ(f[2].name, "flags");
  EXPECT_EQ(f[2].type, Type::Int(false));
  EXPECT_EQ(f[2].size, 1);
  EXPECT_EQ(f[3].name, "name");
  EXPECT_EQ(f[3].type, Type::Str(64));
  EXPECT_EQ(f[3].source, FieldSource::kDataLoc);
  EXPECT_EQ(f[3].offset, 88);
  EXPECT_EQ(f[3].size, 4);
  EXPECT_EQ(f[4].name, "delta");
  EXPECT_EQ(f[4].type, Type::Int(true));
  EXPECT_EQ(f[4].offset, 104);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(f[5 + i].name, "args." + f[i].name);
    EXPECT_EQ(f[5 + i].offset, f[i].offset);
    EXPECT_EQ(f[5 + i].type, f[i].type);
  }
}

// A record field that a common field shadows is still reachable as args.NAME: sched_wakeup's
// pid is the wakee's, the common pid the running task's.
TEST(TracepointFields, ShadowedRecordFieldsAsArgs) {
  EventFormat format;
  format.fields = {{"comm", "char", 8, 16, false, false, 16},
                   {"pid", "pid_t", 24, 4, true, false, -1}};
  std::vector<Field> fields = TracepointFields(format);
  ProbeInfo p;
  p.fields = fields;
  ASSERT_NE(p.FindField("pid"), nullptr);
  EXPECT_EQ(p.FindField("pid")->source, FieldSource::kPid);
  ASSERT_NE(p.FindField("args.pid"), nullptr);
  EXPECT_EQ(p.FindField("args.pid")->source, FieldSource::kCtx);
  EXPECT_EQ(p.FindField("args.pid")->offset, 24);
  ASSERT_NE(p.FindField("args.comm"), nullptr);
  EXPECT_EQ(p.FindField("args.comm")->offset, 8);
}

TEST(TracepointProvider, SchedProcessFork) {
  TracepointProvider provider;
  auto probes = provider.Resolve("sched:sched_process_fork");
  ASSERT_TRUE(probes.ok()) << probes.status().message();
  ASSERT_EQ(probes->size(), 1u);
  const ProbeInfo& p = (*probes)[0];
  EXPECT_EQ(p.name, "tracepoint:sched:sched_process_fork");
  EXPECT_EQ(p.kind, ProbeKind::kTracepoint);
  EXPECT_EQ(p.tp_category, "sched");
  EXPECT_EQ(p.tp_name, "sched_process_fork");
  EXPECT_GT(p.tp_id, 0);
  EXPECT_EQ(OwnFieldNames(p),
            (std::vector<std::string>{"parent_comm", "parent_pid", "child_comm", "child_pid",
                                      "args.parent_comm", "args.parent_pid", "args.child_comm",
                                      "args.child_pid", "ustack", "kstack"}));
  const Field* parent_comm = p.FindField("parent_comm");
  ASSERT_NE(parent_comm, nullptr);
  EXPECT_EQ(parent_comm->source, FieldSource::kDataLoc);
  EXPECT_EQ(parent_comm->type, Type::Str(64));
  EXPECT_EQ(parent_comm->offset, 8);
  const Field* child_pid = p.FindField("child_pid");
  ASSERT_NE(child_pid, nullptr);
  EXPECT_EQ(child_pid->source, FieldSource::kCtx);
  EXPECT_EQ(child_pid->type, Type::Int(true));
  EXPECT_EQ(child_pid->offset, 20);
  EXPECT_EQ(child_pid->size, 4);
  ASSERT_NE(p.FindField("comm"), nullptr);
}

TEST(TracepointProvider, SchedSwitchCharArrays) {
  TracepointProvider provider;
  auto probes = provider.Resolve("sched:sched_switch");
  ASSERT_TRUE(probes.ok());
  const Field* next_comm = (*probes)[0].FindField("next_comm");
  ASSERT_NE(next_comm, nullptr);
  EXPECT_EQ(next_comm->type, Type::Str(16));
  EXPECT_EQ(next_comm->source, FieldSource::kCtx);
  EXPECT_EQ(next_comm->offset, 40);
  EXPECT_EQ(next_comm->size, 16);
  const Field* prev_state = (*probes)[0].FindField("prev_state");
  ASSERT_NE(prev_state, nullptr);
  EXPECT_EQ(prev_state->size, 8);
  EXPECT_EQ(prev_state->type, Type::Int(true));
}

TEST(TracepointProvider, GlobsOnBothParts) {
  TracepointProvider provider;
  auto probes = provider.Resolve("sched:sched_process_*");
  ASSERT_TRUE(probes.ok());
  std::vector<std::string> names;
  for (const auto& p : *probes) names.push_back(p.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "tracepoint:sched:sched_process_exit"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "tracepoint:sched:sched_process_fork"),
            names.end());
  for (const auto& n : names) EXPECT_EQ(n.rfind("tracepoint:sched:sched_process_", 0), 0u) << n;

  auto both = provider.List("sch*:sched_switch");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(*both, (std::vector<std::string>{"tracepoint:sched:sched_switch"}));
}

TEST(TracepointProvider, Errors) {
  TracepointProvider provider;
  EXPECT_EQ(provider.Resolve("sched").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(provider.Resolve("sched:").status().code(), Code::kInvalidArgument);
  auto missing = provider.Resolve("sched:sched_swtich");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().message(), "unknown probe 'tracepoint:sched:sched_swtich'");
  auto near = provider.Nearest("sched:sched_swtich", 1);
  EXPECT_EQ(near, (std::vector<std::string>{"tracepoint:sched:sched_switch"}));
}

}  // namespace
}  // namespace fay
