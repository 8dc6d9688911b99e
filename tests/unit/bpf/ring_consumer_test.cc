#include "bpf/ring_consumer.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "bpf/attach.h"
#include "bpf/map.h"
#include "bpf_test_util.h"

namespace fay::bpf {
namespace {

constexpr int kRecordBytes = 264;  // with its 8-byte header, 4096 is no multiple of it
constexpr uint64_t kTail = 0x1122334455667788;

// A record per getppid of this process: [pid_tgid][zeros][kTail], kRecordBytes long.
Expected<Program> LoadRecordPerGetppid(int ring_fd) {
  Emitter e;
  Label out = e.NewLabel();
  testing::EmitOnlyThisProcess(e, out);
  e.Store(8, R10, -kRecordBytes, R6);
  for (int off = -kRecordBytes + 8; off < -8; off += 8) e.StoreImm(8, R10, off, 0);
  e.LdImm64(R1, kTail);
  e.Store(8, R10, -8, R1);
  e.LdMap(R1, 0);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, -kRecordBytes);
  e.MovImm(R3, kRecordBytes);
  e.MovImm(R4, 0);
  e.Call(BPF_FUNC_ringbuf_output);
  e.Bind(out);
  e.MovImm(R0, 0);
  e.Exit();
  FAY_ASSIGN_OR_RETURN(std::vector<bpf_insn> insns, e.Finish());
  return Program::Load({BPF_PROG_TYPE_TRACEPOINT, "ring_wrap", insns, e.relocs()}, {ring_fd});
}

// The data is mapped once, so a record that runs past the ring's end arrives copied whole:
// every record, wrapped or not, must read back byte for byte.
TEST(RingConsumer, RecordsThatWrapPastTheEndReadWhole) {
  FAY_SKIP_WITHOUT_BPF();
  int tp = testing::TracepointId("syscalls", "sys_enter_getppid");
  ASSERT_GT(tp, 0);
  const uint64_t size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  auto ring = Map::Create(BPF_MAP_TYPE_RINGBUF, "t_wrap", 0, 0, static_cast<uint32_t>(size));
  ASSERT_TRUE(ring.ok()) << ring.status().message();
  auto prog = LoadRecordPerGetppid(ring->fd());
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  auto consumer = RingConsumer::Create(ring->fd(), size);
  ASSERT_TRUE(consumer.ok()) << consumer.status().message();

  const uint64_t head = (static_cast<uint64_t>(getpid()) << 32) | static_cast<uint32_t>(gettid());
  std::vector<uint8_t> expect(kRecordBytes, 0);
  std::memcpy(expect.data(), &head, 8);
  std::memcpy(expect.data() + kRecordBytes - 8, &kTail, 8);
  constexpr int kCalls = 100;  // the ring's 4 KiB go round about 6 times
  int records = 0, bad = 0;
  uint64_t consumed = 0;
  {
    auto link = AttachTracepoint(*prog, tp);
    ASSERT_TRUE(link.ok()) << link.status().message();
    for (int i = 0; i < kCalls; ++i) {
      syscall(SYS_getppid);
      consumed += (*consumer)->Drain([&](const void* data, size_t n) {
        ++records;
        if (n != kRecordBytes || std::memcmp(data, expect.data(), n) != 0) ++bad;
      });
    }
  }
  EXPECT_EQ(records, kCalls);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(consumed, uint64_t{kCalls} * (kRecordBytes + 8));
  EXPECT_EQ((*consumer)->Pending(), 0u);
}

}  // namespace
}  // namespace fay::bpf
