// Helpers shared by the trace tests: a scratch directory, event builders, and a canonical text
// form of events so equality failures show which field differs.
#pragma once

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "schema/syscall_event.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace fay::trace::testing {

// A whole file as bytes, and back: the hostile and structure tests cut and patch real traces.
inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void Spit(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fay-trace-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string Hex(const std::vector<uint8_t>& b) {
  std::string s;
  for (uint8_t c : b) s += fmt::format("{:02x}", c);
  return s;
}

inline std::string Describe(const SyscallEvent& e) {
  std::string s = fmt::format(
      "entry={} exit={} pid={} tid={} ppid={} uid={} comm={} nr={} args={:#x},{:#x},{:#x},{:#x},"
      "{:#x},{:#x} ret={} flags={} cpu={}",
      e.entry_ns, e.exit_ns, e.pid, e.tid, e.ppid, e.uid, Hex({e.comm.begin(), e.comm.end()}), e.nr,
      e.args[0], e.args[1], e.args[2], e.args[3], e.args[4], e.args[5], e.ret, e.flags, e.cpu);
  for (const CapturedBuffer& b : e.buffers)
    s += fmt::format(" [arg={} sub={} dir={} addr={:#x} len={} trunc={} nc={} bytes={}]", b.arg,
                     b.sub, static_cast<int>(b.dir), b.addr, b.length, b.truncated, b.not_captured,
                     Hex(b.bytes));
  return s;
}

inline std::string Describe(const ProcessEvent& e) {
  std::string info;
  for (uint8_t b : e.siginfo) info += fmt::format("{:02x}", b);
  return fmt::format(
      "kind={} time={} pid={} tid={} parent={} thread={} status={} path={} signo={} info={}",
      static_cast<int>(e.kind), e.time_ns, e.pid, e.tid, e.parent_pid, e.is_thread, e.exit_status,
      e.path, e.signo, info);
}

inline std::array<char, 16> Comm(const std::string& s) {
  std::array<char, 16> c{};
  for (size_t i = 0; i < s.size() && i < 15; ++i) c[i] = s[i];
  return c;
}

inline RecordingInfo SampleInfo() {
  RecordingInfo info;
  info.argv = {"/usr/bin/tar", "cf", "out.tar", ""};
  info.env = {"HOME=/root", "PATH=/usr/bin:/bin", "EMPTY="};
  info.cwd = "/tmp/work dir";
  info.root_pid = 4242;
  info.backend = "ptrace";
  info.host = "buildhost";
  info.kernel = "6.18.0-test";
  info.arch = "x86_64";
  info.anchor_monotonic_ns = 1'000'000'000ull;
  info.anchor_realtime_ns = 1'700'000'000'123'456'789ull;
  info.syscall_table_version = 7;
  info.max_buffer = 4096;
  info.syscall_filter = "%file,read";
  return info;
}

// A deterministic mix of threads, syscalls, buffers (inline, blob, repeated, truncated, not
// captured), no-exit calls and process events.
struct Stream {
  std::vector<SyscallEvent> syscalls;
  std::vector<ProcessEvent> processes;
  // File order of everything, as (is_process, index).
  std::vector<std::pair<bool, size_t>> order;
};

inline Stream MakeStream(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Stream s;
  uint64_t t = 5'000'000'000ull;
  std::vector<uint8_t> repeated(300);
  for (size_t i = 0; i < repeated.size(); ++i) repeated[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < n; ++i) {
    t += rng() % 50'000;
    if (i % 97 == 5) {
      ProcessEvent p;
      p.kind = static_cast<ProcessEventKind>(1 + rng() % 3);
      p.time_ns = t;
      p.pid = 100 + static_cast<int32_t>(rng() % 4);
      p.tid = p.pid + static_cast<int32_t>(rng() % 3);
      p.parent_pid = p.kind == ProcessEventKind::kFork ? 99 : 0;
      p.is_thread = p.kind == ProcessEventKind::kFork && (rng() & 1);
      p.exit_status =
          p.kind == ProcessEventKind::kExit ? static_cast<int32_t>(rng() % 256) << 8 : 0;
      p.path = p.kind == ProcessEventKind::kExec ? "/usr/bin/prog" + std::to_string(i) : "";
      s.order.emplace_back(true, s.processes.size());
      s.processes.push_back(std::move(p));
      continue;
    }
    SyscallEvent e;
    e.pid = 100 + static_cast<int32_t>(rng() % 4);
    e.tid = e.pid + static_cast<int32_t>(rng() % 3);
    e.ppid = 99;
    e.uid = (i % 50 == 0) ? 0 : 1000;
    e.comm = Comm(i % 200 < 100 ? "worker" : "tar");
    e.entry_ns = t;
    e.nr = static_cast<int32_t>(rng() % 20);
    if (i % 31 == 0) {
      e.flags = kEventNoExit;
    } else {
      e.exit_ns = t + 1 + rng() % 20'000;
    }
    if (i % 53 == 0) e.flags |= kEventInterrupted;
    for (auto& a : e.args) a = (rng() & 1) ? rng() % 16 : 0x7ffd'0000'0000ull + rng() % 4096;
    e.ret =
        (i % 9 == 0) ? -static_cast<int64_t>(1 + rng() % 100) : static_cast<int64_t>(rng() % 4096);
    if (i % 4 == 0) {
      CapturedBuffer b;
      b.arg = 1;
      b.dir = (rng() & 1) ? BufferDir::kIn : BufferDir::kOut;
      b.addr = e.args[1];
      size_t len = (i % 8 == 0) ? rng() % 33 : 33 + rng() % 2000;
      b.bytes.resize(len);
      for (auto& c : b.bytes) c = static_cast<uint8_t>(rng());
      b.length = len;
      if (i % 12 == 0) {
        b.bytes = repeated;  // the same payload many times: stored once
        b.length = repeated.size();
      }
      if (i % 40 == 0) {
        b.truncated = true;
        b.length = b.bytes.size() + 1000;
      }
      e.buffers.push_back(b);
      if (i % 16 == 0) {
        CapturedBuffer nc;
        nc.arg = 2;
        nc.sub = 3;
        nc.dir = BufferDir::kOut;
        nc.addr = 0xdeadbeef;
        nc.length = 4096;
        nc.not_captured = true;
        e.buffers.push_back(nc);
      }
    }
    s.order.emplace_back(false, s.syscalls.size());
    s.syscalls.push_back(std::move(e));
  }
  return s;
}

// Everything the reader delivers, in order, as canonical text.
// Writes s to path in its order, expecting every append and the close to succeed.
inline void WriteStream(const std::string& path, const Stream& s, WriterOptions opts = {}) {
  auto w = Writer::Create(path, SampleInfo(), opts);
  ASSERT_TRUE(w.ok()) << w.status().message();
  for (auto [proc, i] : s.order) {
    if (proc)
      ASSERT_TRUE((*w)->Append(s.processes[i]));
    else
      ASSERT_TRUE((*w)->Append(s.syscalls[i]));
  }
  Status st = (*w)->Close();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE((*w)->failed());
}

inline std::vector<std::string> ReadAll(Reader& r, Status* st, const ReadFilter& f = {}) {
  std::vector<std::string> out;
  *st = r.ForEach(
      f, [&](const SyscallEvent& e) { out.push_back("S " + Describe(e)); },
      [&](const ProcessEvent& e) { out.push_back("P " + Describe(e)); });
  return out;
}

// A write(1, buf, n) of `bytes`, captured whole, entered at t.
inline SyscallEvent WriteEvent(uint64_t t, std::vector<uint8_t> bytes) {
  SyscallEvent e;
  e.entry_ns = t;
  e.exit_ns = t + 10;
  e.pid = e.tid = 7;
  e.comm = Comm("w");
  e.nr = 1;
  e.args = {1, 0x1000, bytes.size()};
  e.ret = static_cast<int64_t>(bytes.size());
  CapturedBuffer b;
  b.arg = 1;
  b.addr = 0x1000;
  b.length = bytes.size();
  b.bytes = std::move(bytes);
  e.buffers.push_back(std::move(b));
  return e;
}

// In a death-test child: reads path with 1 GiB of address space; exits 0 when reading yields no
// events and fails with exactly `want`.
inline void ReadUnderMemoryLimit(const std::string& path, const std::string& want) {
  struct rlimit lim = {size_t{1} << 30, size_t{1} << 30};
  ::setrlimit(RLIMIT_AS, &lim);
  auto r = Reader::Open(path);
  if (!r.ok()) _exit(2);
  Status st;
  std::vector<std::string> got = ReadAll(*r, &st);
  if (!got.empty()) _exit(3);
  if (st.message() != want) {
    fprintf(stderr, "got: %s\n", st.message().c_str());
    _exit(4);
  }
  _exit(0);
}

inline std::vector<std::string> ExpectedLines(const Stream& s) {
  std::vector<std::string> out;
  for (auto [proc, i] : s.order)
    out.push_back(proc ? "P " + Describe(s.processes[i]) : "S " + Describe(s.syscalls[i]));
  return out;
}

// Every header field, one EXPECT each, so a failure names the field.
inline void ExpectSameInfo(const RecordingInfo& got, const RecordingInfo& want) {
  EXPECT_EQ(got.argv, want.argv);
  EXPECT_EQ(got.env, want.env);
  EXPECT_EQ(got.cwd, want.cwd);
  EXPECT_EQ(got.root_pid, want.root_pid);
  EXPECT_EQ(got.backend, want.backend);
  EXPECT_EQ(got.host, want.host);
  EXPECT_EQ(got.kernel, want.kernel);
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.anchor_monotonic_ns, want.anchor_monotonic_ns);
  EXPECT_EQ(got.anchor_realtime_ns, want.anchor_realtime_ns);
  EXPECT_EQ(got.syscall_table_version, want.syscall_table_version);
  EXPECT_EQ(got.max_buffer, want.max_buffer);
  EXPECT_EQ(got.syscall_filter, want.syscall_filter);
}

}  // namespace fay::trace::testing
