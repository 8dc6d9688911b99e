#include "probes/syscall_provider.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "schema/syscall_table.h"

namespace fay {
namespace {

TEST(SyscallArgType, FromCType) {
  EXPECT_EQ(SyscallArgType("int"), Type::Int(true));
  EXPECT_EQ(SyscallArgType("long"), Type::Int(true));
  EXPECT_EQ(SyscallArgType("pid_t"), Type::Int(true));
  EXPECT_EQ(SyscallArgType("loff_t"), Type::Int(true));
  EXPECT_EQ(SyscallArgType("off_t"), Type::Int(true));
  EXPECT_EQ(SyscallArgType("const int"), Type::Int(true));
  EXPECT_EQ(SyscallArgType("const clockid_t"), Type::Int(true));
  EXPECT_EQ(SyscallArgType("size_t"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("unsigned int"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("unsigned long"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("unsigned"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("umode_t"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("uid_t"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("u32"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("const __u32"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("const char *"), Type::UserPtr());
  EXPECT_EQ(SyscallArgType("char *"), Type::UserPtr());
  EXPECT_EQ(SyscallArgType("const char *const *"), Type::Int(false));  // argv
  EXPECT_EQ(SyscallArgType("void *"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("struct stat *"), Type::Int(false));
  EXPECT_EQ(SyscallArgType("const void *const"), Type::Int(false));
}

TEST(SyscallProvider, Openat) {
  SyscallProvider provider;
  auto probes = provider.Resolve("openat");
  ASSERT_TRUE(probes.ok()) << probes.status().message();
  ASSERT_EQ(probes->size(), 1u);
  const ProbeInfo& p = (*probes)[0];
  EXPECT_EQ(p.name, "syscall:openat");
  EXPECT_EQ(p.kind, ProbeKind::kSyscall);
  EXPECT_EQ(p.tp_category, "syscalls");
  EXPECT_EQ(p.tp_name, "sys_enter_openat");
  EXPECT_EQ(p.exit_tp_name, "sys_exit_openat");
  EXPECT_GT(p.tp_id, 0);
  EXPECT_GT(p.exit_tp_id, 0);
  EXPECT_NE(p.tp_id, p.exit_tp_id);
  EXPECT_EQ(p.syscall_nr, 257);

  std::vector<std::string> names;
  for (const auto& f : p.fields) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"time", "cpu", "pid", "tid", "uid", "comm", "probe",
                                             "args.dfd", "args.filename", "args.flags", "args.mode",
                                             "ret", "errno", "latency", "ustack", "kstack"}));

  const Field* dfd = p.FindField("args.dfd");
  ASSERT_NE(dfd, nullptr);
  EXPECT_EQ(dfd->source, FieldSource::kCtx);
  EXPECT_EQ(dfd->offset, 16);
  EXPECT_EQ(dfd->size, 8);
  EXPECT_EQ(dfd->index, 0);
  EXPECT_EQ(dfd->type, Type::Int(true));
  EXPECT_EQ(dfd->c_type, "int");

  const Field* filename = p.FindField("args.filename");
  ASSERT_NE(filename, nullptr);
  EXPECT_EQ(filename->offset, 24);
  EXPECT_EQ(filename->size, 8);
  EXPECT_EQ(filename->index, 1);
  EXPECT_EQ(filename->type, Type::UserPtr());
  EXPECT_EQ(filename->c_type, "const char *");

  const Field* flags = p.FindField("args.flags");
  ASSERT_NE(flags, nullptr);
  EXPECT_EQ(flags->offset, 32);
  EXPECT_EQ(flags->index, 2);
  EXPECT_EQ(flags->type, Type::Int(true));

  const Field* mode = p.FindField("args.mode");
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ(mode->offset, 40);
  EXPECT_EQ(mode->index, 3);
  EXPECT_EQ(mode->type, Type::Int(false));

  const Field* ret = p.FindField("ret");
  ASSERT_NE(ret, nullptr);
  EXPECT_EQ(ret->source, FieldSource::kRet);
  EXPECT_EQ(ret->type, Type::Int(true));
  EXPECT_EQ(ret->offset, 16);
  const Field* err = p.FindField("errno");
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->source, FieldSource::kErrno);
  EXPECT_EQ(err->type, Type::Int(true));
  const Field* latency = p.FindField("latency");
  ASSERT_NE(latency, nullptr);
  EXPECT_EQ(latency->source, FieldSource::kLatency);
  EXPECT_EQ(latency->type, Type::Int(false));
}

TEST(SyscallProvider, GlobReadStar) {
  SyscallProvider provider;
  auto probes = provider.Resolve("read*");
  ASSERT_TRUE(probes.ok()) << probes.status().message();
  std::vector<std::string> names;
  for (const auto& p : *probes) names.push_back(p.name);
  // Exactly the read-prefixed syscalls this kernel traces, in name order.
  EXPECT_EQ(names,
            (std::vector<std::string>{"syscall:read", "syscall:readahead", "syscall:readlink",
                                      "syscall:readlinkat", "syscall:readv"}));
  for (const auto& p : *probes) {
    EXPECT_EQ(p.syscall_nr, SyscallNumber(p.name.substr(8))) << p.name;
    EXPECT_GT(p.tp_id, 0) << p.name;
  }
}

TEST(SyscallProvider, EveryTracedSyscallHasANumber) {
  SyscallProvider provider;
  auto names = provider.List("*");
  ASSERT_TRUE(names.ok());
  EXPECT_GT(names->size(), 300u);
  for (const auto& n : *names) EXPECT_GE(SyscallNumber(n.substr(8)), 0) << n;
}

TEST(SyscallProvider, KernelSpellingsMapToSyscallNames) {
  SyscallProvider provider;
  auto stat = provider.Resolve("stat");
  ASSERT_TRUE(stat.ok()) << stat.status().message();
  EXPECT_EQ((*stat)[0].name, "syscall:stat");
  EXPECT_EQ((*stat)[0].tp_name, "sys_enter_newstat");
  EXPECT_EQ((*stat)[0].exit_tp_name, "sys_exit_newstat");
  EXPECT_EQ((*stat)[0].syscall_nr, 4);
  // The tracefs spelling is accepted as well and resolves to the same probe.
  auto newstat = provider.Resolve("newstat");
  ASSERT_TRUE(newstat.ok());
  EXPECT_EQ((*newstat)[0].name, "syscall:stat");
}

TEST(SyscallProvider, ArgumentIndexesAndNoArgs) {
  SyscallProvider provider;
  auto getppid = provider.Resolve("getppid");
  ASSERT_TRUE(getppid.ok());
  // ret, errno, latency, ustack, kstack
  EXPECT_EQ((*getppid)[0].fields.size(), CommonFields().size() + 5);
  auto mmap = provider.Resolve("mmap");
  ASSERT_TRUE(mmap.ok());
  const Field* off = (*mmap)[0].FindField("args.off");
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->index, 5);
  EXPECT_EQ(off->offset, 56);
}

TEST(SyscallProvider, Errors) {
  SyscallProvider provider;
  auto unknown = provider.Resolve("opne");
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
  EXPECT_EQ(unknown.status().message(), "unknown probe 'syscall:opne'");
  auto glob = provider.Resolve("zzz*");
  EXPECT_EQ(glob.status().code(), Code::kNotFound);
  EXPECT_EQ(glob.status().message(), "no probe matches 'syscall:zzz*'");
  EXPECT_EQ(provider.Resolve("").status().code(), Code::kInvalidArgument);
  auto near = provider.Nearest("opne", 2);
  ASSERT_FALSE(near.empty());
  EXPECT_EQ(near[0], "syscall:open");
}

}  // namespace
}  // namespace fay
