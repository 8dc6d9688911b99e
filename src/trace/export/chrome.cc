// Chrome trace-event JSON (the "JSON Object Format" of the Trace Event Format document), which
// Perfetto UI and chrome://tracing open. Each recorded syscall is a complete event (ph "X") on
// its thread's track (pid, tid), with its arguments, return value and strace-style text in
// `args`. Process and thread names are metadata events (ph "M"), emitted when a thread is first
// seen and again when its name changes (exec); fork, exec and exit are thread-scoped instant
// events (ph "i"). Timestamps are microseconds from the start of the recording.
#include <fmt/format.h>

#include <unordered_map>

#include "trace/export/event_fields.h"
#include "trace/export/exporter.h"
#include "trace/export/json_writer.h"

namespace fay::trace {
namespace {

class ChromeExporter : public Exporter {
 public:
  ChromeExporter(FILE* out, const RecordingInfo& info)
      : out_(out), start_(info.anchor_monotonic_ns), root_pid_(info.root_pid) {
    // Until its exec, the recorded command is fay's child and carries fay's name: it is named
    // for the command instead, as it will be once it runs.
    if (!info.argv.empty()) {
      std::string_view a = info.argv[0];
      root_name_ =
          std::string(a.substr(a.rfind('/') == std::string_view::npos ? 0 : a.rfind('/') + 1))
              .substr(0, 15);
    }
    std::string head;
    JsonWriter j(head);
    j.BeginObject();
    j.Key("otherData").BeginObject();
    j.Key("recorder").String("fay");
    j.Key("backend").String(info.backend);
    j.Key("host").String(info.host);
    j.Key("kernel").String(info.kernel);
    j.EndObject();
    j.Key("displayTimeUnit").String("ns");
    // The object stays open: traceEvents is streamed, and Finish closes both.
    head += ",\"traceEvents\":[\n";
    fwrite(head.data(), 1, head.size(), out_);
  }

  Status Syscall(const SyscallEvent& ev) override {
    Names(ev.pid, ev.tid, Comm(ev));
    JsonWriter j(Begin());
    j.BeginObject();
    j.Key("name").String(SyscallEventName(ev.nr));
    j.Key("cat").String("syscall");
    j.Key("ph").String("X");
    j.Key("ts").Double(Micros(ev.entry_ns));
    j.Key("dur").Double(Latency(ev) / 1000.0);
    j.Key("pid").Int(ev.pid);
    j.Key("tid").Int(ev.tid);
    j.Key("args").BeginObject();
    for (int i = 0; i < ArgCount(ev.nr); ++i) {
      int64_t v = ArgInt(ev.nr, i, ev.args[i]);
      j.Key(ArgName(ev.nr, i));
      if (ArgSigned(ev.nr, i))
        j.Int(v);
      else
        j.String(fmt::format("{:#x}", static_cast<uint64_t>(v)));
    }
    j.Key("ret");
    if (ev.flags & kEventNoExit)
      j.Null();
    else
      j.Int(ev.ret);
    j.Key("errno").Int(Errno(ev));
    j.Key("bytes").Uint(ev.CapturedBytes());
    j.Key("call").String(CallText(ev));
    j.EndObject();
    j.EndObject();
    End();
    return Status::Ok();
  }

  Status Process(const ProcessEvent& ev) override {
    JsonWriter j(Begin());
    j.BeginObject();
    j.Key("name").String(ProcessKindName(ev.kind));
    j.Key("cat").String("process");
    j.Key("ph").String("i");
    j.Key("s").String("t");
    j.Key("ts").Double(Micros(ev.time_ns));
    j.Key("pid").Int(ev.pid);
    j.Key("tid").Int(ev.tid);
    j.Key("args").BeginObject();
    ProcessDetails(ev, j);
    j.EndObject();
    j.EndObject();
    End();
    return Status::Ok();
  }

  Status Finish() override {
    static constexpr std::string_view kTail = "\n]}\n";
    fwrite(kTail.data(), 1, kTail.size(), out_);
    return Status::Ok();
  }

 private:
  double Micros(uint64_t ns) const {
    return ns >= start_ ? (ns - start_) / 1000.0 : -((start_ - ns) / 1000.0);
  }

  // The line of the next event, after the separator from the previous one.
  std::string& Begin() {
    line_.clear();
    if (!first_) line_ += ",\n";
    first_ = false;
    return line_;
  }
  void End() { fwrite(line_.data(), 1, line_.size(), out_); }

  void Meta(const char* what, int32_t pid, int32_t tid, std::string_view name) {
    JsonWriter j(Begin());
    j.BeginObject();
    j.Key("name").String(what);
    j.Key("ph").String("M");
    j.Key("pid").Int(pid);
    j.Key("tid").Int(tid);
    j.Key("args").BeginObject();
    j.Key("name").String(name);
    j.EndObject();
    j.EndObject();
    End();
  }

  // One entry per thread: the memory is bounded by the threads, not the events.
  void Names(int32_t pid, int32_t tid, std::string_view comm) {
    if (pid == root_pid_ && !root_name_.empty() && comm == "fay") comm = root_name_;
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
  int32_t root_pid_ = 0;
  std::string root_name_;
};

}  // namespace

std::unique_ptr<Exporter> MakeChromeExporter(FILE* out, const RecordingInfo& info,
                                             const ExportOptions& options) {
  return std::make_unique<ChromeExporter>(out, info);
}

}  // namespace fay::trace
