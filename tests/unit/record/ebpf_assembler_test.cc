// The consumer side of the eBPF recorder, fed hand-made ring records: how calls written as one
// record, as enter + return, and with buffers ahead of or after them become SyscallEvents.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "record/ebpf/ebpf_recorder.h"
#include "schema/syscall_table.h"

namespace fay::record::ebpf {
namespace {

template <typename T>
std::vector<uint8_t> Bytes(const T& v) {
  std::vector<uint8_t> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}

WireCall Call(uint32_t tid, int64_t nr, int64_t ret, uint32_t flags = 0) {
  WireCall w{};
  w.type = kRecCall;
  w.flags = flags;
  w.tgid = 100;
  w.tid = tid;
  w.entry_ns = 1000;
  w.exit_ns = 2000;
  w.nr = nr;
  w.ret = ret;
  std::memcpy(w.comm, "prog", 5);
  return w;
}

std::vector<uint8_t> Frag(uint32_t tid, uint8_t arg, BufferDir dir, uint64_t total, uint64_t offset,
                          const std::string& data, uint16_t sub = 0, uint32_t flags = 0) {
  WireFragHeader h{};
  h.type = kRecFrag;
  h.tid = tid;
  h.arg = arg;
  h.dir = static_cast<uint8_t>(dir);
  h.sub = sub;
  h.flags = flags;
  h.total = total;
  h.offset = offset;
  h.len = static_cast<uint32_t>(data.size());
  std::vector<uint8_t> out(sizeof h + data.size());
  std::memcpy(out.data(), &h, sizeof h);
  if (!data.empty()) std::memcpy(out.data() + sizeof h, data.data(), data.size());
  return out;
}

struct Feeder {
  Assembler a;
  Assembler::Out out;
  void operator()(const std::vector<uint8_t>& rec) {
    ASSERT_TRUE(a.Feed(rec.data(), rec.size(), &out));
  }
};

TEST(EbpfAssembler, OneRecordCallTakesTheBuffersSentAheadOfIt) {
  Feeder f;
  f(Frag(7, 1, BufferDir::kIn, 5, 0, "hello"));
  f(Bytes(Call(7, sysno::write, 5)));
  ASSERT_EQ(f.out.syscalls.size(), 1u);
  const SyscallEvent& ev = f.out.syscalls[0];
  EXPECT_EQ(ev.nr, sysno::write);
  EXPECT_EQ(ev.ret, 5);
  EXPECT_EQ(ev.tid, 7);
  EXPECT_EQ(ev.pid, 100);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_EQ(std::string(ev.buffers[0].bytes.begin(), ev.buffers[0].bytes.end()), "hello");
  EXPECT_FALSE(ev.buffers[0].truncated);
  EXPECT_FALSE(ev.buffers[0].not_captured);
}

// A staged batch: the records as the probes lay them out, each padded to 8 bytes.
std::vector<uint8_t> Batch(const std::vector<std::vector<uint8_t>>& recs, int extra_bytes = 0) {
  std::vector<uint8_t> body;
  for (const auto& r : recs) {
    body.insert(body.end(), r.begin(), r.end());
    body.resize((body.size() + 7) & ~size_t{7});
  }
  WireBatch b{kRecBatch, static_cast<uint32_t>(static_cast<int>(body.size()) + extra_bytes)};
  std::vector<uint8_t> out(sizeof b);
  std::memcpy(out.data(), &b, sizeof b);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

TEST(EbpfAssembler, ABatchIsItsRecordsInOrder) {
  Feeder f;
  WireCall a = Call(7, sysno::getppid, 1), b = Call(8, sysno::close, -9);
  b.entry_ns = 3000;
  // A read's short buffer (3 bytes, padded) ahead of its call, between two other calls.
  f(Batch({Bytes(a), Frag(7, 1, BufferDir::kOut, 3, 0, "abc"), Bytes(Call(7, sysno::read, 3)),
           Bytes(b)}));
  ASSERT_EQ(f.out.syscalls.size(), 3u);
  EXPECT_EQ(f.out.syscalls[0].nr, sysno::getppid);
  EXPECT_TRUE(f.out.syscalls[0].buffers.empty());
  EXPECT_EQ(f.out.syscalls[1].nr, sysno::read);
  ASSERT_EQ(f.out.syscalls[1].buffers.size(), 1u);
  const auto& got = f.out.syscalls[1].buffers[0].bytes;
  EXPECT_EQ(std::string(got.begin(), got.end()), "abc");
  EXPECT_EQ(f.out.syscalls[2].tid, 8);
  EXPECT_EQ(f.out.syscalls[2].ret, -9);
  EXPECT_EQ(f.out.syscalls[2].entry_ns, 3000u);
  // A buffer written directly before the batch goes to its thread's call in the batch.
  f(Frag(9, 1, BufferDir::kIn, 2, 0, "hi"));
  f(Batch({Bytes(Call(9, sysno::write, 2))}));
  ASSERT_EQ(f.out.syscalls.size(), 4u);
  ASSERT_EQ(f.out.syscalls[3].buffers.size(), 1u);
  EXPECT_EQ(f.a.orphans(), 0u);
}

TEST(EbpfAssembler, AMalformedBatchIsRefused) {
  Assembler a;
  Assembler::Out out;
  std::vector<uint8_t> longer = Batch({Bytes(Call(7, sysno::getppid, 1))}, 8);
  EXPECT_FALSE(a.Feed(longer.data(), longer.size(), &out));  // says more than it holds
  std::vector<uint8_t> huge = Batch({Bytes(Call(7, sysno::getppid, 1))}, kStageBytes);
  EXPECT_FALSE(a.Feed(huge.data(), huge.size(), &out));
  WireCall not_staged = Call(7, sysno::getppid, 1);
  not_staged.type = kRecEnter;  // never staged
  std::vector<uint8_t> wrong = Batch({Bytes(not_staged)});
  EXPECT_FALSE(a.Feed(wrong.data(), wrong.size(), &out));
  // A fragment whose data runs past the batch.
  std::vector<uint8_t> cut = Batch({Frag(7, 1, BufferDir::kOut, 9, 0, "123456789")});
  cut.resize(cut.size() - 8);
  WireBatch b{kRecBatch, static_cast<uint32_t>(cut.size() - sizeof b)};
  std::memcpy(cut.data(), &b, sizeof b);
  EXPECT_FALSE(a.Feed(cut.data(), cut.size(), &out));
  EXPECT_TRUE(out.syscalls.empty());
}

TEST(EbpfAssembler, AWholeLongBufferGoesToTheBlobStoreAtOnce) {
  Feeder f;
  std::vector<std::string> stored;
  f.a.set_blob_store([&](const uint8_t* data, size_t n) {
    stored.emplace_back(reinterpret_cast<const char*>(data), n);
    return StoredBlob{7, 9, n};
  });
  std::string long_one(100, 'x');
  f(Frag(7, 1, BufferDir::kOut, 100, 0, long_one));              // whole and long: stored
  f(Frag(7, 2, BufferDir::kOut, 5, 0, "short"));                 // inline size: kept
  f(Frag(7, 3, BufferDir::kOut, 200, 0, std::string(64, 'y')));  // cut short: kept
  f(Bytes(Call(7, sysno::read, 100)));
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0], long_one);
  ASSERT_EQ(f.out.syscalls.size(), 1u);
  const auto& bufs = f.out.syscalls[0].buffers;
  ASSERT_EQ(bufs.size(), 3u);
  ASSERT_TRUE(bufs[0].stored.has_value());
  EXPECT_EQ(bufs[0].stored->hash_lo, 7u);
  EXPECT_EQ(bufs[0].Size(), 100u);
  EXPECT_TRUE(bufs[0].bytes.empty());
  EXPECT_FALSE(bufs[0].truncated);
  EXPECT_FALSE(bufs[0].not_captured);
  EXPECT_FALSE(bufs[1].stored.has_value());
  EXPECT_EQ(bufs[1].bytes.size(), 5u);
  EXPECT_FALSE(bufs[2].stored.has_value());
  EXPECT_EQ(bufs[2].bytes.size(), 64u);
  EXPECT_TRUE(bufs[2].truncated);
}

TEST(EbpfAssembler, FragmentsOfOneBufferJoinAndAShortOneIsTruncated) {
  Feeder f;
  f(Frag(7, 1, BufferDir::kOut, 10, 0, "abcd"));
  f(Frag(7, 1, BufferDir::kOut, 10, 4, "efg"));
  f(Bytes(Call(7, sysno::read, 10)));
  ASSERT_EQ(f.out.syscalls.size(), 1u);
  const CapturedBuffer& b = f.out.syscalls[0].buffers.at(0);
  EXPECT_EQ(std::string(b.bytes.begin(), b.bytes.end()), "abcdefg");
  EXPECT_EQ(b.length, 10u);
  EXPECT_TRUE(b.truncated);
}

TEST(EbpfAssembler, AnEmptyFirstPieceOfANonEmptyBufferIsNotCaptured) {
  Feeder f;
  f(Frag(7, 1, BufferDir::kIn, 4096, 0, ""));
  f(Bytes(Call(7, sysno::write, 4096)));
  const CapturedBuffer& b = f.out.syscalls.at(0).buffers.at(0);
  EXPECT_TRUE(b.not_captured);
  EXPECT_EQ(b.length, 4096u);
}

TEST(EbpfAssembler, ASecondReadingOfAnInboundBufferReplacesTheFailedOne) {
  Feeder f;
  f(Frag(7, 0, BufferDir::kIn, 0, 0, "", 0, kFragExplicit | kFragNotCaptured));
  f(Frag(7, 0, BufferDir::kIn, 8, 0, "/etc/foo", 0, kFragExplicit));
  f(Bytes(Call(7, sysno::openat, -2)));
  const SyscallEvent& ev = f.out.syscalls.at(0);
  ASSERT_EQ(ev.buffers.size(), 1u);
  EXPECT_FALSE(ev.buffers[0].not_captured);
  EXPECT_EQ(std::string(ev.buffers[0].bytes.begin(), ev.buffers[0].bytes.end()), "/etc/foo");
}

TEST(EbpfAssembler, EnterAndReturnRecordsPairByThread) {
  Feeder f;
  WireEnter e{};
  e.type = kRecEnter;
  e.tgid = 100;
  e.tid = 8;
  e.nr = sysno::execve;
  e.entry_ns = 500;
  f(Bytes(e));
  f(Frag(8, 0, BufferDir::kIn, 4, 0, "/bin", 0, kFragExplicit));
  WireProc exec{};
  exec.type = kRecExec;
  exec.pid = 100;
  exec.tid = 8;
  f(Bytes(exec));
  WireReturn r{};
  r.type = kRecReturn;
  r.tid = 8;
  r.nr = sysno::execve;
  r.ret = 0;
  r.exit_ns = 900;
  f(Bytes(r));
  ASSERT_EQ(f.out.syscalls.size(), 1u);
  EXPECT_EQ(f.out.syscalls[0].entry_ns, 500u);
  EXPECT_EQ(f.out.syscalls[0].exit_ns, 900u);
  EXPECT_EQ(f.out.syscalls[0].buffers.size(), 1u);
  EXPECT_EQ(f.a.orphans(), 0u);
}

TEST(EbpfAssembler, AFailedExecBeforeTheCommandStartsIsThePathSearchAndLeftOut) {
  Feeder f;
  WireEnter e{};
  e.type = kRecEnter;
  e.tgid = 100;
  e.tid = 100;
  e.nr = sysno::execve;
  f(Bytes(e));
  WireReturn r{};
  r.type = kRecReturn;
  r.tid = 100;
  r.nr = sysno::execve;
  r.ret = -2;
  f(Bytes(r));
  EXPECT_TRUE(f.out.syscalls.empty());
  EXPECT_EQ(f.a.dropped_exec_attempts(), 1u);
}

TEST(EbpfAssembler, ACloneChildsFirstReturnBelongsToNoCallAndLeavesNothingBehind) {
  Feeder f;
  // The child's exit probe captured clone's out pointer, then returned from a clone it never
  // entered.
  f(Frag(9, 2, BufferDir::kOut, 4, 0, "\x09\0\0\0"));
  WireReturn r{};
  r.type = kRecReturn;
  r.tid = 9;
  r.nr = sysno::clone;
  f(Bytes(r));
  f(Bytes(Call(9, sysno::getpid, 100)));
  ASSERT_EQ(f.out.syscalls.size(), 1u);
  EXPECT_TRUE(f.out.syscalls[0].buffers.empty());
  EXPECT_EQ(f.a.orphans(), 0u);
}

TEST(EbpfAssembler, ACallCutByTheThreadsExitIsWrittenAsNeverReturning) {
  Feeder f;
  f(Bytes(Call(7, sysno::exit_group, 0, kEventNoExit)));
  WireProc ex{};
  ex.type = kRecProcExit;
  ex.pid = 100;
  ex.tid = 7;
  ex.is_thread = 1;
  f(Bytes(ex));
  ASSERT_EQ(f.out.syscalls.size(), 1u);
  EXPECT_TRUE(f.out.syscalls[0].flags & kEventNoExit);
  ASSERT_EQ(f.out.processes.size(), 1u);
  EXPECT_EQ(f.out.processes[0].kind, ProcessEventKind::kExit);
}

TEST(EbpfAssembler, AThreadThatExecsTakesItsOpenExecToTheLeadersId) {
  Feeder f;
  WireEnter e{};
  e.type = kRecEnter;
  e.tgid = 100;
  e.tid = 105;
  e.nr = sysno::execve;
  f(Bytes(e));
  WireProc exec{};
  exec.type = kRecExec;
  exec.pid = 100;
  exec.tid = 100;
  exec.parent = 105;  // old_pid
  f(Bytes(exec));
  WireReturn r{};
  r.type = kRecReturn;
  r.tid = 100;
  r.nr = sysno::execve;
  f(Bytes(r));
  ASSERT_EQ(f.out.syscalls.size(), 1u);
  EXPECT_EQ(f.out.syscalls[0].tid, 100);
}

TEST(EbpfAssembler, AReturnWithoutItsEnterIsCountedAsAnOrphan) {
  Feeder f;
  WireReturn r{};
  r.type = kRecReturn;
  r.tid = 7;
  r.nr = sysno::read;
  f(Bytes(r));
  EXPECT_TRUE(f.out.syscalls.empty());
  EXPECT_EQ(f.a.orphans(), 1u);
}

TEST(EbpfAssembler, MalformedRecordsAreRefused) {
  Assembler a;
  Assembler::Out out;
  uint32_t unknown = 99;
  EXPECT_FALSE(a.Feed(&unknown, sizeof unknown, &out));
  WireCall c = Call(7, sysno::read, 0);
  EXPECT_FALSE(a.Feed(&c, sizeof c - 1, &out));
  std::vector<uint8_t> frag = Frag(7, 1, BufferDir::kIn, 5, 0, "hello");
  EXPECT_FALSE(a.Feed(frag.data(), frag.size() - 1, &out));  // shorter than its len says
}

}  // namespace
}  // namespace fay::record::ebpf
