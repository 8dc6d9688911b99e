// fixtures/v1.fay was written by the format 1.0 writer and is committed: every later fay must
// read it and get exactly these contents back. Regenerate it only when adding a new fixture for
// a new version (FAY_WRITE_TRACE_FIXTURES=1 trace_test --gtest_filter=FixtureTest.*), never to
// make this test pass.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"

namespace fay::trace {
namespace {

using testing::Comm;
using testing::Describe;
using testing::ExpectSameInfo;

const char* const kFixture = FAY_SOURCE_DIR "/tests/unit/trace/fixtures/v1.fay";

RecordingInfo FixtureInfo() {
  RecordingInfo i;
  i.argv = {"sh", "-c", "cat /etc/hostname > out; exit 3"};
  i.env = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"};
  i.cwd = "/home/user/scratch";
  i.root_pid = 1200;
  i.backend = "ptrace";
  i.host = "fixture-host";
  i.kernel = "6.18.0";
  i.arch = "x86_64";
  i.anchor_monotonic_ns = 86'400'000'000'000ull;
  i.anchor_realtime_ns = 1'735'689'600'000'000'000ull;  // 2025-01-01T00:00:00Z
  i.syscall_table_version = 1;
  i.max_buffer = 0;
  i.syscall_filter = "";
  return i;
}

SyscallEvent Call(uint64_t t, int32_t pid, int32_t tid, const char* comm, int nr,
                  std::array<uint64_t, 6> args, int64_t ret, uint64_t latency = 1500) {
  SyscallEvent e;
  e.entry_ns = t;
  e.exit_ns = latency ? t + latency : 0;
  e.pid = pid;
  e.tid = tid;
  e.ppid = pid == 1200 ? 1000 : 1200;
  e.uid = 1000;
  e.comm = Comm(comm);
  e.nr = nr;
  e.args = args;
  e.ret = ret;
  return e;
}

CapturedBuffer Buf(uint8_t arg, BufferDir dir, uint64_t addr, const std::string& s) {
  CapturedBuffer b;
  b.arg = arg;
  b.dir = dir;
  b.addr = addr;
  b.length = s.size();
  b.bytes.assign(s.begin(), s.end());
  return b;
}

// Everything in the fixture, in file order: "S ..." syscalls, "P ..." process events.
struct Contents {
  std::vector<SyscallEvent> syscalls;
  std::vector<ProcessEvent> processes;
  std::vector<std::string> lines;
  uint64_t lost = 0;
};

Contents FixtureContents() {
  Contents c;
  const uint64_t t0 = 86'400'000'000'000ull + 1'000'000;
  std::string big(200, 'x');  // a blob, written twice
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  auto sys = [&](SyscallEvent e) {
    c.lines.push_back("S " + Describe(e));
    c.syscalls.push_back(std::move(e));
  };
  auto proc = [&](ProcessEventKind k, uint64_t t, int32_t pid, int32_t parent, bool thread,
                  int32_t status, std::string path) {
    ProcessEvent p{k, t, pid, pid, parent, thread, status, std::move(path)};
    c.lines.push_back("P " + Describe(p));
    c.processes.push_back(p);
  };
  SyscallEvent e = Call(t0, 1200, 1200, "sh", 59, {0x55550000, 0x55550100, 0x55550200}, 0);
  e.buffers.push_back(Buf(0, BufferDir::kIn, 0x55550000, "/bin/sh"));
  sys(e);
  proc(ProcessEventKind::kExec, t0 + 2000, 1200, 0, false, 0, "/bin/sh");
  sys(Call(t0 + 10'000, 1200, 1200, "sh", 56, {0x1200011, 0, 0, 0x7f0000001000}, 1201));
  proc(ProcessEventKind::kFork, t0 + 11'000, 1201, 1200, false, 0, "");
  e = Call(t0 + 20'000, 1201, 1201, "sh", 257, {uint64_t(-100), 0x5555a000, 0x241, 0666}, 3);
  e.buffers.push_back(Buf(1, BufferDir::kIn, 0x5555a000, "out"));
  sys(e);
  e = Call(t0 + 30'000, 1201, 1201, "cat", 0, {4, 0x7ffc0000, 131072}, 200);
  e.buffers.push_back(Buf(1, BufferDir::kOut, 0x7ffc0000, big));
  sys(e);
  e = Call(t0 + 40'000, 1201, 1201, "cat", 1, {3, 0x7ffc0000, 200}, 200);
  e.buffers.push_back(Buf(1, BufferDir::kIn, 0x7ffc0000, big));  // deduplicated
  sys(e);
  e = Call(t0 + 50'000, 1201, 1201, "cat", 0, {4, 0x7ffc0000, 131072}, -11);  // -EAGAIN
  e.flags = kEventInterrupted;
  sys(e);
  e = Call(t0 + 60'000, 1201, 1201, "cat", 4, {0x5555b000, 0x7ffc1000}, 0);
  e.buffers.push_back(Buf(0, BufferDir::kIn, 0x5555b000, "/etc/hostname"));
  CapturedBuffer st;
  st.arg = 1;
  st.dir = BufferDir::kOut;
  st.addr = 0x7ffc1000;
  st.length = 144;
  st.truncated = true;
  st.bytes.assign(64, 0x5A);
  e.buffers.push_back(st);
  CapturedBuffer missing;
  missing.arg = 2;
  missing.sub = 1;
  missing.dir = BufferDir::kOut;
  missing.addr = 0x1000;
  missing.length = 16;
  missing.not_captured = true;
  e.buffers.push_back(missing);
  sys(e);
  c.lost = 2;
  sys(Call(t0 + 70'000, 1201, 1201, "cat", 231, {3}, 0, /*latency=*/0));
  c.syscalls.back().flags = kEventNoExit;
  c.lines.back() = "S " + Describe(c.syscalls.back());
  proc(ProcessEventKind::kExit, t0 + 71'000, 1201, 0, false, 3 << 8, "");
  sys(Call(t0 + 80'000, 1200, 1200, "sh", 61, {uint64_t(-1), 0x7ffd0000, 0}, 1201));
  return c;
}

void WriteFixture(const std::string& path) {
  WriterOptions opts;
  opts.chunk_bytes = 100;  // several events chunks
  auto w = Writer::Create(path, FixtureInfo(), opts);
  ASSERT_TRUE(w.ok());
  Contents c = FixtureContents();
  size_t s = 0, p = 0;
  for (const std::string& line : c.lines) {
    if (line[0] == 'S') {
      (*w)->Append(c.syscalls[s++]);
      if (s == 6) (*w)->AppendLoss(c.syscalls[5].entry_ns + 5, c.lost);
    } else {
      (*w)->Append(c.processes[p++]);
    }
  }
  ASSERT_TRUE((*w)->Close().ok());
}

TEST(FixtureTest, ReadsTheV1Fixture) {
  if (std::getenv("FAY_WRITE_TRACE_FIXTURES")) WriteFixture(kFixture);
  auto r = Reader::Open(kFixture);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version_major(), 1);
  EXPECT_EQ(r->version_minor(), 0);
  EXPECT_TRUE(r->has_footer());
  EXPECT_FALSE(r->truncated());
  const RecordingInfo& got = r->info();
  RecordingInfo want = FixtureInfo();
  ExpectSameInfo(got, want);

  Status st;
  std::vector<std::string> lines = testing::ReadAll(*r, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  Contents c = FixtureContents();
  EXPECT_EQ(lines, c.lines);
  EXPECT_EQ(r->stats().lost_events, 2u);
  EXPECT_EQ(r->stats().blobs, 2u);  // the 200-byte payload once, and the 64-byte stat buffer
  EXPECT_EQ(r->stats().blob_bytes, 264u);
  EXPECT_EQ(r->stats().bytes_captured, 7u + 3 + 200 + 200 + 13 + 64);
  EXPECT_GE(r->stats().event_chunks, 3u);

  // The same file read without its footer (as after a crash) gives the same events.
  std::string cut = ::testing::TempDir() + "/v1-nofooter.fay";
  {
    std::ifstream in(kFixture, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const ChunkRef& last = r->chunks().back();
    std::ofstream out(cut, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(),
              static_cast<std::streamsize>(last.offset + kChunkHeaderSize + last.stored_length));
  }
  auto walked = Reader::Open(cut);
  ASSERT_TRUE(walked.ok());
  EXPECT_TRUE(walked->truncated());
  EXPECT_EQ(testing::ReadAll(*walked, &st), c.lines);
  EXPECT_TRUE(st.ok());
}

}  // namespace
}  // namespace fay::trace
