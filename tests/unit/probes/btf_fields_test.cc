#include "probes/btf_fields.h"

#include <gtest/gtest.h>

#include "probes/kernel_symbols.h"

namespace fay {
namespace {

TEST(BtfFields, TaskMembersThroughPointers) {
  auto comm = TaskBtfField("curtask.comm");
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  EXPECT_EQ(comm->source, FieldSource::kTaskBtf);
  EXPECT_EQ(comm->type, Type::Str(16));
  EXPECT_EQ(comm->hops.size(), 1u);
  EXPECT_EQ(comm->leaf_size, 16);
  auto ppid = TaskBtfField("curtask.real_parent.tgid");
  ASSERT_TRUE(ppid.ok()) << ppid.status().message();
  EXPECT_EQ(ppid->hops.size(), 2u);  // task->real_parent, then ->tgid
  EXPECT_EQ(ppid->leaf_size, 4);
  EXPECT_TRUE(ppid->type.is_signed);
  // An embedded struct adds its offset without a pointer hop.
  auto vruntime = TaskBtfField("curtask.se.vruntime");
  ASSERT_TRUE(vruntime.ok()) << vruntime.status().message();
  EXPECT_EQ(vruntime->hops.size(), 1u);
  EXPECT_EQ(vruntime->leaf_size, 8);
  EXPECT_FALSE(vruntime->type.is_signed);
}

TEST(BtfFields, ErrorsNameTheStructAndTheNearestMembers) {
  auto bad = TaskBtfField("curtask.reel_parent");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().substr(0, 40), "struct task_struct has no member 'reel_p");
  EXPECT_NE(bad.status().message().find("did you mean: real_parent"), std::string::npos);
  auto whole = TaskBtfField("curtask.se");
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("is struct sched_entity, not a value"),
            std::string::npos);
}

TEST(BtfFields, UserStructBehindASyscallArgument) {
  Field base{
      "args.rqtp", Type::UserPtr(), FieldSource::kCtx, 16, 8, 0, "struct __kernel_timespec *"};
  auto nsec = StructBtfField(base, "args.rqtp.tv_nsec", FieldSource::kUserBtf);
  ASSERT_TRUE(nsec.ok()) << nsec.status().message();
  EXPECT_EQ(nsec->source, FieldSource::kUserBtf);
  EXPECT_EQ(nsec->hops, std::vector<uint32_t>{8});
  EXPECT_EQ(nsec->leaf_size, 8);
  EXPECT_EQ(nsec->offset, 16);  // the argument is loaded as the record has it
  Field str{"args.filename", Type::UserPtr(), FieldSource::kCtx, 24, 8, 1, "const char *"};
  EXPECT_EQ(StructBtfField(str, "args.filename.x", FieldSource::kUserBtf).status().code(),
            Code::kNotFound);
}

TEST(KernelSymbols, TracingFramesAreTheInnermostOfTheTracer) {
  EXPECT_EQ(KernelSymbols::TracingFrames({"bpf_prog_1a2b_fay_main_0+0x26a", "bpf_trace_run2+0x5a",
                                          "__bpf_trace_sys_enter+0x9", "__traceiter_sys_enter+0x2e",
                                          "syscall_trace_enter+0x10", "do_syscall_64"}),
            4u);
  EXPECT_EQ(KernelSymbols::TracingFrames({"__schedule+0x628"}), 0u);
  EXPECT_EQ(KernelSymbols::TracingFrames(
                {"0xffffffffc0001342", "bpf_trace_run2+0x103", "do_syscall_64+0x71"}),
            2u);
}

TEST(KernelSymbols, ParsesTextSymbolsSorted) {
  auto syms = KernelSymbols::Parse(
      "ffffffff81000200 T second\n"
      "ffffffff81000100 t first [mod]\n"
      "ffffffff81000300 D data\n"
      "0000000000000000 T hidden\n");
  ASSERT_EQ(syms.size(), 2u);
  EXPECT_EQ(syms[0].second, "first");
  EXPECT_EQ(syms[1].first, 0xffffffff81000200ull);
}

}  // namespace
}  // namespace fay
