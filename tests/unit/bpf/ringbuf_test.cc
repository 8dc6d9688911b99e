#include "bpf/ringbuf.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "bpf/attach.h"
#include "bpf/map.h"
#include "bpf_test_util.h"

namespace fay::bpf {
namespace {

TEST(RingBuffer, DeliversExactlyOneRecordPerEvent) {
  FAY_SKIP_WITHOUT_BPF();
  int tp = testing::TracepointId("syscalls", "sys_enter_getppid");
  ASSERT_GT(tp, 0);
  auto ring = Map::Create(BPF_MAP_TYPE_RINGBUF, "t_events", 0, 0, 1 << 18);
  ASSERT_TRUE(ring.ok()) << ring.status().message();

  // ringbuf_output(&ring, &pid_tgid, 8, 0) for each getppid of this process.
  Emitter e;
  Label out = e.NewLabel();
  testing::EmitOnlyThisProcess(e, out);
  e.Store(8, R10, -8, R6);
  e.LdMap(R1, 0);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, -8);
  e.MovImm(R3, 8);
  e.MovImm(R4, 0);
  e.Call(BPF_FUNC_ringbuf_output);
  e.Bind(out);
  e.MovImm(R0, 0);
  e.Exit();
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  auto prog =
      Program::Load({BPF_PROG_TYPE_TRACEPOINT, "ring_getppid", *insns, e.relocs()}, {ring->fd()});
  ASSERT_TRUE(prog.ok()) << prog.status().message();

  size_t records = 0, bad = 0;
  const uint64_t expect = (static_cast<uint64_t>(getpid()) << 32) | static_cast<uint32_t>(gettid());
  auto reader = RingBufferReader::Create(ring->fd(), [&](const void* data, size_t size) {
    uint64_t v = 0;
    if (size != 8) {
      ++bad;
      return 0;
    }
    std::memcpy(&v, data, 8);
    if (v != expect) ++bad;
    ++records;
    return 0;
  });
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_GE((*reader)->epoll_fd(), 0);

  constexpr int kCalls = 500;
  {
    auto link = AttachTracepoint(*prog, tp);
    ASSERT_TRUE(link.ok()) << link.status().message();
    for (int i = 0; i < kCalls; ++i) syscall(SYS_getppid);
  }
  auto polled = (*reader)->Poll(100);
  ASSERT_TRUE(polled.ok()) << polled.status().message();
  auto rest = (*reader)->Consume();
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(*polled + *rest, kCalls);
  EXPECT_EQ(records, static_cast<size_t>(kCalls));
  EXPECT_EQ(bad, 0u);

  // Detached: nothing more arrives.
  syscall(SYS_getppid);
  auto none = (*reader)->Poll(20);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  EXPECT_EQ(records, static_cast<size_t>(kCalls));
}

TEST(RingBuffer, CreateOnANonRingMapFails) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_ARRAY, "t_notring", 4, 8, 1);
  ASSERT_TRUE(m.ok());
  auto reader = RingBufferReader::Create(m->fd(), [](const void*, size_t) { return 0; });
  EXPECT_FALSE(reader.ok());
}

}  // namespace
}  // namespace fay::bpf
