// JSON Lines: one object per event, syscalls and process events alike ("type" tells them
// apart). Field names follow the query language (time, pid, tid, comm, args.*, ret, errno,
// latency, bytes), so a row reads like the event a query sees.
#include <nlohmann/json.hpp>

#include "trace/export/event_fields.h"
#include "trace/export/exporter.h"

namespace fay::trace {
namespace {

using Json = nlohmann::ordered_json;

class JsonlExporter : public Exporter {
 public:
  JsonlExporter(FILE* out, const ExportOptions& options) : out_(out), options_(options) {}

  Status Syscall(const SyscallEvent& ev) override {
    Json j;
    j["type"] = "syscall";
    j["time"] = ev.entry_ns;
    j["pid"] = ev.pid;
    j["tid"] = ev.tid;
    j["ppid"] = ev.ppid;
    j["uid"] = ev.uid;
    j["comm"] = std::string(Comm(ev));
    j["syscall"] = SyscallEventName(ev.nr);
    Json args = Json::object();
    for (int i = 0; i < ArgCount(ev.nr); ++i) {
      if (ArgSigned(ev.nr, i))
        args[ArgName(ev.nr, i)] = ArgInt(ev.nr, i, ev.args[i]);
      else
        args[ArgName(ev.nr, i)] = static_cast<uint64_t>(ArgInt(ev.nr, i, ev.args[i]));
    }
    j["args"] = std::move(args);
    if (ev.flags & kEventNoExit) {
      j["ret"] = nullptr;
    } else {
      j["ret"] = ev.ret;
    }
    j["errno"] = Errno(ev);
    j["latency"] = Latency(ev);
    j["bytes"] = CapturedBytes(ev);
    j["text"] = CallText(ev);
    if (options_.buffers && !ev.buffers.empty()) {
      Json bufs = Json::array();
      for (const CapturedBuffer& b : ev.buffers) {
        Json jb;
        jb["arg"] = b.arg;
        jb["sub"] = b.sub;
        jb["dir"] = b.dir == BufferDir::kIn ? "in" : "out";
        jb["length"] = b.length;
        jb["truncated"] = b.truncated;
        jb["captured"] = !b.not_captured;
        jb["hex"] = Hex(b.bytes);
        bufs.push_back(std::move(jb));
      }
      j["buffers"] = std::move(bufs);
    }
    return Write(j);
  }

  Status Process(const ProcessEvent& ev) override {
    Json j;
    j["type"] = ev.kind == ProcessEventKind::kFork   ? "fork"
                : ev.kind == ProcessEventKind::kExec ? "exec"
                                                     : "exit";
    j["time"] = ev.time_ns;
    j["pid"] = ev.pid;
    j["tid"] = ev.tid;
    if (ev.kind == ProcessEventKind::kFork) {
      j["parent_pid"] = ev.parent_pid;
      j["thread"] = ev.is_thread;
    } else if (ev.kind == ProcessEventKind::kExec) {
      j["path"] = ev.path;
    } else {
      j["status"] = ev.exit_status;
    }
    return Write(j);
  }

  Status Finish() override { return Status::Ok(); }

 private:
  Status Write(const Json& j) {
    // Recorded strings are bytes; invalid UTF-8 becomes U+FFFD rather than an exception.
    line_ = j.dump(-1, ' ', false, Json::error_handler_t::replace);
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
