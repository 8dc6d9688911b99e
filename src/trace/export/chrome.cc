// Chrome trace-event JSON (the "JSON Object Format" of the Trace Event Format document), which
// Perfetto UI and chrome://tracing open. Each recorded syscall is a complete event (ph "X") on
// its thread's track (pid, tid), with its arguments, return value and strace-style text in
// `args`. Process and thread names are metadata events (ph "M"), emitted when a thread is first
// seen and again when its name changes (exec); fork, exec and exit are thread-scoped instant
// events (ph "i"). Timestamps are microseconds from the start of the recording.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "trace/export/event_fields.h"
#include "trace/export/exporter.h"

namespace fay::trace {
namespace {

using Json = nlohmann::ordered_json;

class ChromeExporter : public Exporter {
 public:
  ChromeExporter(FILE* out, const RecordingInfo& info)
      : out_(out), start_(info.anchor_monotonic_ns) {
    Json other;
    other["recorder"] = "fay";
    other["backend"] = info.backend;
    other["host"] = info.host;
    other["kernel"] = info.kernel;
    std::string head = "{\"otherData\":" + Dump(other) + ",\"displayTimeUnit\":\"ns\",";
    head += "\"traceEvents\":[\n";
    fwrite(head.data(), 1, head.size(), out_);
  }

  Status Syscall(const SyscallEvent& ev) override {
    Names(ev.pid, ev.tid, Comm(ev));
    Json j;
    j["name"] = SyscallEventName(ev.nr);
    j["cat"] = "syscall";
    j["ph"] = "X";
    j["ts"] = Micros(ev.entry_ns);
    j["dur"] = Latency(ev) / 1000.0;
    j["pid"] = ev.pid;
    j["tid"] = ev.tid;
    Json args;
    for (int i = 0; i < ArgCount(ev.nr); ++i) {
      int64_t v = ArgInt(ev.nr, i, ev.args[i]);
      if (ArgSigned(ev.nr, i))
        args[ArgName(ev.nr, i)] = v;
      else
        args[ArgName(ev.nr, i)] = fmt::format("{:#x}", static_cast<uint64_t>(v));
    }
    if (ev.flags & kEventNoExit)
      args["ret"] = nullptr;
    else
      args["ret"] = ev.ret;
    args["errno"] = Errno(ev);
    args["bytes"] = CapturedBytes(ev);
    args["call"] = CallText(ev);
    j["args"] = std::move(args);
    Emit(j);
    return Status::Ok();
  }

  Status Process(const ProcessEvent& ev) override {
    Json j;
    j["name"] = ev.kind == ProcessEventKind::kFork   ? "fork"
                : ev.kind == ProcessEventKind::kExec ? "exec"
                                                     : "exit";
    j["cat"] = "process";
    j["ph"] = "i";
    j["s"] = "t";
    j["ts"] = Micros(ev.time_ns);
    j["pid"] = ev.pid;
    j["tid"] = ev.tid;
    Json args;
    if (ev.kind == ProcessEventKind::kFork) {
      args["parent_pid"] = ev.parent_pid;
      args["thread"] = ev.is_thread;
    } else if (ev.kind == ProcessEventKind::kExec) {
      args["path"] = ev.path;
    } else {
      args["status"] = ev.exit_status;
    }
    j["args"] = std::move(args);
    Emit(j);
    return Status::Ok();
  }

  Status Finish() override {
    static constexpr std::string_view kTail = "\n]}\n";
    fwrite(kTail.data(), 1, kTail.size(), out_);
    return Status::Ok();
  }

 private:
  static std::string Dump(const Json& j) {
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }

  double Micros(uint64_t ns) const {
    return ns >= start_ ? (ns - start_) / 1000.0 : -((start_ - ns) / 1000.0);
  }

  void Emit(const Json& j) {
    line_.clear();
    if (!first_) line_ += ",\n";
    first_ = false;
    line_ += Dump(j);
    fwrite(line_.data(), 1, line_.size(), out_);
  }

  void Meta(const char* what, int32_t pid, int32_t tid, std::string_view name) {
    Json j;
    j["name"] = what;
    j["ph"] = "M";
    j["pid"] = pid;
    j["tid"] = tid;
    j["args"]["name"] = std::string(name);
    Emit(j);
  }

  // One entry per thread: the memory is bounded by the threads, not the events.
  void Names(int32_t pid, int32_t tid, std::string_view comm) {
    std::string& known = threads_[tid];
    if (known == comm) return;
    known.assign(comm);
    if (pid == tid) Meta("process_name", pid, pid, comm);
    Meta("thread_name", pid, tid, comm);
  }

  FILE* out_;
  uint64_t start_;
  bool first_ = true;
  std::string line_;
  std::unordered_map<int32_t, std::string> threads_;
};

}  // namespace

std::unique_ptr<Exporter> MakeChromeExporter(FILE* out, const RecordingInfo& info,
                                             const ExportOptions& options) {
  return std::make_unique<ChromeExporter>(out, info);
}

}  // namespace fay::trace
