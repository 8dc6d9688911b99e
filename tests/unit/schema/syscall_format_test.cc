// The printer against strace 6.1 as the oracle. Each expected string is the line `strace -f`
// printed for the same call (a test program doing exactly these calls with these values), kept
// verbatim with its pid and column padding; Strace() drops those two, which FormatSyscall
// leaves to its caller.
#include "schema/syscall_format.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include <cstring>
#include <string>

#include "fake_tracee.h"

namespace fay {
namespace {

using testing::Call;
using testing::FakeMemory;

std::string Strace(std::string_view line) {
  size_t sp = line.find(' ');
  if (sp != std::string_view::npos &&
      line.substr(0, sp).find_first_not_of("0123456789") == std::string_view::npos)
    line.remove_prefix(sp + 1);
  std::string s(line);
  size_t eq = s.rfind(" = ");
  size_t start = eq;
  while (start > 0 && s[start - 1] == ' ') --start;
  return s.substr(0, start) + s.substr(eq);
}

std::string Fmt(const SyscallEvent& ev, FormatOptions opts = {}) {
  return FormatSyscall(ev, opts);
}

std::vector<uint8_t> StatBytes(uint32_t mode, int64_t size, uint64_t rdev = 0) {
  struct stat st;
  std::memset(&st, 0, sizeof st);
  st.st_mode = mode;
  st.st_size = size;
  st.st_rdev = rdev;
  std::vector<uint8_t> b(sizeof st);
  std::memcpy(b.data(), &st, sizeof st);
  return b;
}

TEST(SyscallFormat, StraceStripsPidAndPadding) {
  EXPECT_EQ(Strace("28092 mkdir(\"/tmp/fo\", 0755)            = 0"),
            "mkdir(\"/tmp/fo\", 0755) = 0");
}

TEST(SyscallFormat, PathsModesAndErrors) {
  {
    Call c("mkdir");
    c.Args({c.Str("/tmp/fo"), 0755});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 mkdir(\"/tmp/fo\", 0755)            = 0"));
  }
  {
    Call c("openat");
    c.Args({static_cast<uint64_t>(-100), c.Str("/tmp/fo/a.txt"), 01 | 0100 | 01000, 0644});
    EXPECT_EQ(
        Fmt(c.Run(3)),
        Strace("28092 openat(AT_FDCWD, \"/tmp/fo/a.txt\", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 3"));
  }
  {
    Call c("openat");
    c.Args({static_cast<uint64_t>(-100), c.Str("/tmp/fo/a.txt"), 02000000, 0x7fff});
    EXPECT_EQ(Fmt(c.Run(3)),
              Strace("28092 openat(AT_FDCWD, \"/tmp/fo/a.txt\", O_RDONLY|O_CLOEXEC) = 3"));
  }
  {
    Call c("openat");
    c.Args({0xffffff9c, c.Str("/nonexistent/x"), 0});
    EXPECT_EQ(Fmt(c.Run(-2)), Strace("28092 openat(AT_FDCWD, \"/nonexistent/x\", O_RDONLY) = -1 "
                                     "ENOENT (No such file or directory)"));
  }
  {
    Call c("openat");
    c.Args({0xffffff9c, c.Str("/tmp/fo"), 04000 | 02000000 | 0200000});
    EXPECT_EQ(
        Fmt(c.Run(15)),
        Strace(
            "28092 openat(AT_FDCWD, \"/tmp/fo\", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 15"));
  }
  {
    Call c("open");
    c.Args({c.Str("/tmp/fo/b"), 02 | 0100 | 0200 | 02000, 0600});
    EXPECT_EQ(Fmt(c.Run(4)),
              Strace("28092 open(\"/tmp/fo/b\", O_RDWR|O_CREAT|O_EXCL|O_APPEND, 0600) = 4"));
  }
  {
    Call c("close");
    c.Args({99});
    EXPECT_EQ(Fmt(c.Run(-9)),
              Strace("28092 close(99)                         = -1 EBADF (Bad file descriptor)"));
  }
  {
    Call c("access");
    c.Args({c.Str("/tmp/fo/a.txt"), 4 | 2});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 access(\"/tmp/fo/a.txt\", R_OK|W_OK) = 0"));
  }
  {
    Call c("access");
    c.Args({c.Str("/tmp/fo/zz"), 0});
    EXPECT_EQ(
        Fmt(c.Run(-2)),
        Strace(
            "28092 access(\"/tmp/fo/zz\", F_OK)        = -1 ENOENT (No such file or directory)"));
  }
  {
    Call c("faccessat2");
    c.Args({0xffffff9c, c.Str("/tmp/fo"), 1, 0x200});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("28092 faccessat2(AT_FDCWD, \"/tmp/fo\", X_OK, AT_EACCESS) = 0"));
  }
  {
    Call c("rename");
    c.Args({c.Str("/tmp/fo/b"), c.Str("/tmp/fo/c")});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 rename(\"/tmp/fo/b\", \"/tmp/fo/c\")  = 0"));
  }
  {
    Call c("unlinkat");
    c.Args({0xffffff9c, c.Str("/tmp/fo/l"), 0});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 unlinkat(AT_FDCWD, \"/tmp/fo/l\", 0) = 0"));
  }
  {
    Call c("fchmod");
    c.Args({3, 04755});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 fchmod(3, 04755)                  = 0"));
  }
  {
    Call c("umask");
    c.Args({022});
    EXPECT_EQ(Fmt(c.Run(022)), Strace("28092 umask(022)                        = 022"));
  }
  {
    // Paths are not cut by -s (strace -s 5 printed this line).
    Call c("openat");
    c.Args({0xffffff9c, c.Str("/tmp/oracle/a-very-long-path-name-that-exceeds-the-limit/x"), 0});
    FormatOptions opts;
    opts.string_limit = 5;
    EXPECT_EQ(
        Fmt(c.Run(-2), opts),
        Strace("openat(AT_FDCWD, \"/tmp/oracle/a-very-long-path-name-that-exceeds-the-limit/x\", "
               "O_RDONLY) = -1 ENOENT (No such file or directory)"));
  }
}

TEST(SyscallFormat, DataBuffers) {
  {
    Call c("write");
    c.Args({3, c.Str("hello\n"), 6});
    EXPECT_EQ(Fmt(c.Run(6)), Strace("28092 write(3, \"hello\\n\", 6)            = 6"));
  }
  {
    Call c("write");
    c.Args({3, c.Str("0123456789abcdefghijklmnopqrstuvwxyzABCDEF"), 42});
    EXPECT_EQ(Fmt(c.Run(42)),
              Strace("28092 write(3, \"0123456789abcdefghijklmnopqrstuv\"..., 42) = 42"));
  }
  {
    const char data[] = "\0\1\x7f\xff\t\r\"\\7x\0018";
    Call c("write");
    c.Args({3, c.Put(data, 13), 13});
    EXPECT_EQ(Fmt(c.Run(13)),
              Strace("28092 write(3, \"\\0\\1\\177\\377\\t\\r\\\"\\\\7x\\18\\0\", 13) = 13"));
  }
  {
    Call c("pwrite64");
    c.Args({3, c.Str("zz"), 2, 100});
    EXPECT_EQ(Fmt(c.Run(2)), Strace("28092 pwrite64(3, \"zz\", 2, 100)         = 2"));
  }
  {
    std::string file = "hello\n0123456789abcdefghijklmnopqrstuvwxyzABCDEF";
    file.resize(102, 'z');
    Call c("read");
    uint64_t buf = c.Put(std::string(4096, '\0').data(), 4096);
    c.Args({3, buf, 4096});
    SyscallEvent ev =
        c.Run(102, [&](FakeMemory& m) { std::memcpy(m.At(buf).data(), file.data(), 102); });
    EXPECT_EQ(Fmt(ev),
              Strace("28092 read(3, \"hello\\n0123456789abcdefghijklmnop\"..., 4096) = 102"));
  }
  {
    Call c("pread64");
    uint64_t buf = c.Put("ello\n", 5);
    c.Args({3, buf, 5, 1});
    EXPECT_EQ(Fmt(c.Run(5)), Strace("28092 pread64(3, \"ello\\n\", 5, 1)        = 5"));
  }
  {
    Call c("readlink");
    uint64_t buf = c.Put("a.txt", 5);
    c.Args({c.Str("/tmp/fo/l"), buf, 4096});
    EXPECT_EQ(Fmt(c.Run(5)), Strace("28092 readlink(\"/tmp/fo/l\", \"a.txt\", 4096) = 5"));
  }
  {
    Call c("getcwd");
    c.Args({c.Str("/tmp/fo"), 4096});
    EXPECT_EQ(Fmt(c.Run(8)), Strace("28092 getcwd(\"/tmp/fo\", 4096)           = 8"));
  }
  {
    uint8_t rnd[8] = {0x3d, 0xcd, 0xc3, 0xc1, 0x22, 0xc5, 0xbf, 0x19};
    Call c("getrandom");
    c.Args({c.Put(rnd, 8), 8, 1});
    EXPECT_EQ(
        Fmt(c.Run(8)),
        Strace(
            "28092 getrandom(\"\\x3d\\xcd\\xc3\\xc1\\x22\\xc5\\xbf\\x19\", 8, GRND_NONBLOCK) = 8"));
  }
  {
    // strace -s 5 and strace -x on the same write.
    const char data[] = "hello world, this is a hex dump\n\0\1\2";
    Call c("write");
    c.Args({1, c.Put(data, 35), 35});
    SyscallEvent ev = c.Run(35);
    FormatOptions s5;
    s5.string_limit = 5;
    EXPECT_EQ(Fmt(ev, s5), Strace("write(1, \"hello\"..., 35)                = 35"));
    FormatOptions x;
    x.hex_strings = true;
    EXPECT_EQ(Fmt(ev, x), Strace("write(1, \"hello world, this is a hex dump\\n\"..., 35) = 35"));
    EXPECT_EQ(FormatHexDump(ev),
              " | 00000  68 65 6c 6c 6f 20 77 6f  72 6c 64 2c 20 74 68 69  hello world, thi |\n"
              " | 00010  73 20 69 73 20 61 20 68  65 78 20 64 75 6d 70 0a  s is a hex dump. |\n"
              " | 00020  00 01 02                                          ...              |\n");
  }
  {
    Call c("writev");
    struct {
      uint64_t base, len;
    } iov[2] = {{c.Put("hello", 5), 5}, {c.Put(" world\n", 7), 7}};
    c.Args({6, c.Put(iov, sizeof iov), 2});
    EXPECT_EQ(Fmt(c.Run(12)), Strace("28092 writev(6, [{iov_base=\"hello\", iov_len=5}, "
                                     "{iov_base=\" world\\n\", iov_len=7}], 2) = 12"));
  }
  {
    Call c("readv");
    uint64_t b1 = c.Put("\0\0\0", 3), b2 = c.Put(std::string(20, '\0').data(), 20);
    struct {
      uint64_t base, len;
    } iov[2] = {{b1, 3}, {b2, 20}};
    c.Args({5, c.Put(iov, sizeof iov), 2});
    SyscallEvent ev = c.Run(12, [&](FakeMemory& m) {
      std::memcpy(m.At(b1).data(), "hel", 3);
      std::memcpy(m.At(b2).data(), "lo world\n", 9);
    });
    EXPECT_EQ(Fmt(ev), Strace("28092 readv(5, [{iov_base=\"hel\", iov_len=3}, {iov_base=\"lo "
                              "world\\n\", iov_len=20}], 2) = 12"));
  }
}

TEST(SyscallFormat, StatStructs) {
  {
    Call c("fstat");
    std::vector<uint8_t> st = StatBytes(S_IFREG | 0644, 102);
    c.Args({3, c.Put(st.data(), st.size())});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("28092 fstat(3, {st_mode=S_IFREG|0644, st_size=102, ...}) = 0"));
  }
  {
    Call c("lstat");
    std::vector<uint8_t> st = StatBytes(S_IFLNK | 0777, 5);
    c.Args({c.Str("/tmp/fo/l"), c.Put(st.data(), st.size())});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("28092 lstat(\"/tmp/fo/l\", {st_mode=S_IFLNK|0777, st_size=5, ...}) = 0"));
  }
  {
    Call c("newfstatat");
    std::vector<uint8_t> st = StatBytes(S_IFREG | 0644, 102);
    c.Args({3, c.Str(""), c.Put(st.data(), st.size()), 0x1000});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 newfstatat(3, \"\", {st_mode=S_IFREG|0644, st_size=102, "
                                    "...}, AT_EMPTY_PATH) = 0"));
  }
  {
    Call c("newfstatat");
    std::vector<uint8_t> st = StatBytes(S_IFCHR | 0666, 0, makedev(1, 3));
    c.Args({0xffffff9c, c.Str("/dev/null"), c.Put(st.data(), st.size()), 0});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("28092 newfstatat(AT_FDCWD, \"/dev/null\", {st_mode=S_IFCHR|0666, "
                     "st_rdev=makedev(0x1, 0x3), ...}, 0) = 0"));
  }
  {
    Call c("newfstatat");
    std::vector<uint8_t> st = StatBytes(S_IFREG | 0644, 102);
    c.Args({0xffffff9c, c.Str("/tmp/fo/a.txt"), c.Put(st.data(), st.size()), 0x100});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("28092 newfstatat(AT_FDCWD, \"/tmp/fo/a.txt\", {st_mode=S_IFREG|0644, "
                     "st_size=102, ...}, AT_SYMLINK_NOFOLLOW) = 0"));
  }
  {
    Call c("statx");
    uint8_t sx[256] = {};
    uint32_t mask = 0xfff | 0x1000;
    uint16_t mode = S_IFREG | 0644;
    uint64_t size = 470;
    std::memcpy(sx + 0, &mask, 4);
    std::memcpy(sx + 28, &mode, 2);
    std::memcpy(sx + 40, &size, 8);
    c.Args({0xffffff9c, c.Str("/tmp/oracle/hd.c"), 0x100, 0xfff, c.Put(sx, sizeof sx)});
    EXPECT_EQ(
        Fmt(c.Run(0)),
        Strace("statx(AT_FDCWD, \"/tmp/oracle/hd.c\", AT_STATX_SYNC_AS_STAT|AT_SYMLINK_NOFOLLOW, "
               "STATX_ALL, {stx_mask=STATX_ALL|STATX_MNT_ID, stx_attributes=0, "
               "stx_mode=S_IFREG|0644, stx_size=470, ...}) = 0"));
  }
  {
    // A failed stat prints the address, as strace does.
    Call c("stat");
    std::vector<uint8_t> st = StatBytes(0, 0);
    c.Args({c.Str("/nope"), c.Put(st.data(), st.size(), 0x7ffd1000)});
    EXPECT_EQ(Fmt(c.Run(-2)),
              "stat(\"/nope\", 0x7ffd1000) = -1 ENOENT (No such file or directory)");
  }
}

TEST(SyscallFormat, DescriptorCalls) {
  {
    Call c("lseek");
    c.Args({3, 0, 0});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 lseek(3, 0, SEEK_SET)             = 0"));
  }
  {
    Call c("pipe2");
    int fds[2] = {5, 6};
    c.Args({c.Obj(fds), 02000000});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 pipe2([5, 6], O_CLOEXEC)          = 0"));
  }
  {
    Call c("dup3");
    c.Args({6, 11, 02000000});
    EXPECT_EQ(Fmt(c.Run(11)), Strace("28092 dup3(6, 11, O_CLOEXEC)            = 11"));
  }
  {
    Call c("fcntl");
    c.Args({3, 1});
    EXPECT_EQ(Fmt(c.Run(1)),
              Strace("28092 fcntl(3, F_GETFD)                 = 0x1 (flags FD_CLOEXEC)"));
  }
  {
    Call c("fcntl");
    c.Args({0, 1});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("fcntl(0, F_GETFD) = 0"));
  }
  {
    Call c("fcntl");
    c.Args({3, 2, 1});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 fcntl(3, F_SETFD, FD_CLOEXEC)     = 0"));
  }
  {
    Call c("fcntl");
    c.Args({3, 3});
    EXPECT_EQ(
        Fmt(c.Run(0x8000)),
        Strace("28092 fcntl(3, F_GETFL)                 = 0x8000 (flags O_RDONLY|O_LARGEFILE)"));
  }
  {
    Call c("fcntl");
    c.Args({3, 4, 04000});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 fcntl(3, F_SETFL, O_RDONLY|O_NONBLOCK) = 0"));
  }
  {
    Call c("fcntl");
    c.Args({3, 1030, 20});
    EXPECT_EQ(Fmt(c.Run(20)), Strace("28092 fcntl(3, F_DUPFD_CLOEXEC, 20)     = 20"));
  }
  {
    Call c("flock");
    c.Args({3, 2 | 4});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 flock(3, LOCK_EX|LOCK_NB)         = 0"));
  }
  {
    Call c("ftruncate");
    c.Args({3, 0});
    EXPECT_EQ(Fmt(c.Run(-22)),
              Strace("28092 ftruncate(3, 0)                   = -1 EINVAL (Invalid argument)"));
  }
  {
    Call c("ioctl");
    c.Args({3, 0x5401, 0x7ffdab9df2b0});
    EXPECT_EQ(Fmt(c.Run(-25)), Strace("28092 ioctl(3, TCGETS, 0x7ffdab9df2b0)  = -1 ENOTTY "
                                      "(Inappropriate ioctl for device)"));
  }
  {
    Call c("getdents64");
    // Three records: ".", ".." and "a.txt", 24 + 24 + 32 bytes.
    std::vector<uint8_t> d(80, 0);
    uint16_t r24 = 24, r32 = 32;
    std::memcpy(&d[16], &r24, 2);
    std::memcpy(&d[24 + 16], &r24, 2);
    std::memcpy(&d[48 + 16], &r32, 2);
    c.Args({15, c.Put(d.data(), d.size(), 0x7ffdab9df2b0), 4096});
    EXPECT_EQ(Fmt(c.Run(80)),
              Strace("28092 getdents64(15, 0x7ffdab9df2b0 /* 3 entries */, 4096) = 80"));
  }
  {
    Call c("poll");
    struct {
      int32_t fd;
      int16_t events, revents;
    } fds[2] = {{5, 1, 0}, {6, 4, 0}};
    uint64_t addr = c.Obj(fds);
    c.Args({addr, 2, 0});
    SyscallEvent ev = c.Run(1, [&](FakeMemory& m) {
      int16_t pollout = 4;
      std::memcpy(m.At(addr).data() + 14, &pollout, 2);
    });
    EXPECT_EQ(Fmt(ev), Strace("28092 poll([{fd=5, events=POLLIN}, {fd=6, events=POLLOUT}], 2, 0) = "
                              "1 ([{fd=6, revents=POLLOUT}])"));
  }
}

TEST(SyscallFormat, MemoryAndProcess) {
  {
    Call c("mmap");
    c.Args({0, 8192, 3, 0x22, static_cast<uint64_t>(-1), 0});
    EXPECT_EQ(Fmt(c.Run(0x7ff8e7f25000)),
              Strace("28092 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, "
                     "0) = 0x7ff8e7f25000"));
  }
  {
    Call c("mmap");
    c.Args({0x7ff8e7d60000, 1400832, 5, 0x812, 3, 0x26000});
    EXPECT_EQ(Fmt(c.Run(0x7ff8e7d60000)),
              Strace("28092 mmap(0x7ff8e7d60000, 1400832, PROT_READ|PROT_EXEC, "
                     "MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE, 3, 0x26000) = 0x7ff8e7d60000"));
  }
  {
    Call c("mprotect");
    c.Args({0x7ff8e7f25000, 4096, 1});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 mprotect(0x7ff8e7f25000, 4096, PROT_READ) = 0"));
  }
  {
    Call c("munmap");
    c.Args({0x7ff8e7f25000, 8192});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 munmap(0x7ff8e7f25000, 8192)      = 0"));
  }
  {
    Call c("brk");
    c.Args({0});
    EXPECT_EQ(Fmt(c.Run(0x55e641e2e000)),
              Strace("28092 brk(NULL)                         = 0x55e641e2e000"));
  }
  {
    Call c("arch_prctl");
    c.Args({0x1002, 0x7ff8e7d37740});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 arch_prctl(ARCH_SET_FS, 0x7ff8e7d37740) = 0"));
  }
  {
    Call c("set_robust_list");
    c.Args({0x7ff8e7d37a20, 24});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 set_robust_list(0x7ff8e7d37a20, 24) = 0"));
  }
  {
    Call c("rseq");
    c.Args({0x7ff8e7d38060, 0x20, 0, 0x53053053});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 rseq(0x7ff8e7d38060, 0x20, 0, 0x53053053) = 0"));
  }
  {
    Call c("prlimit64");
    uint64_t rl[2] = {8192 * 1024, ~0ull};
    c.Args({0, 3, 0, c.Obj(rl)});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 prlimit64(0, RLIMIT_STACK, NULL, {rlim_cur=8192*1024, "
                                    "rlim_max=RLIM64_INFINITY}) = 0"));
  }
  {
    Call c("prlimit64");
    uint64_t rl[2] = {20000, 20000};
    c.Args({0, 7, c.Obj(rl), 0});
    EXPECT_EQ(
        Fmt(c.Run(0)),
        Strace("28092 prlimit64(0, RLIMIT_NOFILE, {rlim_cur=20000, rlim_max=20000}, NULL) = 0"));
  }
  {
    Call c("clone");
    c.Args({0x200000 | 0x1000000 | 17, 0, 0, 0x7ff8e7d37a10, 0});
    EXPECT_EQ(
        Fmt(c.Run(28093)),
        Strace(
            "28092 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, "
            "child_tidptr=0x7ff8e7d37a10) = 28093"));
  }
  {
    Call c("execve");
    uint64_t argv[3] = {c.Str("x"), c.Str("y"), 0};
    uint64_t envp[2] = {c.Str("A=1"), 0};
    c.Args({c.Str("/nonexistent"), c.Obj(argv), c.Obj(envp, 0x7ffdab9deed0)});
    EXPECT_EQ(Fmt(c.Run(-2)),
              Strace("28092 execve(\"/nonexistent\", [\"x\", \"y\"], 0x7ffdab9deed0 /* 1 var */) = "
                     "-1 ENOENT (No such file or directory)"));
  }
  {
    Call c("wait4");
    c.Args({static_cast<uint64_t>(-1), 0, 1, 0});
    EXPECT_EQ(Fmt(c.Run(-10)),
              Strace("28092 wait4(-1, NULL, WNOHANG, NULL)    = -1 ECHILD (No child processes)"));
  }
  {
    Call c("wait4");
    int32_t status = 3 << 8;
    c.Args({28093, c.Obj(status), 0, 0});
    EXPECT_EQ(
        Fmt(c.Run(28093)),
        Strace("28092 wait4(28093, [{WIFEXITED(s) && WEXITSTATUS(s) == 3}], 0, NULL) = 28093"));
  }
  {
    Call c("exit_group");
    c.Args({3});
    SyscallEvent ev = c.Run(0);
    ev.flags = kEventNoExit;
    EXPECT_EQ(Fmt(ev), Strace("28093 exit_group(3)                     = ?"));
  }
  {
    Call c("getpid");
    EXPECT_EQ(Fmt(c.Run(28092)), Strace("28092 getpid()                          = 28092"));
  }
  {
    Call c("kill");
    c.Args({28092, 0});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 kill(28092, 0)                    = 0"));
  }
  {
    Call c("uname");
    std::vector<uint8_t> u(390, 0);
    std::memcpy(u.data(), "Linux", 5);
    std::memcpy(u.data() + 65, "vm", 2);
    c.Args({c.Put(u.data(), u.size())});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 uname({sysname=\"Linux\", nodename=\"vm\", ...}) = 0"));
  }
  {
    Call c("nanosleep");
    int64_t ts[2] = {0, 1000000};
    c.Args({c.Obj(ts), 0});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 nanosleep({tv_sec=0, tv_nsec=1000000}, NULL) = 0"));
  }
  {
    Call c("clock_gettime");
    int64_t ts[2] = {0, 0};
    uint64_t addr = c.Obj(ts);
    c.Args({1, addr});
    SyscallEvent ev = c.Run(0, [&](FakeMemory& m) {
      int64_t now[2] = {4852, 694609862};
      std::memcpy(m.At(addr).data(), now, 16);
    });
    EXPECT_EQ(Fmt(ev),
              Strace("28092 clock_gettime(CLOCK_MONOTONIC, {tv_sec=4852, tv_nsec=694609862}) = 0"));
  }
}

TEST(SyscallFormat, Signals) {
  {
    Call c("rt_sigprocmask");
    uint64_t set = (1ull << 1) | (1ull << 14), old = 0;
    c.Args({0, c.Obj(set), c.Obj(old), 8});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 rt_sigprocmask(SIG_BLOCK, [INT TERM], [], 8) = 0"));
  }
  {
    Call c("rt_sigprocmask");
    uint64_t set = 0;
    c.Args({2, c.Obj(set), 0, 8});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 rt_sigprocmask(SIG_SETMASK, [], NULL, 8) = 0"));
  }
  {
    Call c("rt_sigaction");
    uint64_t sa[4] = {1, 0, 0, 0};
    c.Args({10, c.Obj(sa), 0, 8});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 rt_sigaction(SIGUSR1, {sa_handler=SIG_IGN, sa_mask=[], "
                                    "sa_flags=0}, NULL, 8) = 0"));
  }
}

TEST(SyscallFormat, Sockets) {
  {
    Call c("socket");
    c.Args({1, 1 | 02000000, 0});
    EXPECT_EQ(Fmt(c.Run(8)), Strace("28092 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = 8"));
  }
  {
    Call c("socket");
    c.Args({2, 2 | 04000, 17});
    EXPECT_EQ(Fmt(c.Run(9)),
              Strace("28092 socket(AF_INET, SOCK_DGRAM|SOCK_NONBLOCK, IPPROTO_UDP) = 9"));
  }
  {
    Call c("socket");
    c.Args({10, 1, 0});
    EXPECT_EQ(Fmt(c.Run(12)), Strace("28092 socket(AF_INET6, SOCK_STREAM, IPPROTO_IP) = 12"));
  }
  {
    Call c("connect");
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::strcpy(un.sun_path, "/tmp/fo/nosock");
    c.Args({8, c.Obj(un), sizeof un});
    EXPECT_EQ(Fmt(c.Run(-2)),
              Strace("28092 connect(8, {sa_family=AF_UNIX, sun_path=\"/tmp/fo/nosock\"}, 110) = -1 "
                     "ENOENT (No such file or directory)"));
  }
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(9);
  in.sin_addr.s_addr = htonl(0x7f000001);
  {
    Call c("bind");
    c.Args({9, c.Obj(in), sizeof in});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 bind(9, {sa_family=AF_INET, sin_port=htons(9), "
                                    "sin_addr=inet_addr(\"127.0.0.1\")}, 16) = 0"));
  }
  {
    Call c("sendto");
    c.Args({9, c.Put("ping", 4), 4, 0x40, c.Obj(in), sizeof in});
    EXPECT_EQ(Fmt(c.Run(4)),
              Strace("28092 sendto(9, \"ping\", 4, MSG_DONTWAIT, {sa_family=AF_INET, "
                     "sin_port=htons(9), sin_addr=inet_addr(\"127.0.0.1\")}, 16) = 4"));
  }
  {
    Call c("recvfrom");
    uint32_t len = sizeof in;
    c.Args({9, c.Put("ping", 4), 100, 0, c.Obj(in), c.Obj(len)});
    EXPECT_EQ(Fmt(c.Run(4)),
              Strace("28092 recvfrom(9, \"ping\", 100, 0, {sa_family=AF_INET, sin_port=htons(9), "
                     "sin_addr=inet_addr(\"127.0.0.1\")}, [16]) = 4"));
  }
  {
    Call c("connect");
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(443);
    in6.sin6_addr = in6addr_loopback;
    c.Args({12, c.Obj(in6), sizeof in6});
    EXPECT_EQ(Fmt(c.Run(-111)),
              Strace("28092 connect(12, {sa_family=AF_INET6, sin6_port=htons(443), "
                     "sin6_flowinfo=htonl(0), inet_pton(AF_INET6, \"::1\", &sin6_addr), "
                     "sin6_scope_id=0}, 28) = -1 ECONNREFUSED (Connection refused)"));
  }
  {
    Call c("socketpair");
    int sv[2] = {13, 14};
    c.Args({1, 5, 0, c.Obj(sv)});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("28092 socketpair(AF_UNIX, SOCK_SEQPACKET, 0, [13, 14]) = 0"));
  }
}

TEST(SyscallFormat, MsghdrAndEpoll) {
  {
    Call c("recvmsg");
    uint64_t data = c.Put(std::string(16, '\0').data(), 16);
    uint64_t iov[2] = {data, 16};
    uint64_t iov_addr = c.Obj(iov);
    uint8_t hdr[56] = {};
    std::memcpy(hdr + 16, &iov_addr, 8);
    uint64_t one = 1;
    std::memcpy(hdr + 24, &one, 8);
    c.Args({4, c.Put(hdr, 56), 0});
    SyscallEvent ev =
        c.Run(7, [&](FakeMemory& m) { std::memcpy(m.At(data).data(), "payload", 7); });
    EXPECT_EQ(Fmt(ev),
              Strace("recvmsg(4, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=\"payload\", "
                     "iov_len=16}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 7"));
  }
  {
    Call c("epoll_create1");
    c.Args({02000000});
    EXPECT_EQ(Fmt(c.Run(5)), Strace("epoll_create1(EPOLL_CLOEXEC)            = 5"));
  }
  uint8_t event[12] = {1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0};
  {
    Call c("epoll_ctl");
    c.Args({5, 1, 4, c.Put(event, 12)});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("epoll_ctl(5, EPOLL_CTL_ADD, 4, {events=EPOLLIN, data={u32=5, u64=5}}) = 0"));
  }
  {
    Call c("epoll_wait");
    uint8_t out[48] = {};
    std::memcpy(out, event, 12);
    c.Args({5, c.Put(out, 48), 4, 0});
    EXPECT_EQ(Fmt(c.Run(1)),
              Strace("epoll_wait(5, [{events=EPOLLIN, data={u32=5, u64=5}}], 4, 0) = 1"));
  }
}

TEST(SyscallFormat, UncapturedPointerPrintsAddress) {
  SyscallEvent ev;
  ev.nr = SyscallNumber("write");
  ev.args = {1, 0x7ffc0000, 6, 0, 0, 0};
  ev.ret = 6;
  EXPECT_EQ(FormatSyscall(ev, {}), "write(1, 0x7ffc0000, 6) = 6");
  CapturedBuffer b;
  b.arg = 1;
  b.addr = 0x7ffc0000;
  b.length = 6;
  b.not_captured = true;
  ev.buffers.push_back(b);
  EXPECT_EQ(FormatSyscall(ev, {}), "write(1, 0x7ffc0000, 6) = 6");
}

TEST(SyscallFormat, TruncatedBufferShowsEllipsis) {
  Call c("write");
  c.Args({1, c.Str("hello\n"), 6});
  SyscallEvent ev = c.Run(6, {}, 3);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_TRUE(ev.buffers[0].truncated);
  EXPECT_EQ(FormatSyscall(ev, {}), "write(1, \"hel\"..., 6) = 6");
}

TEST(SyscallFormat, RestartAndUnknown) {
  SyscallEvent ev;
  ev.nr = SyscallNumber("read");
  ev.args = {0, 0x1000, 10, 0, 0, 0};
  ev.ret = -512;
  EXPECT_EQ(FormatSyscall(ev, {}),
            "read(0, 0x1000, 10) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)");
  SyscallEvent odd;
  odd.nr = SyscallNumber("kexec_load");
  odd.args = {1, 2, 0, 0, 0, 0};
  odd.ret = -1;
  EXPECT_EQ(FormatSyscall(odd, {}),
            "kexec_load(0x1, 0x2, 0, 0, 0, 0) = -1 EPERM (Operation not permitted)");
}

// Lines strace 6.1 printed for cp -a (tests/fidelity's cp scenario) and for a program making
// the socket, statfs and ioctl calls below (issue 25's decoding list).
TEST(SyscallFormat, StraceLevelDecodingOfCopiesAndOptions) {
  setenv("TZ", "UTC", 1);
  tzset();
  {
    Call c("utimensat");
    struct timespec ts[2] = {{1577836800, 0}, {1795859426, 425563933}};
    c.Args({static_cast<uint64_t>(-100), c.Str("dst/sub"), c.Put(ts, sizeof ts), 0});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("1 utimensat(AT_FDCWD, \"dst/sub\", [{tv_sec=1577836800, tv_nsec=0} /* "
                     "2020-01-01T00:00:00+0000 */, {tv_sec=1795859426, tv_nsec=425563933} /* "
                     "2026-11-28T09:50:26.425563933+0000 */], 0) = 0"));
  }
  {
    Call c("utimensat");
    struct timespec ts[2] = {{0, 0x3ffffffe}, {0, 0x3fffffff}};
    c.Args({3, 0, c.Put(ts, sizeof ts), 0});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 utimensat(3, NULL, [UTIME_OMIT, UTIME_NOW], 0) = 0"));
  }
  {
    Call c("ioctl");
    c.Args({4, 0x40049409, 3});
    EXPECT_EQ(Fmt(c.Run(-95)), Strace("1 ioctl(4, BTRFS_IOC_CLONE or FICLONE, 3) = -1 "
                                      "EOPNOTSUPP (Operation not supported)"));
  }
  {
    Call c("ioctl");
    c.Args({3, 0x5451, 0x7ffc0000});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 ioctl(3, FIOCLEX)                 = 0"));
  }
  {
    Call c("mknodat");
    c.Args({static_cast<uint64_t>(-100), c.Str("dst/fifo"), S_IFIFO | 0600, 0});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 mknodat(AT_FDCWD, \"dst/fifo\", S_IFIFO|0600) = 0"));
  }
  {
    Call c("mknodat");
    c.Args({static_cast<uint64_t>(-100), c.Str("null"), S_IFCHR | 0666, makedev(1, 3)});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("1 mknodat(AT_FDCWD, \"null\", S_IFCHR|0666, makedev(0x1, 0x3)) = 0"));
  }
  {
    Call c("llistxattr");
    c.Args({c.Str("src/sub"), 0x7ffd1000, 0});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 llistxattr(\"src/sub\", 0x7ffd1000, 0) = 0"));
  }
  {
    Call c("setsockopt");
    int one = 1;
    c.Args({4, 6, 1, c.Obj(one), 4});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 setsockopt(4, SOL_TCP, TCP_NODELAY, [1], 4) = 0"));
  }
  {
    Call c("getsockopt");
    int v = 0;
    socklen_t len = 4;
    uint64_t at = c.Obj(v);
    c.Args({4, 1, 3, at, c.Obj(len)});
    EXPECT_EQ(Fmt(c.Run(0, [&](FakeMemory& m) { m.At(at)[0] = 1; })),
              Strace("1 getsockopt(4, SOL_SOCKET, SO_TYPE, [1], [4]) = 0"));
  }
  {
    Call c("sigaltstack");
    struct {
      uint64_t sp;
      int32_t flags, pad;
      uint64_t size;
    } ss{0x56233defa0e0, 0, 0, 65536};
    c.Args({c.Obj(ss), 0});
    EXPECT_EQ(Fmt(c.Run(0)),
              Strace("1 sigaltstack({ss_sp=0x56233defa0e0, ss_flags=0, ss_size=65536}, NULL) = 0"));
  }
  {
    // The sets and the timeout as they went in; what is ready and what is left after " = ".
    Call c("pselect6");
    uint64_t set = 1u << 5;
    struct timespec t = {1, 0};
    uint64_t rd = c.Obj(set), to = c.Obj(t);
    c.Args({6, rd, 0, 0, to, 0x7ffd51a74e30});
    SyscallEvent ev = c.Run(1, [&](FakeMemory& m) {
      struct timespec left = {0, 999994830};
      std::memcpy(m.At(to).data(), &left, sizeof left);
    });
    EXPECT_EQ(Fmt(ev), Strace("1 pselect6(6, [5], NULL, NULL, {tv_sec=1, tv_nsec=0}, "
                              "0x7ffd51a74e30) = 1 (in [5], left {tv_sec=0, tv_nsec=999994830})"));
  }
  {
    // pselect6's mask is a struct pointing to the set: both are followed.
    Call c("pselect6");
    uint64_t set = 1u << 5, mask = (1u << (SIGUSR1 - 1)) | (1u << (SIGTERM - 1));
    uint64_t rd = c.Obj(set), to = c.Obj(timespec{0, 1000});
    uint64_t sigmask[2] = {c.Obj(mask), 8}, no_mask[2] = {0, 8};
    c.Args({6, rd, 0, 0, to, c.Obj(sigmask)});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 pselect6(6, [5], NULL, NULL, {tv_sec=0, tv_nsec=1000}, "
                                    "{sigmask=[USR1 TERM], sigsetsize=8}) = 0 (Timeout)"));
    c.ev.buffers.clear();
    c.Args({6, rd, 0, 0, to, c.Obj(no_mask)});
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 pselect6(6, [5], NULL, NULL, {tv_sec=0, tv_nsec=1000}, "
                                    "{sigmask=NULL, sigsetsize=8}) = 0 (Timeout)"));
  }
  {
    // clone3 shows what it wrote through clone_args.parent_tid, in the parent only.
    Call c("clone3");
    uint64_t tid_at = c.Obj(int32_t{0});
    uint64_t args[11] = {0x100000, 0, 0, tid_at, SIGCHLD, 0, 0, 0, 0, 0, 0};
    c.Args({c.Obj(args), 88});
    SyscallEvent ev = c.Run(4321, [&](FakeMemory& m) {
      int32_t tid = 4321;
      std::memcpy(m.At(tid_at).data(), &tid, sizeof tid);
    });
    EXPECT_EQ(Fmt(ev), Strace("1 clone3({flags=CLONE_PARENT_SETTID, parent_tid=" +
                              fmt::format("{:#x}", tid_at) +
                              ", exit_signal=SIGCHLD, stack=NULL, stack_size=0} => "
                              "{parent_tid=[4321]}, 88) = 4321"));
    ev.ret = 0;  // the child's line says nothing of it
    EXPECT_EQ(Fmt(ev), Strace("1 clone3({flags=CLONE_PARENT_SETTID, parent_tid=" +
                              fmt::format("{:#x}", tid_at) +
                              ", exit_signal=SIGCHLD, stack=NULL, stack_size=0}, 88) = 0"));
  }
  {
    // rt_sigreturn's mask comes from the signal frame, 296 bytes above the stack at entry.
    Call c("rt_sigreturn");
    uint64_t frame[38] = {};
    frame[296 / 8] = 1u << (SIGUSR2 - 1);
    uint64_t sp = c.Obj(frame);
    CaptureAtEntry(c.ev.nr, c.ev.args, c.mem, 0, &c.ev.buffers, sp);
    c.ev.ret = 0;
    EXPECT_EQ(Fmt(c.ev), Strace("1 rt_sigreturn({mask=[USR2]})      = 0"));
    c.ev.buffers.clear();  // a trace without it (the stack unknown)
    EXPECT_EQ(Fmt(c.ev), Strace("1 rt_sigreturn()                   = 0"));
  }
  {
    // An interrupted sleep shows its time left; one that ran out shows the address.
    Call c("clock_nanosleep");
    uint64_t left = c.Obj(timespec{0, 0});
    c.Args({0, 0, c.Obj(timespec{1, 0}), left});
    SyscallEvent ev = c.Run(-516, [&](FakeMemory& m) {
      timespec t = {0, 979982831};
      std::memcpy(m.At(left).data(), &t, sizeof t);
    });
    EXPECT_EQ(Fmt(ev), Strace("1 clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=1, tv_nsec=0}, "
                              "{tv_sec=0, tv_nsec=979982831}) = ? ERESTART_RESTARTBLOCK "
                              "(Interrupted by signal)"));
    c.ev.buffers.clear();
    EXPECT_EQ(Fmt(c.Run(0)), Strace("1 clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=1, tv_nsec=0}, " +
                                    fmt::format("{:#x}", left) + ") = 0"));
  }
}

}  // namespace
}  // namespace fay
