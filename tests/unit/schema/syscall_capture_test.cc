#include "schema/syscall_capture.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "fake_tracee.h"
#include "schema/syscall_format.h"

namespace fay {
namespace {

using testing::Call;
using testing::FakeMemory;

std::string Text(const CapturedBuffer& b) {
  return std::string(b.bytes.begin(), b.bytes.end());
}

TEST(SyscallCapture, WriteDataAtEntryOnly) {
  Call c("write");
  uint64_t buf = c.Str("hello world");
  c.Args({1, buf, 11});
  SyscallEvent ev = c.Run(11);
  ASSERT_EQ(ev.buffers.size(), 1u);
  const CapturedBuffer& b = ev.buffers[0];
  EXPECT_EQ(b.arg, 1);
  EXPECT_EQ(b.sub, 0);
  EXPECT_EQ(b.dir, BufferDir::kIn);
  EXPECT_EQ(b.addr, buf);
  EXPECT_EQ(b.length, 11u);
  EXPECT_FALSE(b.truncated);
  EXPECT_FALSE(b.not_captured);
  EXPECT_EQ(Text(b), "hello world");
}

TEST(SyscallCapture, ReadSizedByReturnValue) {
  Call c("read");
  uint64_t buf = c.Put("abcdefghij", 10);
  c.Args({3, buf, 10});
  SyscallEvent ev = c.Run(4);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_EQ(ev.buffers[0].dir, BufferDir::kOut);
  EXPECT_EQ(ev.buffers[0].length, 4u);
  EXPECT_EQ(Text(ev.buffers[0]), "abcd");
}

TEST(SyscallCapture, FailedCallCapturesNoOutBuffer) {
  Call c("read");
  c.Args({3, c.Put("abcdefghij", 10), 10});
  EXPECT_TRUE(c.Run(-11).buffers.empty());
  Call s("newfstatat");
  std::vector<uint8_t> st(144, 0);
  s.Args({static_cast<uint64_t>(-100), s.Str("/x"), s.Put(st.data(), st.size()), 0});
  SyscallEvent ev = s.Run(-2);
  ASSERT_EQ(ev.buffers.size(), 1u);  // the path only
  EXPECT_EQ(ev.buffers[0].arg, 1);
  EXPECT_EQ(Text(ev.buffers[0]), "/x");
}

TEST(SyscallCapture, Truncation) {
  Call c("write");
  c.Args({1, c.Str("0123456789"), 10});
  SyscallEvent ev = c.Run(10, {}, 4);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_EQ(ev.buffers[0].length, 10u);
  EXPECT_TRUE(ev.buffers[0].truncated);
  EXPECT_EQ(Text(ev.buffers[0]), "0123");
}

TEST(SyscallCapture, NotCaptured) {
  Call c("write");
  c.Args({1, 0xdead0000, 100});
  SyscallEvent ev = c.Run(100);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_TRUE(ev.buffers[0].not_captured);
  EXPECT_FALSE(ev.buffers[0].truncated);
  EXPECT_EQ(ev.buffers[0].length, 100u);
  EXPECT_TRUE(ev.buffers[0].bytes.empty());
  Call p("openat");
  p.Args({static_cast<uint64_t>(-100), 0xdead0000, 0});
  SyscallEvent pe = p.Run(-14);
  ASSERT_EQ(pe.buffers.size(), 1u);
  EXPECT_TRUE(pe.buffers[0].not_captured);
  EXPECT_EQ(pe.buffers[0].length, 0u);
}

TEST(SyscallCapture, NullPointersSkipped) {
  Call c("rt_sigprocmask");
  c.Args({0, 0, 0, 8});
  EXPECT_TRUE(c.Run(0).buffers.empty());
}

TEST(SyscallCapture, PathStopsAtNulAcrossPages) {
  Call c("openat");
  // The path straddles a page boundary and ends right before an unmapped page.
  std::string path = "/a/b";
  uint64_t addr = 0x20000 - 2;
  c.Put(path.c_str(), path.size() + 1, addr);
  c.Args({static_cast<uint64_t>(-100), addr, 0});
  SyscallEvent ev = c.Run(3);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_EQ(Text(ev.buffers[0]), "/a/b");
  EXPECT_EQ(ev.buffers[0].length, 4u);
  EXPECT_FALSE(ev.buffers[0].truncated);
}

TEST(SyscallCapture, OverlongPathIsCutAtPathMax) {
  Call c("openat");
  std::string path(5000, 'p');
  c.Args({static_cast<uint64_t>(-100), c.Put(path.data(), path.size()), 0});
  SyscallEvent ev = c.Run(-36);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_EQ(ev.buffers[0].bytes.size(), kMaxCapturedString);
  EXPECT_TRUE(ev.buffers[0].truncated);
}

TEST(SyscallCapture, WritevArrayAndElements) {
  Call c("writev");
  uint64_t a = c.Put("ab", 2), b = c.Put("cde", 3);
  uint64_t iov[4] = {a, 2, b, 3};
  uint64_t arr = c.Obj(iov);
  c.Args({1, arr, 2});
  SyscallEvent ev = c.Run(5);
  ASSERT_EQ(ev.buffers.size(), 3u);
  EXPECT_EQ(ev.buffers[0].sub, 0);
  EXPECT_EQ(ev.buffers[0].length, 32u);
  EXPECT_EQ(ev.buffers[1].sub, 1);
  EXPECT_EQ(Text(ev.buffers[1]), "ab");
  EXPECT_EQ(ev.buffers[2].sub, 2);
  EXPECT_EQ(Text(ev.buffers[2]), "cde");
  for (const auto& buf : ev.buffers) EXPECT_EQ(buf.dir, BufferDir::kIn);
}

TEST(SyscallCapture, ReadvFilledUpToReturn) {
  Call c("readv");
  uint64_t a = c.Put("xyz", 3), b = c.Put("0123456789", 10), d = c.Put("!!", 2);
  uint64_t iov[6] = {a, 3, b, 10, d, 2};
  c.Args({0, c.Obj(iov), 3});
  SyscallEvent ev = c.Run(5);
  ASSERT_EQ(ev.buffers.size(), 3u);  // array, 3 bytes of the first, 2 of the second
  EXPECT_EQ(ev.buffers[0].dir, BufferDir::kOut);
  EXPECT_EQ(Text(ev.buffers[1]), "xyz");
  EXPECT_EQ(ev.buffers[2].sub, 2);
  EXPECT_EQ(ev.buffers[2].length, 2u);
  EXPECT_EQ(Text(ev.buffers[2]), "01");
}

TEST(SyscallCapture, StructsAndPairs) {
  Call st("fstat");
  std::vector<uint8_t> bytes(200, 7);
  st.Args({3, st.Put(bytes.data(), bytes.size())});
  SyscallEvent ev = st.Run(0);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_EQ(ev.buffers[0].length, 144u);
  EXPECT_EQ(ev.buffers[0].bytes.size(), 144u);

  Call p("pipe2");
  int fds[2] = {3, 4};
  p.Args({p.Obj(fds), 0});
  SyscallEvent pe = p.Run(0);
  ASSERT_EQ(pe.buffers.size(), 1u);
  EXPECT_EQ(pe.buffers[0].bytes, (std::vector<uint8_t>{3, 0, 0, 0, 4, 0, 0, 0}));
}

TEST(SyscallCapture, SockaddrInAndOut) {
  Call c("connect");
  uint8_t sa[16] = {2, 0, 0, 80, 127, 0, 0, 1};
  c.Args({3, c.Put(sa, 16), 16});
  SyscallEvent ev = c.Run(0);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_EQ(ev.buffers[0].length, 16u);

  Call a("accept");
  uint8_t peer[128] = {2, 0, 0x1f, 0x90, 10, 0, 0, 2};
  uint32_t len = 128;
  uint64_t len_addr = a.Obj(len);
  a.Args({3, a.Put(peer, sizeof peer), len_addr});
  SyscallEvent ae = a.Run(5, [&](FakeMemory& m) {
    uint32_t out = 16;
    std::memcpy(m.At(len_addr).data(), &out, 4);
  });
  // socklen at entry (in), then sockaddr sized by the socklen the kernel wrote, then socklen.
  ASSERT_EQ(ae.buffers.size(), 3u);
  EXPECT_EQ(ae.buffers[0].arg, 2);
  EXPECT_EQ(ae.buffers[0].dir, BufferDir::kIn);
  EXPECT_EQ(ae.buffers[1].arg, 1);
  EXPECT_EQ(ae.buffers[1].length, 16u);
  EXPECT_EQ(ae.buffers[2].arg, 2);
  EXPECT_EQ(ae.buffers[2].dir, BufferDir::kOut);
}

TEST(SyscallCapture, ExecveArgv) {
  Call c("execve");
  uint64_t argv[3] = {c.Str("ls"), c.Str("-l"), 0};
  uint64_t envp[1] = {0};
  c.Args({c.Str("/bin/ls"), c.Obj(argv), c.Obj(envp)});
  SyscallEvent ev = c.Run(0);
  // path, argv array + 2 strings, empty envp array.
  ASSERT_EQ(ev.buffers.size(), 5u);
  EXPECT_EQ(Text(ev.buffers[0]), "/bin/ls");
  EXPECT_EQ(ev.buffers[1].length, 16u);
  EXPECT_EQ(ev.buffers[2].sub, 1);
  EXPECT_EQ(Text(ev.buffers[2]), "ls");
  EXPECT_EQ(Text(ev.buffers[3]), "-l");
  EXPECT_EQ(ev.buffers[4].arg, 2);
  EXPECT_EQ(ev.buffers[4].length, 0u);
}

TEST(SyscallCapture, SendmsgParts) {
  Call c("sendmsg");
  uint64_t data = c.Put("payload", 7);
  uint64_t iov[2] = {data, 7};
  uint64_t iov_addr = c.Obj(iov);
  uint8_t hdr[56] = {};
  std::memcpy(hdr + 16, &iov_addr, 8);
  uint64_t one = 1;
  std::memcpy(hdr + 24, &one, 8);
  c.Args({3, c.Put(hdr, 56), 0});
  SyscallEvent ev = c.Run(7);
  ASSERT_EQ(ev.buffers.size(), 3u);
  EXPECT_EQ(ev.buffers[0].sub, 0);
  EXPECT_EQ(ev.buffers[1].sub, 3);
  EXPECT_EQ(ev.buffers[2].sub, 4);
  EXPECT_EQ(Text(ev.buffers[2]), "payload");
  EXPECT_EQ(
      FormatSyscall(ev, {}),
      "sendmsg(3, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=\"payload\", iov_len=7}], "
      "msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 7");
}

TEST(SyscallCapture, UndecodedCallsCaptureNothing) {
  FakeMemory mem;
  std::vector<CapturedBuffer> out;
  CaptureAtEntry(SyscallNumber("kexec_load"), {1, 2, 3, 4, 5, 6}, mem, 0, &out);
  CaptureAtExit(SyscallNumber("kexec_load"), {1, 2, 3, 4, 5, 6}, 0, mem, 0, &out);
  CaptureAtEntry(9999, {1, 2, 3, 4, 5, 6}, mem, 0, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(mem.reads, 0);
}

}  // namespace
}  // namespace fay
