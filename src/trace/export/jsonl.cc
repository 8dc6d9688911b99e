// JSON Lines: one object per event, syscalls and process events alike ("type" tells them
// apart). Field names follow the query language (time, pid, tid, comm, args.*, ret, errno,
// latency, bytes), so a row reads like the event a query sees.
#include "trace/export/event_fields.h"
#include "trace/export/exporter.h"
#include "trace/export/json_writer.h"

namespace fay::trace {
namespace {

class JsonlExporter : public Exporter {
 public:
  JsonlExporter(FILE* out, const ExportOptions& options) : out_(out), options_(options) {}

  Status Syscall(const SyscallEvent& ev) override {
    line_.clear();
    JsonWriter j(line_);
    j.BeginObject();
    j.Key("type").String("syscall");
    j.Key("time").Uint(ev.entry_ns);
    j.Key("pid").Int(ev.pid);
    j.Key("tid").Int(ev.tid);
    j.Key("ppid").Int(ev.ppid);
    j.Key("uid").Uint(ev.uid);
    j.Key("comm").String(Comm(ev));
    j.Key("syscall").String(SyscallEventName(ev.nr));
    j.Key("args").BeginObject();
    for (int i = 0; i < ArgCount(ev.nr); ++i) {
      int64_t v = ArgInt(ev.nr, i, ev.args[i]);
      j.Key(ArgName(ev.nr, i));
      if (ArgSigned(ev.nr, i))
        j.Int(v);
      else
        j.Uint(static_cast<uint64_t>(v));
    }
    j.EndObject();
    j.Key("ret");
    if (ev.flags & kEventNoExit)
      j.Null();
    else
      j.Int(ev.ret);
    j.Key("errno").Int(Errno(ev));
    j.Key("latency").Uint(Latency(ev));
    j.Key("bytes").Uint(ev.CapturedBytes());
    j.Key("text").String(CallText(ev));
    if (options_.buffers && !ev.buffers.empty()) {
      j.Key("buffers").BeginArray();
      for (const CapturedBuffer& b : ev.buffers) {
        j.BeginObject();
        j.Key("arg").Uint(b.arg);
        j.Key("sub").Uint(b.sub);
        j.Key("dir").String(b.dir == BufferDir::kIn ? "in" : "out");
        j.Key("length").Uint(b.length);
        j.Key("truncated").Bool(b.truncated);
        j.Key("captured").Bool(!b.not_captured);
        j.Key("hex").String(Hex(b.bytes));
        j.EndObject();
      }
      j.EndArray();
    }
    j.EndObject();
    return Write();
  }

  Status Process(const ProcessEvent& ev) override {
    line_.clear();
    JsonWriter j(line_);
    j.BeginObject();
    j.Key("type").String(ProcessKindName(ev.kind));
    j.Key("time").Uint(ev.time_ns);
    j.Key("pid").Int(ev.pid);
    j.Key("tid").Int(ev.tid);
    ProcessDetails(ev, j);
    j.EndObject();
    return Write();
  }

  Status Finish() override { return Status::Ok(); }

 private:
  Status Write() {
    line_ += '\n';
    fwrite(line_.data(), 1, line_.size(), out_);
    return Status::Ok();
  }

  FILE* out_;
  ExportOptions options_;
  std::string line_;
};

}  // namespace

std::unique_ptr<Exporter> MakeJsonlExporter(FILE* out, const RecordingInfo& info,
                                            const ExportOptions& options) {
  return std::make_unique<JsonlExporter>(out, options);
}

}  // namespace fay::trace
