#include "schema/syscall_set.h"

#include <gtest/gtest.h>

#include "schema/syscall_table.h"

namespace fay {
namespace {

int Nr(const char* name) {
  return SyscallNumber(name);
}

TEST(SyscallSet, Names) {
  auto set = ParseSyscallSet("open,close");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->Numbers(), (std::vector<int>{2, 3}));
  EXPECT_TRUE(set->Contains(2));
  EXPECT_FALSE(set->Contains(0));
  EXPECT_FALSE(set->Contains(-1));
  EXPECT_FALSE(set->Contains(5000));
}

TEST(SyscallSet, TracePrefixAndSpaces) {
  auto set = ParseSyscallSet("trace=read, write");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->Numbers(), (std::vector<int>{0, 1}));
}

TEST(SyscallSet, Classes) {
  auto file = ParseSyscallSet("%file");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->Contains(Nr("openat")));
  EXPECT_TRUE(file->Contains(Nr("stat")));
  EXPECT_TRUE(file->Contains(Nr("execve")));
  EXPECT_FALSE(file->Contains(Nr("read")));
  EXPECT_FALSE(file->Contains(Nr("close")));
  auto desc = ParseSyscallSet("%desc");
  ASSERT_TRUE(desc.ok());
  EXPECT_TRUE(desc->Contains(Nr("read")));
  EXPECT_TRUE(desc->Contains(Nr("close")));
  EXPECT_FALSE(desc->Contains(Nr("stat")));
  auto stat = ParseSyscallSet("%%stat");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->Numbers(), (std::vector<int>{4, 5, 6, 262, 332}));
  auto legacy = ParseSyscallSet("network");
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->Numbers(), ParseSyscallSet("%net")->Numbers());
  auto mixed = ParseSyscallSet("%memory,write");
  ASSERT_TRUE(mixed.ok());
  EXPECT_TRUE(mixed->Contains(Nr("mmap")));
  EXPECT_TRUE(mixed->Contains(Nr("write")));
  EXPECT_FALSE(mixed->Contains(Nr("read")));
}

TEST(SyscallSet, AllNoneAndNegation) {
  auto all = ParseSyscallSet("all");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->IsAll());
  EXPECT_EQ(all->Numbers().size(), SyscallCount());
  auto none = ParseSyscallSet("none");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->Empty());
  auto not_mem = ParseSyscallSet("!%memory,close");
  ASSERT_TRUE(not_mem.ok());
  EXPECT_FALSE(not_mem->Contains(Nr("mmap")));
  EXPECT_FALSE(not_mem->Contains(Nr("close")));
  EXPECT_TRUE(not_mem->Contains(Nr("read")));
  EXPECT_EQ(not_mem->Numbers().size(),
            SyscallCount() - ParseSyscallSet("%memory")->Numbers().size() - 1);
  auto not_all = ParseSyscallSet("!all");
  ASSERT_TRUE(not_all.ok());
  EXPECT_TRUE(not_all->Empty());
}

TEST(SyscallSet, RegexAndOptional) {
  auto re = ParseSyscallSet("/^getres");
  ASSERT_TRUE(re.ok()) << re.status().message();
  EXPECT_EQ(re->Numbers(), (std::vector<int>{118, 120}));
  auto opt = ParseSyscallSet("?nosuchcall,read");
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ(opt->Numbers(), (std::vector<int>{0}));
}

TEST(SyscallSet, Errors) {
  auto typo = ParseSyscallSet("opnat");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(typo.status().message(), "unknown syscall 'opnat' (did you mean 'openat'?)");
  auto cls = ParseSyscallSet("%fille");
  ASSERT_FALSE(cls.ok());
  EXPECT_EQ(cls.status().message(), "unknown syscall class '%fille' (did you mean '%file'?)");
  auto far = ParseSyscallSet("read,qqqqqqqqqqqqqqqqqqqqqqqq");
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().message(), "unknown syscall 'qqqqqqqqqqqqqqqqqqqqqqqq'");
  EXPECT_FALSE(ParseSyscallSet("").ok());
  EXPECT_FALSE(ParseSyscallSet("read,,write").ok());
  EXPECT_FALSE(ParseSyscallSet("/[").ok());
  EXPECT_FALSE(ParseSyscallSet("/^zzz").ok());
}

}  // namespace
}  // namespace fay
