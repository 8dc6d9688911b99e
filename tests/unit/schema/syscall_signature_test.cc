#include <gtest/gtest.h>

#include <set>
#include <string>

#include "schema/syscall_capture.h"
#include "schema/syscall_table.h"
#include "schema/syscall_values.h"

namespace fay {
namespace {

TEST(SyscallSignature, EveryRowHasASignature) {
  EXPECT_EQ(kSyscallTableVersion, 1u);
  for (const SyscallInfo& s : Syscalls()) {
    const SyscallSignature& sig = Signature(s.nr);
    EXPECT_EQ(sig.nr, s.nr);
    EXPECT_EQ(sig.name, s.name);
    EXPECT_EQ(sig.classes, s.classes) << s.name;
    EXPECT_LE(sig.nargs, 6);
  }
  EXPECT_EQ(Signature(-1).decoded, false);
  EXPECT_EQ(Signature(100000).decoded, false);
  EXPECT_EQ(Signature(SyscallNumber("kexec_load")).decoded, false);
  EXPECT_EQ(Signature(SyscallNumber("kexec_load")).nargs, 6);
}

TEST(SyscallSignature, AtLeast150FullyDecoded) {
  EXPECT_GE(DecodedSyscallCount(), 150u);
  size_t decoded = 0;
  for (const SyscallInfo& s : Syscalls()) decoded += Signature(s.nr).decoded;
  EXPECT_EQ(decoded, DecodedSyscallCount());
  // The calls every real program makes are among them.
  for (const char* name : {"read",           "write",          "openat",     "close",
                           "fstat",          "newfstatat",     "statx",      "mmap",
                           "mprotect",       "munmap",         "brk",        "rt_sigaction",
                           "rt_sigprocmask", "ioctl",          "pread64",    "access",
                           "execve",         "exit_group",     "getdents64", "readlink",
                           "getcwd",         "uname",          "pipe2",      "dup2",
                           "fcntl",          "clone",          "clone3",     "wait4",
                           "socket",         "connect",        "sendto",     "recvfrom",
                           "sendmsg",        "recvmsg",        "getrandom",  "prlimit64",
                           "futex",          "poll",           "lseek",      "writev",
                           "readv",          "getxattr",       "listxattr",  "socketpair",
                           "clock_gettime",  "set_tid_address"})
    EXPECT_TRUE(Signature(SyscallNumber(name)).decoded) << name;
}

TEST(SyscallSignature, RowsAreWellFormed) {
  for (const SyscallInfo& s : Syscalls()) {
    const SyscallSignature& sig = Signature(s.nr);
    if (!sig.decoded) continue;
    std::set<std::string_view> names;
    for (int i = 0; i < sig.nargs; ++i) {
      const ArgSpec& a = sig.args[i];
      EXPECT_FALSE(a.name.empty()) << s.name << " arg " << i;
      EXPECT_TRUE(names.insert(a.name).second) << s.name << " repeats " << a.name;
      if (a.type == ArgType::kFlags || a.type == ArgType::kEnum) {
        EXPECT_NE(a.set, ValueSet::kNone) << s.name << "." << a.name;
        EXPECT_FALSE(ValueNames(a.set).empty()) << s.name << "." << a.name;
        EXPECT_EQ(IsFlagSet(a.set), a.type == ArgType::kFlags) << s.name << "." << a.name;
      }
      bool memory = a.type >= ArgType::kPath;
      if (memory) {
        EXPECT_NE(a.len, LenKind::kNone) << s.name << "." << a.name << " needs a length source";
      }
      if (a.len == LenKind::kArg || a.len == LenKind::kArgPtr) {
        EXPECT_GE(a.len_arg, 0) << s.name << "." << a.name;
        EXPECT_LT(a.len_arg, sig.nargs) << s.name << "." << a.name;
        EXPECT_NE(a.len_arg, i) << s.name << "." << a.name;
      }
      if (a.len == LenKind::kFixed) {
        EXPECT_GT(FixedArgSize(a.type), 0u) << s.name << "." << a.name;
      }
    }
    for (int i = sig.nargs; i < 6; ++i) EXPECT_EQ(sig.args[i].type, ArgType::kNone);
  }
}

TEST(SyscallSignature, SpotChecks) {
  const SyscallSignature& read = Signature(0);
  EXPECT_EQ(read.nargs, 3);
  EXPECT_EQ(read.args[1].type, ArgType::kBuf);
  EXPECT_EQ(read.args[1].dir, ArgDir::kOut);
  EXPECT_EQ(read.args[1].len, LenKind::kRet);
  const SyscallSignature& write = Signature(1);
  EXPECT_EQ(write.args[1].dir, ArgDir::kIn);
  EXPECT_EQ(write.args[1].len, LenKind::kArg);
  EXPECT_EQ(write.args[1].len_arg, 2);
  const SyscallSignature& openat = Signature(SyscallNumber("openat"));
  EXPECT_EQ(openat.args[0].type, ArgType::kDirfd);
  EXPECT_EQ(openat.args[1].type, ArgType::kPath);
  EXPECT_EQ(openat.args[2].set, ValueSet::kOpenFlags);
  const SyscallSignature& accept = Signature(SyscallNumber("accept"));
  EXPECT_EQ(accept.args[1].len, LenKind::kArgPtr);
  EXPECT_EQ(accept.args[2].dir, ArgDir::kInOut);
  EXPECT_EQ(Signature(SyscallNumber("mmap")).ret, RetType::kHex);
  EXPECT_EQ(Signature(SyscallNumber("exit_group")).ret, RetType::kNoReturn);
  EXPECT_EQ(Signature(SyscallNumber("poll")).args[0].dir, ArgDir::kInOut);
}

// Membership as `strace -e trace=%CLASS` selects on x86-64.
TEST(SyscallClasses, MatchStrace) {
  auto in = [](const char* name, uint32_t cls) { return (FindSyscall(name)->classes & cls) != 0; };
  for (const char* n : {"open", "openat", "stat", "lstat", "execve", "access", "unlink",
                        "newfstatat", "statx", "getcwd", "chdir", "readlink", "statfs"})
    EXPECT_TRUE(in(n, kClassFile)) << n;
  for (const char* n : {"read", "write", "close", "fstat", "dup2", "pipe2", "openat", "mmap",
                        "fcntl", "sendfile", "epoll_wait", "newfstatat", "execveat"})
    EXPECT_TRUE(in(n, kClassDesc)) << n;
  for (const char* n : {"close", "read", "fstat", "mmap", "fchdir", "getpid"})
    EXPECT_FALSE(in(n, kClassFile)) << n;
  for (const char* n : {"stat", "getcwd", "execve", "socket", "close_range", "getpid"})
    EXPECT_FALSE(in(n, kClassDesc)) << n;
  for (const char* n : {"socket", "connect", "accept4", "sendmsg", "recvmmsg", "sendfile"})
    EXPECT_TRUE(in(n, kClassNet)) << n;
  for (const char* n : {"clone", "clone3", "fork", "execve", "exit_group", "wait4", "kill"})
    EXPECT_TRUE(in(n, kClassProcess)) << n;
  for (const char* n : {"mmap", "munmap", "brk", "mprotect", "madvise", "shmat"})
    EXPECT_TRUE(in(n, kClassMemory)) << n;
  for (const char* n : {"rt_sigaction", "rt_sigprocmask", "kill", "tgkill", "signalfd4"})
    EXPECT_TRUE(in(n, kClassSignal)) << n;
  EXPECT_TRUE(in("semop", kClassIpc));
  EXPECT_TRUE(in("setresuid", kClassCreds));
  EXPECT_TRUE(in("prctl", kClassCreds));
  EXPECT_TRUE(in("clock_gettime", kClassClock));
  EXPECT_FALSE(in("nanosleep", kClassClock));
  EXPECT_EQ(FindSyscall("stat")->classes, kClassFile | kClassStat | kClassStatLike);
  EXPECT_EQ(FindSyscall("lstat")->classes, kClassFile | kClassLstat | kClassStatLike);
  EXPECT_EQ(FindSyscall("fstat")->classes, kClassDesc | kClassFstat | kClassStatLike);
  EXPECT_EQ(FindSyscall("statx")->classes, kClassFile | kClassDesc | kClassFstat | kClassStatLike);
  EXPECT_EQ(FindSyscall("statfs")->classes, kClassFile | kClassStatfs | kClassStatfsLike);
  EXPECT_EQ(FindSyscall("fstatfs")->classes, kClassDesc | kClassFstatfs | kClassStatfsLike);
  EXPECT_EQ(FindSyscall("ustat")->classes, kClassStatfsLike);
  EXPECT_EQ(FindSyscall("getpid")->classes, kClassPure);
  EXPECT_EQ(FindSyscall("sched_yield")->classes, 0u);
}

TEST(SyscallClasses, Names) {
  EXPECT_EQ(SyscallClassByName("%file"), kClassFile);
  EXPECT_EQ(SyscallClassByName("file"), kClassFile);
  EXPECT_EQ(SyscallClassByName("%network"), kClassNet);
  EXPECT_EQ(SyscallClassByName("%net"), kClassNet);
  EXPECT_EQ(SyscallClassByName("%%stat"), kClassStatLike);
  EXPECT_EQ(SyscallClassByName("%%statfs"), kClassStatfsLike);
  EXPECT_EQ(SyscallClassByName("%stat"), kClassStat);
  EXPECT_EQ(SyscallClassByName("%bogus"), 0u);
  EXPECT_EQ(SyscallClassNames().size(), 18u);
}

TEST(SyscallValues, Flags) {
  EXPECT_EQ(FormatFlags(ValueSet::kOpenFlags, 0), "O_RDONLY");
  EXPECT_EQ(FormatFlags(ValueSet::kOpenFlags, 04010000), "O_RDONLY|O_SYNC");
  EXPECT_EQ(FormatFlags(ValueSet::kOpenFlags, 020200002), "O_RDWR|O_TMPFILE");
  EXPECT_EQ(FormatFlags(ValueSet::kOpenFlags, 01 | 0x40000000), "O_WRONLY|0x40000000");
  EXPECT_EQ(FormatFlags(ValueSet::kProt, 0), "PROT_NONE");
  EXPECT_EQ(FormatFlags(ValueSet::kMmapFlags, 0x22), "MAP_PRIVATE|MAP_ANONYMOUS");
  EXPECT_EQ(FormatFlags(ValueSet::kFdOpenFlags, 0), "0");
  EXPECT_EQ(FormatEnum(ValueSet::kSeekWhence, 2), "SEEK_END");
  EXPECT_EQ(FormatEnum(ValueSet::kSeekWhence, 9), "0x9 /* SEEK_??? */");
  EXPECT_EQ(FormatEnum(ValueSet::kRusageWho, static_cast<uint64_t>(-1)), "RUSAGE_CHILDREN");
  EXPECT_EQ(SignalName(9), "SIGKILL");
  EXPECT_EQ(SignalName(0), "0");
  // strace 6.1 prints the kernel's numbering: kill(pid, 34) is SIGRT_2, 32 is SIGRTMIN, 29 SIGIO.
  EXPECT_EQ(SignalName(34), "SIGRT_2");
  EXPECT_EQ(SignalName(32), "SIGRTMIN");
  EXPECT_EQ(SignalName(29), "SIGIO");
  EXPECT_EQ(SignalShortName(33), "RT_1");
  EXPECT_EQ(ErrnoName(2), "ENOENT");
  EXPECT_EQ(ErrnoMessage(2), "No such file or directory");
  EXPECT_EQ(ErrnoName(512), "ERESTARTSYS");
  EXPECT_EQ(ErrnoName(4000), "");
}

}  // namespace
}  // namespace fay
