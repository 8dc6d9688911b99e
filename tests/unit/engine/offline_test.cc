// The offline source: recorded syscalls as interpreter events (fields, bytes, path from the fd
// table), parallel chunk readers that merge to the serial result, and time ranges.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/strings.h"
#include "engine/offline/event_builder.h"
#include "engine/offline/fd_paths.h"
#include "engine/offline/table_catalog.h"
#include "engine/offline/trace_catalog.h"
#include "engine/offline/trace_query.h"
#include "engine/output/sink.h"
#include "query/compile.h"
#include "schema/syscall_table.h"
#include "trace/format.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace fay {
namespace {

// Syscall probes from the syscall table: no tracefs needed.
using TableCatalog = SyscallTableCatalog;

// A live catalog that may not read tracefs.
class DeniedCatalog : public ProbeCatalog {
 public:
  Expected<std::vector<ProbeInfo>> Resolve(const std::string&) override {
    return Error(Code::kPermission, "cannot list /sys/kernel/tracing/events: Permission denied");
  }
  std::vector<std::string> Nearest(const std::string&, size_t) override { return {}; }
};

class CaptureSink : public OutputSink {
 public:
  void Window(const Plan&, const ResultSet& rs) override { windows.push_back(rs); }
  void SelectRow(const Plan&, const std::vector<Value>& row, uint64_t) override {
    rows.push_back(row);
  }
  std::vector<ResultSet> windows;
  std::vector<std::vector<Value>> rows;
};

std::array<char, 16> CommOf(const std::string& s) {
  std::array<char, 16> c{};
  for (size_t i = 0; i < s.size() && i < 15; ++i) c[i] = s[i];
  return c;
}

SyscallEvent Call(uint64_t t, int32_t pid, const std::string& comm, int nr,
                  std::array<uint64_t, 6> args, int64_t ret, uint64_t latency = 100) {
  SyscallEvent ev;
  ev.entry_ns = t;
  ev.exit_ns = t + latency;
  ev.pid = ev.tid = pid;
  ev.comm = CommOf(comm);
  ev.nr = nr;
  ev.args = args;
  ev.ret = ret;
  return ev;
}

CapturedBuffer Buf(int arg, BufferDir dir, const std::string& bytes) {
  CapturedBuffer b;
  b.arg = static_cast<uint8_t>(arg);
  b.dir = dir;
  b.addr = 0x1000;
  b.bytes.assign(bytes.begin(), bytes.end());
  b.length = b.bytes.size();
  return b;
}

class OfflineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fay-offline-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/t.fay";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // app (pid 100, cwd /work): opens data.txt as fd 3, reads it 50 times (10 bytes each), dups
  // it to 7, writes 5 bytes to 7, closes 3, then a read of 3 fails. other (pid 200) calls
  // getppid 3000 times. Small chunks, so the parallel readers each get many.
  void WriteTrace() {
    RecordingInfo info;
    info.cwd = "/work";
    info.root_pid = 100;
    info.anchor_monotonic_ns = 1'000'000;
    info.anchor_realtime_ns = 5'000'000'000;
    trace::WriterOptions wopt;
    wopt.chunk_bytes = 2048;
    auto w = trace::Writer::Create(path_, info, wopt);
    ASSERT_TRUE(w.ok()) << w.status().message();
    uint64_t t = 2'000'000;
    SyscallEvent open =
        Call(t, 100, "app", sysno::openat, {static_cast<uint64_t>(-100), 0x1000, 0, 0, 0, 0}, 3);
    open.buffers.push_back(Buf(1, BufferDir::kIn, std::string("data.txt") + '\0'));
    (*w)->Append(open);
    for (int i = 0; i < 50; ++i) {
      t += 1000;
      SyscallEvent rd = Call(t, 100, "app", sysno::read, {3, 0x2000, 10, 0, 0, 0}, 10, 100 + i);
      rd.buffers.push_back(Buf(1, BufferDir::kOut, "0123456789"));
      (*w)->Append(rd);
    }
    (*w)->Append(Call(t += 1000, 100, "app", sysno::dup2, {3, 7, 0, 0, 0, 0}, 7));
    SyscallEvent wr = Call(t += 1000, 100, "app", sysno::write, {7, 0x3000, 5, 0, 0, 0}, 5);
    wr.buffers.push_back(Buf(1, BufferDir::kIn, "hello"));
    (*w)->Append(wr);
    (*w)->Append(Call(t += 1000, 100, "app", sysno::close, {3, 0, 0, 0, 0, 0}, 0));
    (*w)->Append(Call(t += 1000, 100, "app", sysno::read, {3, 0x2000, 10, 0, 0, 0}, -9));
    for (int i = 0; i < 3000; ++i)
      (*w)->Append(Call(t += 1000, 200, "other", sysno::getppid, {}, 1, i % 700));
    last_ns_ = t;
    ASSERT_TRUE((*w)->Close().ok());
  }

  Expected<Plan> Compile(const std::string& q) { return CompileQuery(q, catalog_, {}); }

  CaptureSink Run(const Plan& plan, TraceQueryOptions opt = {}) {
    CaptureSink sink;
    TraceQueryStats stats;
    Status st = RunTraceQuery(plan, path_, opt, sink, &stats);
    EXPECT_TRUE(st.ok()) << st.message();
    threads_ = stats.threads;
    return sink;
  }

  std::string dir_, path_;
  uint64_t last_ns_ = 0;
  unsigned threads_ = 0;
  TableCatalog table_;
  TraceCatalog catalog_{table_};
};

TEST_F(OfflineTest, CountsByCommExactly) {
  WriteTrace();
  auto plan = Compile("syscall:* | count() as n by comm");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CaptureSink out = Run(*plan);
  ASSERT_EQ(out.windows.size(), 1u);
  ASSERT_EQ(out.windows[0].rows.size(), 2u);
  EXPECT_EQ(std::get<std::string>(out.windows[0].rows[0].keys[0]), "app");
  EXPECT_EQ(out.windows[0].rows[0].aggs[0].Count(), 55u);
  EXPECT_EQ(std::get<std::string>(out.windows[0].rows[1].keys[0]), "other");
  EXPECT_EQ(out.windows[0].rows[1].aggs[0].Count(), 3000u);
}

TEST_F(OfflineTest, BytesAndPathFromTheFdTable) {
  WriteTrace();
  auto plan = Compile(
      "syscall:read, syscall:write, syscall:close | count() as n, sum(bytes) as b by probe, path");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CaptureSink out = Run(*plan, {.threads = 4});
  EXPECT_EQ(threads_, 1u);  // path needs the calls in file order
  ASSERT_EQ(out.windows.size(), 1u);
  std::vector<std::string> got;
  for (const Row& r : out.windows[0].rows)
    got.push_back(std::get<std::string>(r.keys[0]) + " " + std::get<std::string>(r.keys[1]) +
                  " n=" + std::to_string(r.aggs[0].Count()) +
                  " b=" + std::to_string(r.aggs[1].Scalar()));
  EXPECT_EQ(got, (std::vector<std::string>{
                     "syscall:close /work/data.txt n=1 b=0",
                     "syscall:read  n=1 b=0",  // fd 3 was closed: no path
                     "syscall:read /work/data.txt n=50 b=500",
                     "syscall:write /work/data.txt n=1 b=5",  // fd 7, a dup of 3
                 }));
}

TEST_F(OfflineTest, ParallelReadersMergeToTheSerialResult) {
  WriteTrace();
  auto plan = Compile(
      "syscall:* | count(), sum(latency), min(latency), max(latency), hist(latency), "
      "quantile(latency, 0.99), distinct(latency) by comm, probe");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CaptureSink serial = Run(*plan, {.threads = 1});
  EXPECT_EQ(threads_, 1u);
  CaptureSink parallel = Run(*plan, {.threads = 4});
  EXPECT_EQ(threads_, 4u);
  ASSERT_EQ(serial.windows.size(), 1u);
  ASSERT_EQ(parallel.windows.size(), 1u);
  const auto& a = serial.windows[0].rows;
  const auto& b = parallel.windows[0].rows;
  ASSERT_EQ(a.size(), 6u);  // app: openat, read, dup2, write, close; other: getppid
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].keys, b[i].keys);
    for (size_t j = 0; j < a[i].aggs.size(); ++j) EXPECT_TRUE(a[i].aggs[j] == b[i].aggs[j]);
  }
}

TEST_F(OfflineTest, TimeRangeKeepsOverlappingCalls) {
  WriteTrace();
  auto plan = Compile("syscall:getppid | count() as n");
  ASSERT_TRUE(plan.ok());
  // The last 100 getppid calls start at last_ns - 99000 .. last_ns.
  TraceQueryOptions opt;
  opt.from_ns = last_ns_ - 99'000;
  opt.threads = 2;
  CaptureSink out = Run(*plan, opt);
  ASSERT_EQ(out.windows.size(), 1u);
  EXPECT_EQ(out.windows[0].rows[0].aggs[0].Count(), 100u);
}

TEST_F(OfflineTest, SelectStreamsInFileOrderWithStrings) {
  WriteTrace();
  auto plan = Compile("syscall:openat | select str(args.pathname), ret, path");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CaptureSink out = Run(*plan);
  ASSERT_EQ(out.rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(out.rows[0][0]), "data.txt");
  EXPECT_EQ(std::get<int64_t>(out.rows[0][1]), 3);
  EXPECT_EQ(std::get<std::string>(out.rows[0][2]), "/work/data.txt");
}

TEST_F(OfflineTest, EveryCutsWindowsOnTraceTime) {
  WriteTrace();
  // 3056 calls 1 us apart from t = 2 ms; windows of 1 ms from the recording start (1 ms).
  auto plan = Compile("syscall:* | count() as n | every 1ms");
  ASSERT_TRUE(plan.ok());
  CaptureSink out = Run(*plan);
  uint64_t total = 0;
  for (const ResultSet& rs : out.windows) total += rs.rows[0].aggs[0].Count();
  EXPECT_EQ(total, 3055u);
  EXPECT_EQ(out.windows[0].rows[0].aggs[0].Count(), 0u);  // [1 ms, 2 ms): nothing yet
  EXPECT_EQ(out.windows[1].rows[0].aggs[0].Count(), 1000u);
}

TEST_F(OfflineTest, DamageStopsTheParallelQueryWhereTheSerialOneStops) {
  WriteTrace();
  auto reader = trace::Reader::Open(path_);
  ASSERT_TRUE(reader.ok());
  uint64_t target = 0;
  int seen = 0;
  for (const trace::ChunkRef& c : reader->chunks())
    if (c.type == trace::ChunkType::kEvents && ++seen == 3)
      target = c.offset + trace::kChunkHeaderSize + 1;
  ASSERT_GT(target, 0u);
  {
    std::FILE* f = std::fopen(path_.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>(target), SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, static_cast<long>(target), SEEK_SET);
    std::fputc(c ^ 0x5a, f);
    std::fclose(f);
  }
  auto plan = Compile("syscall:* | count() as n");
  ASSERT_TRUE(plan.ok());
  uint64_t counts[2];
  for (unsigned threads : {1u, 4u}) {
    CaptureSink sink;
    TraceQueryStats stats;
    TraceQueryOptions opt;
    opt.threads = threads;
    Status st = RunTraceQuery(*plan, path_, opt, sink, &stats);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("CRC32C mismatch"), std::string::npos) << st.message();
    ASSERT_EQ(sink.windows.size(), 1u);
    counts[threads == 1 ? 0 : 1] = sink.windows[0].rows[0].aggs[0].Count();
  }
  EXPECT_GT(counts[0], 0u);
  EXPECT_LT(counts[0], 3055u);
  EXPECT_EQ(counts[0], counts[1]);
}

TEST(TraceCatalog, OnlySyscallProbesAndTheRecordingFields) {
  TableCatalog table;
  TraceCatalog catalog(table);
  auto p = catalog.Resolve("syscall:read");
  ASSERT_TRUE(p.ok());
  ASSERT_NE((*p)[0].FindField("bytes"), nullptr);
  EXPECT_EQ((*p)[0].FindField("path")->type.kind, TypeKind::kString);
  auto tp = catalog.Resolve("tracepoint:sched:sched_switch");
  ASSERT_FALSE(tp.ok());
  EXPECT_EQ(tp.status().code(), Code::kInvalidArgument);
  auto q = CompileQuery("uprobe:/bin/bash:readline | count()", catalog, {});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("query:1:1-25: ERROR: 'uprobe:...' is not in a recorded "
                                      "trace"),
            std::string::npos)
      << q.status().message();
}

TEST(TraceCatalog, FallsBackToTheSyscallTableWithoutTracefs) {
  DeniedCatalog denied;
  TraceCatalog catalog(denied);
  auto plan = CompileQuery("syscall:openat | count() by str(args.pathname), path", catalog, {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(catalog.fallback_reason().find("Permission denied"), std::string::npos);
  const ProbeInfo& p = plan->probes[0];
  EXPECT_EQ(p.syscall_nr, sysno::openat);
  EXPECT_EQ(p.FindField("args.dirfd")->c_type, "int");  // int-sized: the low half, as live
  EXPECT_TRUE(p.FindField("args.pathname")->type.user_ptr);
  auto bad = CompileQuery("syscall:opnat | count()", catalog, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HINT: did you mean: syscall:openat"), std::string::npos)
      << bad.status().message();
}

TEST(FdPaths, OpensDupsClosesAndForks) {
  FdPaths paths;
  paths.SetCwd(1, "/home/u");
  SyscallEvent open = Call(1, 1, "a", sysno::openat, {static_cast<uint64_t>(-100), 0, 0}, 4);
  open.buffers.push_back(Buf(1, BufferDir::kIn, std::string("x/y") + '\0'));
  EXPECT_EQ(paths.Apply(open), "/home/u/x/y");
  SyscallEvent at = Call(2, 1, "a", sysno::openat, {4, 0, 0}, 5);
  at.buffers.push_back(Buf(1, BufferDir::kIn, std::string("z") + '\0'));
  EXPECT_EQ(paths.Apply(at), "/home/u/x/y/z");
  EXPECT_EQ(paths.Apply(Call(3, 1, "a", sysno::fcntl, {5, F_DUPFD, 10}, 10)), "/home/u/x/y/z");
  EXPECT_EQ(paths.Apply(Call(4, 1, "a", sysno::read, {10, 0, 1}, 1)), "/home/u/x/y/z");
  ProcessEvent fork;
  fork.kind = ProcessEventKind::kFork;
  fork.pid = fork.tid = 2;
  fork.parent_pid = 1;
  paths.OnProcess(fork);
  EXPECT_EQ(paths.Apply(Call(5, 2, "a", sysno::read, {4, 0, 1}, 1)), "/home/u/x/y");
  EXPECT_EQ(paths.Apply(Call(6, 1, "a", sysno::close, {4}, 0)), "/home/u/x/y");
  EXPECT_EQ(paths.Apply(Call(7, 1, "a", sysno::read, {4, 0, 1}, -9)), "");
  EXPECT_EQ(paths.Apply(Call(8, 2, "a", sysno::read, {4, 0, 1}, 1)),
            "/home/u/x/y");  // the child's copy
  SyscallEvent cd = Call(9, 2, "a", sysno::chdir, {0}, 0);
  cd.buffers.push_back(Buf(0, BufferDir::kIn, std::string("/tmp") + '\0'));
  paths.Apply(cd);
  SyscallEvent rel = Call(10, 2, "a", sysno::open, {0}, 6);
  rel.buffers.push_back(Buf(0, BufferDir::kIn, std::string("f") + '\0'));
  EXPECT_EQ(paths.Apply(rel), "/tmp/f");
  EXPECT_EQ(paths.Apply(Call(11, 3, "a", sysno::read, {0, 0, 1}, 1)), "");  // unknown process
}

TEST(ArgValue, IntArgumentsKeepTheirLowHalfAsTheProbeLoadsThem) {
  Field fd{"args.fd", Type::Int(true), FieldSource::kCtx, 16, 8, 0, "int"};
  EXPECT_EQ(ArgValue(fd, 0xffffffff00000003ull), 3);
  EXPECT_EQ(ArgValue(fd, 0x00000000ffffff9cull), -100);
  Field count{"args.count", Type::Int(false), FieldSource::kCtx, 24, 8, 2, "size_t"};
  EXPECT_EQ(ArgValue(count, 0xffffffff00000003ull), static_cast<int64_t>(0xffffffff00000003ull));
}

}  // namespace
}  // namespace fay

namespace fay {
namespace {

// State across probes over a recording: each read remembers its count (10) by process, and
// the query's reads and writes of that process take it.
TEST_F(OfflineTest, StatePipelinesRememberAndTakeInCallOrder) {
  WriteTrace();
  auto plan = Compile(
      "syscall:read | where args.fd == 3 | remember args.count as asked by pid;\n"
      "syscall:write, syscall:read | count() as n, sum(asked[pid]) as s");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CaptureSink out = Run(*plan);
  ASSERT_EQ(out.windows.size(), 1u);
  ASSERT_EQ(out.windows[0].rows.size(), 1u);
  // Reads 2..50 each take what the one before remembered (a probe reads before its own
  // remember), the write takes the 50th's, and the read after the close finds nothing.
  EXPECT_EQ(out.windows[0].rows[0].aggs[0].Count(), 50u);
  EXPECT_EQ(out.windows[0].rows[0].aggs[1].Scalar(), 500);
  EXPECT_EQ(threads_, 1u);  // states need the calls in order: one reader
}

}  // namespace
}  // namespace fay
