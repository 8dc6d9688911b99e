// The exporters over a small known trace: row counts, names and fields per format, CSV quoting,
// the CTF packet layout the metadata declares, and damaged input exported up to the damage.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "schema/syscall_table.h"
#include "trace/export/exporter.h"
#include "trace/export/json_writer.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"

namespace fay::trace {
namespace {

using testing::ScratchDir;
using testing::Slurp;
using testing::Spit;

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

// pid 10 "w,q\"x" opens /etc/hosts (fd 3) and writes "hi" to it 20 times; thread 11 reads 5
// times; the process forks and exits.
void WriteSample(const std::string& path, size_t chunk_bytes = 64 << 10) {
  RecordingInfo info = testing::SampleInfo();
  WriterOptions opt;
  opt.chunk_bytes = chunk_bytes;
  auto w = Writer::Create(path, info, opt);
  ASSERT_TRUE(w.ok());
  uint64_t t = 2'000'000'000;
  SyscallEvent open;
  open.entry_ns = t;
  open.exit_ns = t + 500;
  open.pid = open.tid = 10;
  open.comm = testing::Comm("w,q\"x");
  open.nr = sysno::openat;
  open.args = {static_cast<uint64_t>(-100), 0x1000, 1, 0, 0, 0};
  open.ret = 3;
  CapturedBuffer name;
  name.arg = 1;
  name.bytes = {'/', 'e', 't', 'c', '/', 'h', 'o', 's', 't', 's'};
  name.length = name.bytes.size();
  open.buffers.push_back(name);
  (*w)->Append(open);
  for (int i = 0; i < 20; ++i) {
    SyscallEvent ev = open;
    ev.entry_ns = t += 1000;
    ev.exit_ns = t + 200;
    ev.nr = sysno::write;
    ev.args = {3, 0x2000, 2, 0, 0, 0};
    ev.ret = 2;
    ev.buffers.clear();
    CapturedBuffer data;
    data.arg = 1;
    data.bytes = {'h', 'i'};
    data.length = 2;
    ev.buffers.push_back(data);
    (*w)->Append(ev);
  }
  for (int i = 0; i < 5; ++i) {
    SyscallEvent ev = open;
    ev.tid = 11;
    ev.entry_ns = t += 1000;
    ev.exit_ns = t + 300;
    ev.nr = sysno::read;
    ev.args = {3, 0x3000, 1, 0, 0, 0};
    ev.ret = -9;  // EBADF
    ev.buffers.clear();
    (*w)->Append(ev);
  }
  ProcessEvent fork;
  fork.kind = ProcessEventKind::kFork;
  fork.time_ns = t += 1000;
  fork.pid = fork.tid = 12;
  fork.parent_pid = 10;
  (*w)->Append(fork);
  ASSERT_TRUE((*w)->Close().ok());
}

Status Export(const std::string& trace, const std::string& format, const std::string& out,
              ExportStats* stats, ExportOptions opt = {}) {
  auto r = Reader::Open(trace);
  if (!r.ok()) return r.status();
  auto e = MakeExporter(format, out, r->info(), opt);
  if (!e.ok()) return e.status();
  return ExportTrace(*r, **e, stats);
}

TEST(Export, JsonlOneObjectPerEventWithNamedArguments) {
  ScratchDir dir;
  WriteSample(dir.File("t.fay"));
  ExportStats st;
  ASSERT_TRUE(Export(dir.File("t.fay"), "jsonl", dir.File("o.jsonl"), &st, {.buffers = true}).ok());
  EXPECT_EQ(st.syscalls, 26u);
  auto lines = Lines(Slurp(dir.File("o.jsonl")));
  ASSERT_EQ(lines.size(), 27u);
  auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["syscall"], "openat");
  EXPECT_EQ(first["comm"], "w,q\"x");
  EXPECT_EQ(first["args"]["dirfd"], -100);  // the syscall table's argument names
  EXPECT_EQ(first["ret"], 3);
  EXPECT_EQ(first["latency"], 500);
  EXPECT_EQ(first["text"], "openat(AT_FDCWD, \"/etc/hosts\", O_WRONLY) = 3");
  auto write = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(write["bytes"], 2);
  EXPECT_EQ(write["buffers"][0]["hex"], "6869");
  auto read = nlohmann::json::parse(lines[25]);
  EXPECT_EQ(read["tid"], 11);
  EXPECT_EQ(read["errno"], 9);
  auto fork = nlohmann::json::parse(lines[26]);
  EXPECT_EQ(fork["type"], "fork");
  EXPECT_EQ(fork["parent_pid"], 10);
}

TEST(Export, CsvHeaderQuotingAndBuffers) {
  ScratchDir dir;
  WriteSample(dir.File("t.fay"));
  ExportStats st;
  ASSERT_TRUE(Export(dir.File("t.fay"), "csv", dir.File("o.csv"), &st, {.buffers = true}).ok());
  auto lines = Lines(Slurp(dir.File("o.csv")));
  ASSERT_EQ(lines.size(), 27u);  // header + one row per syscall; process events are not rows
  EXPECT_EQ(lines[0],
            "time,pid,tid,ppid,uid,comm,syscall,nr,arg0,arg1,arg2,arg3,arg4,arg5,ret,errno,latency,"
            "bytes,args,text,buffers");
  EXPECT_EQ(lines[2].rfind("2000001000,10,10,0,0,\"w,q\"\"x\",write,1,0x3,0x2000,0x2,", 0), 0u)
      << lines[2];
  EXPECT_NE(lines[2].find(",2,0,200,2,fd=3 buf=0x2000 count=0x2,"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[2].substr(lines[2].size() - 10), ",1:in:6869");
}

TEST(Export, ChromeCompleteEventsAndNames) {
  ScratchDir dir;
  WriteSample(dir.File("t.fay"));
  ExportStats st;
  ASSERT_TRUE(Export(dir.File("t.fay"), "chrome", dir.File("o.json"), &st).ok());
  auto j = nlohmann::json::parse(Slurp(dir.File("o.json")));
  int complete = 0, thread_names = 0, process_names = 0, instants = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number());
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
    if (e["ph"] == "M" && e["name"] == "process_name") ++process_names;
    if (e["ph"] == "i") ++instants;
  }
  EXPECT_EQ(complete, 26);
  EXPECT_EQ(thread_names, 2);
  EXPECT_EQ(process_names, 1);
  EXPECT_EQ(instants, 1);
  // Microseconds from the recording's start (anchor at 1 s; the open enters at 2 s).
  EXPECT_EQ(j["traceEvents"][2]["ts"], 1000000.0);
  EXPECT_EQ(j["traceEvents"][2]["dur"], 0.5);
}

TEST(Export, CtfMetadataAndPackets) {
  ScratchDir dir;
  WriteSample(dir.File("t.fay"));
  ExportStats st;
  ASSERT_TRUE(Export(dir.File("t.fay"), "ctf", dir.File("ctf"), &st).ok());
  std::string meta = Slurp(dir.File("ctf/metadata"));
  EXPECT_EQ(meta.rfind("/* CTF 1.8 */", 0), 0u);
  EXPECT_NE(meta.find("name = \"openat\";\n\tid = 257;"), std::string::npos);
  EXPECT_NE(meta.find("name = \"write\";\n\tid = 1;"), std::string::npos);
  EXPECT_NE(meta.find("name = \"read\";\n\tid = 0;"), std::string::npos);
  EXPECT_NE(meta.find("int64_t _dirfd;"), std::string::npos);
  std::string stream = Slurp(dir.File("ctf/stream"));
  ASSERT_GE(stream.size(), 48u);
  uint32_t magic;
  uint64_t content_bits, packet_bits;
  std::memcpy(&magic, stream.data(), 4);
  std::memcpy(&content_bits, stream.data() + 24, 8);
  std::memcpy(&packet_bits, stream.data() + 32, 8);
  EXPECT_EQ(magic, 0xC1FC1FC1u);
  EXPECT_EQ(content_bits, stream.size() * 8);  // one packet
  EXPECT_EQ(packet_bits, content_bits);
}

TEST(Export, DamagedChunkExportsThePrefixAndReportsTheDamage) {
  ScratchDir dir;
  WriteSample(dir.File("t.fay"), /*chunk_bytes=*/256);
  auto r = Reader::Open(dir.File("t.fay"));
  ASSERT_TRUE(r.ok());
  // Flip a byte in the payload of the second events chunk.
  uint64_t target = 0;
  int seen = 0;
  for (const ChunkRef& c : r->chunks())
    if (c.type == ChunkType::kEvents && ++seen == 2) target = c.offset + kChunkHeaderSize + 2;
  ASSERT_GT(target, 0u);
  std::string bytes = Slurp(dir.File("t.fay"));
  bytes[target] ^= 0x55;
  std::ofstream(dir.File("bad.fay"), std::ios::binary) << bytes;
  ExportStats st;
  Status s = Export(dir.File("bad.fay"), "jsonl", dir.File("o.jsonl"), &st);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CRC32C mismatch"), std::string::npos) << s.message();
  EXPECT_GT(st.syscalls, 0u);
  EXPECT_LT(st.syscalls, 26u);
  EXPECT_EQ(Lines(Slurp(dir.File("o.jsonl"))).size(), st.syscalls + st.processes);
}

TEST(JsonWriter, NestingEscapingAndInvalidUtf8) {
  std::string out;
  JsonWriter j(out);
  j.BeginObject();
  j.Key("a").Int(-1);
  j.Key("b").BeginArray();
  j.Uint(2);
  j.Double(0.5);
  j.BeginObject();
  j.EndObject();
  j.Null();
  j.EndArray();
  j.Key("s").String(std::string("q\"\\\n\x01\xc3\xa9\xff\xe2\x82", 10));
  j.Key("t").Bool(true);
  j.EndObject();
  EXPECT_EQ(out,
            "{\"a\":-1,\"b\":[2,0.5,{},null],\"s\":\"q\\\"\\\\\\n\\u0001\xc3\xa9\\ufffd\\ufffd"
            "\\ufffd\",\"t\":true}")
      << out;
  auto parsed = nlohmann::json::parse(out);
  EXPECT_EQ(parsed["s"], "q\"\\\n\x01\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(Export, UnknownFormatIsRefused) {
  ScratchDir dir;
  WriteSample(dir.File("t.fay"));
  ExportStats st;
  Status s = Export(dir.File("t.fay"), "pdf", dir.File("o.pdf"), &st);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown format 'pdf'"), std::string::npos);
}

}  // namespace
}  // namespace fay::trace
