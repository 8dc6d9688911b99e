// CSV (RFC 4180): one row per recorded syscall under a fixed header. Arguments are positional
// (arg0..arg5) so every row has the same columns; `args` names them (`fd=3 buf=0x... count=5`)
// and `text` is the call as `fay dump` prints it. With --buffers, `buffers` holds each captured
// buffer as ARG:DIR:HEX, separated by spaces.
#include <fmt/format.h>

#include "trace/export/event_fields.h"
#include "trace/export/exporter.h"

namespace fay::trace {
namespace {

// Quoted when it holds a comma, a quote or a line break; quotes doubled.
void Field(std::string& line, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
    line += s;
    return;
  }
  line += '"';
  for (char c : s) {
    if (c == '"') line += '"';
    line += c;
  }
  line += '"';
}

class CsvExporter : public Exporter {
 public:
  CsvExporter(FILE* out, const ExportOptions& options) : out_(out), options_(options) {
    std::string header =
        "time,pid,tid,ppid,uid,comm,syscall,nr,arg0,arg1,arg2,arg3,arg4,arg5,ret,errno,latency,"
        "bytes,args,text";
    if (options_.buffers) header += ",buffers";
    header += '\n';
    fwrite(header.data(), 1, header.size(), out_);
  }

  Status Syscall(const SyscallEvent& ev) override {
    line_.clear();
    fmt::format_to(std::back_inserter(line_), "{},{},{},{},{},", ev.entry_ns, ev.pid, ev.tid,
                   ev.ppid, ev.uid);
    Field(line_, Comm(ev));
    fmt::format_to(std::back_inserter(line_), ",{},{}", SyscallEventName(ev.nr), ev.nr);
    for (int i = 0; i < 6; ++i) fmt::format_to(std::back_inserter(line_), ",{:#x}", ev.args[i]);
    if (ev.flags & kEventNoExit)
      line_ += ",";
    else
      fmt::format_to(std::back_inserter(line_), ",{}", ev.ret);
    fmt::format_to(std::back_inserter(line_), ",{},{},{},", Errno(ev), Latency(ev),
                   ev.CapturedBytes());
    std::string named;
    for (int i = 0; i < ArgCount(ev.nr); ++i) {
      int64_t v = ArgInt(ev.nr, i, ev.args[i]);
      named += fmt::format("{}{}=", i ? " " : "", ArgName(ev.nr, i));
      named += ArgSigned(ev.nr, i) ? fmt::format("{}", v)
                                   : fmt::format("{:#x}", static_cast<uint64_t>(v));
    }
    Field(line_, named);
    line_ += ',';
    Field(line_, CallText(ev));
    if (options_.buffers) {
      std::string bufs;
      for (const CapturedBuffer& b : ev.buffers) {
        if (!bufs.empty()) bufs += ' ';
        bufs +=
            fmt::format("{}:{}:{}", b.arg, b.dir == BufferDir::kIn ? "in" : "out", Hex(b.bytes));
      }
      line_ += ',';
      line_ += bufs;
    }
    line_ += '\n';
    fwrite(line_.data(), 1, line_.size(), out_);
    return Status::Ok();
  }

  Status Finish() override { return Status::Ok(); }

 private:
  FILE* out_;
  ExportOptions options_;
  std::string line_;
};

}  // namespace

std::unique_ptr<Exporter> MakeCsvExporter(FILE* out, const RecordingInfo& info,
                                          const ExportOptions& options) {
  return std::make_unique<CsvExporter>(out, options);
}

}  // namespace fay::trace
