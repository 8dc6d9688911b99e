#include <gtest/gtest.h>

#include "record/ebpf/capture_spec.h"
#include "schema/syscall_table.h"

namespace fay::record::ebpf {
namespace {

SyscallSpec Spec(const char* name) {
  int nr = SyscallNumber(name);
  EXPECT_GE(nr, 0) << name;
  return BuildSyscallSpec(nr);
}

TEST(EbpfCaptureSpec, ReadIsDataSizedByRetAtExit) {
  SyscallSpec s = Spec("read");
  EXPECT_EQ(s.enter[0].kind, kRuleNone);
  EXPECT_EQ(s.exit[0].kind, kRuleBytes);
  EXPECT_EQ(s.exit[0].arg, 1);
  EXPECT_EQ(s.exit[0].src, kSrcRet);
  EXPECT_EQ(s.exit[0].flags, 0);
  EXPECT_EQ(s.exit[1].kind, kRuleNone);
  uint64_t args[6] = {3, 0x1000, 4096, 0, 0, 0}, len = 0;
  ASSERT_TRUE(RuleLength(s.exit[0], args, 17, 0, &len));
  EXPECT_EQ(len, 17u);
  ASSERT_TRUE(RuleLength(s.exit[0], args, 0, 0, &len));  // EOF: an empty buffer is recorded
  EXPECT_EQ(len, 0u);
}

TEST(EbpfCaptureSpec, WriteIsDataSizedByCountAtEntry) {
  SyscallSpec s = Spec("write");
  EXPECT_EQ(s.enter[0].kind, kRuleBytes);
  EXPECT_EQ(s.enter[0].arg, 1);
  EXPECT_EQ(s.enter[0].src, kSrcArg);
  EXPECT_EQ(s.enter[0].len_arg, 2);
  EXPECT_EQ(s.exit[0].kind, kRuleNone);
  uint64_t args[6] = {1, 0x1000, 123456, 0, 0, 0}, len = 0;
  ASSERT_TRUE(RuleLength(s.enter[0], args, -1, 0, &len));
  EXPECT_EQ(len, 123456u);
}

TEST(EbpfCaptureSpec, OpenatPathIsAStringAtEntry) {
  SyscallSpec s = Spec("openat");
  EXPECT_EQ(s.enter[0].kind, kRuleString);
  EXPECT_EQ(s.enter[0].arg, 1);
  EXPECT_EQ(s.enter[1].kind, kRuleNone);
  EXPECT_EQ(s.exit[0].kind, kRuleNone);
}

TEST(EbpfCaptureSpec, StructsHaveTheirFixedSize) {
  SyscallSpec st = Spec("newfstatat");
  EXPECT_EQ(st.enter[0].kind, kRuleString);
  EXPECT_EQ(st.exit[0].kind, kRuleBytes);
  EXPECT_EQ(st.exit[0].arg, 2);
  EXPECT_EQ(st.exit[0].src, kSrcFixed);
  EXPECT_EQ(st.exit[0].fixed, 144u);
  EXPECT_EQ(Spec("uname").exit[0].fixed, 390u);
  EXPECT_EQ(Spec("statx").exit[0].fixed, 256u);
  SyscallSpec p = Spec("pipe2");
  EXPECT_EQ(p.exit[0].fixed, 8u);
  EXPECT_EQ(p.exit[0].flags, kRuleSkipZero);
}

TEST(EbpfCaptureSpec, GetcwdIsAStringAtExitAndReadlinkSizedByRet) {
  SyscallSpec g = Spec("getcwd");
  EXPECT_EQ(g.enter[0].kind, kRuleNone);
  EXPECT_EQ(g.exit[0].kind, kRuleString);
  EXPECT_EQ(g.exit[0].arg, 0);
  SyscallSpec r = Spec("readlink");
  EXPECT_EQ(r.enter[0].kind, kRuleString);
  EXPECT_EQ(r.exit[0].src, kSrcRet);
  EXPECT_EQ(r.exit[0].arg, 1);
}

TEST(EbpfCaptureSpec, AcceptSockaddrSizedThroughThePointerCappedAt128) {
  SyscallSpec s = Spec("accept");
  // addrlen is in/out: captured at entry and at exit; the sockaddr only at exit.
  EXPECT_EQ(s.exit[0].kind, kRuleBytes);
  EXPECT_EQ(s.exit[0].arg, 1);
  EXPECT_EQ(s.exit[0].src, kSrcArgPtr);
  EXPECT_EQ(s.exit[0].len_arg, 2);
  uint64_t args[6] = {3, 0x1000, 0x2000, 0, 0, 0}, len = 0;
  ASSERT_TRUE(RuleLength(s.exit[0], args, 4, 500, &len));
  EXPECT_EQ(len, 128u);
  ASSERT_TRUE(RuleLength(s.exit[0], args, 4, 16, &len));
  EXPECT_EQ(len, 16u);
  EXPECT_FALSE(RuleLength(s.exit[0], args, 4, 0, &len));  // zero length: nothing, like ptrace
  args[2] = 0;
  EXPECT_FALSE(RuleLength(s.exit[0], args, 4, 16, &len));  // no addrlen pointer
}

TEST(EbpfCaptureSpec, SelectFdSetsRoundUpToWords) {
  SyscallSpec s = Spec("select");
  ASSERT_EQ(s.enter[0].kind, kRuleBytes);
  EXPECT_EQ(s.enter[0].flags, kRuleU32 | kRuleFdSetBits);
  uint64_t args[6] = {65, 1, 0, 0, 0, 0}, len = 0;
  ASSERT_TRUE(RuleLength(s.enter[0], args, -1, 0, &len));
  EXPECT_EQ(len, 16u);
  args[0] = 0xffffffff00000001ull;  // an int: the high half is not part of it
  ASSERT_TRUE(RuleLength(s.enter[0], args, -1, 0, &len));
  EXPECT_EQ(len, 8u);
}

TEST(EbpfCaptureSpec, PollfdArrayIsCountTimesEight) {
  SyscallSpec s = Spec("poll");
  ASSERT_EQ(s.enter[0].kind, kRuleBytes);
  uint64_t args[6] = {0x1000, 3, 0, 0, 0, 0}, len = 0;
  ASSERT_TRUE(RuleLength(s.enter[0], args, -1, 0, &len));
  EXPECT_EQ(len, 24u);
}

TEST(EbpfCaptureSpec, EveryMemoryArgumentHasARule) {
  for (int nr = 0; nr < kMaxNr; ++nr) EXPECT_FALSE(HasUncapturedMemory(nr)) << nr;
  SyscallSpec send = Spec("sendmsg");
  EXPECT_EQ(send.enter[0].kind, kRuleMsghdr);
  EXPECT_EQ(send.enter[0].src, kSrcFixed);
  SyscallSpec recv = Spec("recvmsg");
  EXPECT_EQ(recv.exit[0].kind, kRuleMsghdr);
  EXPECT_EQ(recv.exit[0].src, kSrcRet);  // what came out limits the elements
  EXPECT_FALSE(HasUncapturedMemory(SyscallNumber("execve")));
  EXPECT_FALSE(HasUncapturedMemory(SyscallNumber("writev")));
  EXPECT_FALSE(HasUncapturedMemory(SyscallNumber("fcntl")));
  EXPECT_FALSE(HasUncapturedMemory(SyscallNumber("read")));
}

TEST(EbpfCaptureSpec, PointerArraysIovecsAndLocksHaveTheirRules) {
  SyscallSpec e = Spec("execve");
  EXPECT_EQ(e.enter[0].kind, kRuleString);
  EXPECT_EQ(e.enter[1].kind, kRuleStrArray);
  EXPECT_EQ(e.enter[1].arg, 1);
  EXPECT_EQ(e.enter[2].kind, kRuleStrArray);
  EXPECT_EQ(e.enter[2].arg, 2);
  EXPECT_EQ(e.enter_rules, 3);

  SyscallSpec w = Spec("writev");
  EXPECT_EQ(w.enter[0].kind, kRuleIovec);
  EXPECT_EQ(w.enter[0].len_arg, 2);
  EXPECT_EQ(w.enter[0].src, kSrcFixed);  // every byte of every element goes in
  SyscallSpec r = Spec("readv");
  EXPECT_EQ(r.exit[0].kind, kRuleIovec);
  EXPECT_EQ(r.exit[0].src, kSrcRet);  // what came out is as long as the return value
  EXPECT_EQ(r.exit_rules, 1u);

  SyscallSpec f = Spec("fcntl");
  EXPECT_EQ(f.enter[0].kind, kRuleBytes);
  EXPECT_EQ(f.enter[0].fixed, 32u);
  EXPECT_EQ(f.enter[0].flags, kRuleFcntlTakesLock);
  EXPECT_EQ(f.exit[0].flags, kRuleFcntlReturnsLock);
}

TEST(EbpfCaptureSpec, UndecodedSyscallsCaptureNothing) {
  SyscallSpec s = BuildSyscallSpec(511);
  for (const Rule& r : s.enter) EXPECT_EQ(r.kind, kRuleNone);
  for (const Rule& r : s.exit) EXPECT_EQ(r.kind, kRuleNone);
}

TEST(EbpfCaptureSpec, ReadWriteAndPathsHaveThePlainRuleTheProbesStageThemselves) {
  SyscallSpec w = Spec("write");
  EXPECT_EQ(w.enter_plain, 1);
  EXPECT_EQ(w.exit_plain, 0);  // no exit rule at all
  SyscallSpec r = Spec("read");
  EXPECT_EQ(r.enter_plain, 0);
  EXPECT_EQ(r.exit_plain, 1);
  EXPECT_EQ(r.exit[0].src, kSrcRet);
  // A path alone is plain too; iovecs, several rules, flagged or fixed lengths take the loop.
  EXPECT_EQ(Spec("openat").enter_plain, 1);
  EXPECT_EQ(Spec("newfstatat").enter_plain, 1);
  EXPECT_EQ(Spec("newfstatat").exit_plain, 0);  // struct stat: a fixed length
  EXPECT_EQ(Spec("rename").enter_plain, 0);     // two paths
  EXPECT_EQ(Spec("readv").exit_plain, 0);
  EXPECT_EQ(Spec("fcntl").enter_plain, 0);
  EXPECT_EQ(Spec("execve").enter_plain, 0);
  Rule plain;
  plain.kind = kRuleBytes;
  plain.src = kSrcArg;
  EXPECT_TRUE(IsPlainRule(plain));
  plain.max = 16;
  EXPECT_FALSE(IsPlainRule(plain));
  plain.max = 0;
  plain.flags = kRuleU32;
  EXPECT_FALSE(IsPlainRule(plain));
}

}  // namespace
}  // namespace fay::record::ebpf
