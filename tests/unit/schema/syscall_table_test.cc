#include "schema/syscall_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace fay {
namespace {

TEST(SyscallTable, NameToNumber) {
  EXPECT_EQ(SyscallNumber("read"), 0);
  EXPECT_EQ(SyscallNumber("write"), 1);
  EXPECT_EQ(SyscallNumber("openat"), 257);
  EXPECT_EQ(SyscallNumber("getppid"), 110);
  EXPECT_EQ(SyscallNumber("set_mempolicy_home_node"), 450);
  EXPECT_EQ(SyscallNumber("cachestat"), 451);
  EXPECT_EQ(SyscallNumber("file_setattr"), 469);
  EXPECT_EQ(SyscallNumber("uretprobe"), 335);
  EXPECT_EQ(SyscallNumber("no_such_call"), -1);
  EXPECT_EQ(SyscallNumber(""), -1);
}

TEST(SyscallTable, NumberToName) {
  EXPECT_EQ(SyscallName(0), "read");
  EXPECT_EQ(SyscallName(59), "execve");
  EXPECT_EQ(SyscallName(231), "exit_group");
  EXPECT_EQ(SyscallName(435), "clone3");
  EXPECT_EQ(SyscallName(-1), "");
  EXPECT_EQ(SyscallName(337), "");  // gap between uprobe (336) and pidfd_send_signal (424)
  EXPECT_EQ(SyscallName(100000), "");
}

TEST(SyscallTable, CountAndUniqueness) {
  // 0..334 dense, 335 uretprobe, 336 uprobe, then 424..469.
  EXPECT_EQ(SyscallCount(), 335u + 2 + 46);
  std::set<int> numbers;
  std::set<std::string_view> names;
  int previous = -1;
  for (const auto& s : Syscalls()) {
    EXPECT_TRUE(numbers.insert(s.nr).second) << s.nr;
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_GT(s.nr, previous) << "table must be ordered by number";
    previous = s.nr;
    EXPECT_EQ(SyscallName(s.nr), s.name);
    EXPECT_EQ(SyscallNumber(s.name), s.nr);
  }
}

TEST(SyscallTable, TracefsEventNames) {
  EXPECT_EQ(FindSyscall("stat")->tracefs_event, "newstat");
  EXPECT_EQ(FindSyscall("uname")->tracefs_event, "newuname");
  EXPECT_EQ(FindSyscall("sendfile")->tracefs_event, "sendfile64");
  EXPECT_EQ(FindSyscall("umount2")->tracefs_event, "umount");
  EXPECT_EQ(FindSyscall("openat")->tracefs_event, "openat");
  EXPECT_EQ(FindSyscallByEvent("newfstat")->name, "fstat");
  EXPECT_EQ(FindSyscallByEvent("newfstatat")->name, "newfstatat");
  EXPECT_EQ(FindSyscallByEvent("nope"), nullptr);
}

}  // namespace
}  // namespace fay
