// CTF 1.8 (Common Trace Format): a directory holding `metadata`, the TSDL description of the
// layout, and `stream`, the binary events in packets. babeltrace2 and Trace Compass read it.
//
// Layout (all little-endian, byte-aligned):
//   packet.header  { uint32 magic = 0xC1FC1FC1; uint32 stream_id = 0 }
//   packet.context { timestamp_begin, timestamp_end: clock; content_size, packet_size: bits;
//                    events_discarded }
//   event.header   { uint32 id = the syscall number; uint64 timestamp: clock }
//   event payload  { pid, tid, ppid, uid, comm, args { one field per argument, named as in the
//                    syscall table }, ret, errno, latency, bytes, call (the strace-style text) }
// One event class per syscall that occurs, named as the syscall; the metadata is written last,
// once the set is known, so the stream is written as it is read (bounded memory).
//
// A CTF stream's timestamps never go back, but a recording lists calls in completion order, so
// an earlier-entered call can follow a later one. The header timestamp is therefore the entry
// time clamped to the stream's latest; the exact entry time is the `time` field.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "common/unique_fd.h"
#include "trace/export/event_fields.h"
#include "trace/export/exporter.h"
#include "trace/file_io.h"

namespace fay::trace {
namespace {

constexpr uint32_t kCtfMagic = 0xC1FC1FC1;
constexpr size_t kPacketHeaderSize = 4 + 4;
constexpr size_t kPacketContextSize = 5 * 8;
constexpr size_t kPacketTarget = 256 * 1024;  // bytes of events per packet

template <typename T>
void Put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86-64 is little-endian, as the metadata declares
  out.append(b, sizeof(T));
}

void PutString(std::string& out, std::string_view s) {
  for (char c : s) out += c ? c : ' ';  // a CTF string ends at its first NUL
  out += '\0';
}

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

class CtfExporter : public Exporter {
 public:
  // The stream has syscall events only: forks, execs and exits are left out, and said so.
  bool WritesProcesses() const override { return false; }
  CtfExporter(std::string dir, const RecordingInfo& info, OwnedFd stream)
      : dir_(std::move(dir)), info_(info), stream_(std::move(stream)) {}

  Status Syscall(const SyscallEvent& ev) override {
    uint64_t ts = std::max(ev.entry_ns, last_ts_);
    last_ts_ = ts;
    if (events_.empty()) begin_ts_ = ts;
    end_ts_ = ts;
    seen_.insert(ev.nr);
    Put<uint32_t>(events_, static_cast<uint32_t>(ev.nr));
    Put<uint64_t>(events_, ts);
    Put<uint64_t>(events_, ev.entry_ns);
    Put<int32_t>(events_, ev.pid);
    Put<int32_t>(events_, ev.tid);
    Put<int32_t>(events_, ev.ppid);
    Put<uint32_t>(events_, ev.uid);
    PutString(events_, Comm(ev));
    for (int i = 0; i < ArgCount(ev.nr); ++i) Put<int64_t>(events_, ArgInt(ev.nr, i, ev.args[i]));
    Put<int64_t>(events_, ev.ret);
    Put<int64_t>(events_, Errno(ev));
    Put<uint64_t>(events_, Latency(ev));
    Put<uint64_t>(events_, ev.CapturedBytes());
    PutString(events_, CallText(ev));
    ++count_;
    if (events_.size() >= kPacketTarget) return FlushPacket();
    return Status::Ok();
  }

  Status Finish() override {
    FAY_RETURN_IF_ERROR(FlushPacket());
    FAY_RETURN_IF_ERROR(stream_.Close(dir_ + "/stream"));
    return WriteMetadata();
  }

 private:
  Status IoError(const std::string& file) const {
    return Error(Code::kIo, fmt::format("writing {}/{}: {}", dir_, file, strerror(errno)));
  }

  Status FlushPacket() {
    if (events_.empty()) return Status::Ok();
    std::string packet;
    packet.reserve(kPacketHeaderSize + kPacketContextSize + events_.size());
    Put<uint32_t>(packet, kCtfMagic);
    Put<uint32_t>(packet, 0);  // stream id
    const uint64_t bits = (kPacketHeaderSize + kPacketContextSize + events_.size()) * 8;
    Put<uint64_t>(packet, begin_ts_);
    Put<uint64_t>(packet, end_ts_);
    Put<uint64_t>(packet, bits);  // content_size
    Put<uint64_t>(packet, bits);  // packet_size
    Put<uint64_t>(packet, 0);     // events_discarded
    packet += events_;
    events_.clear();
    const char* p = packet.data();
    size_t left = packet.size();
    while (left > 0) {
      ssize_t n = write(stream_.get(), p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return IoError("stream");
      p += n;
      left -= static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  std::string Metadata() const {
    std::string m = "/* CTF 1.8 */\n\n";
    m += R"(typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 32; align = 8; signed = true; } := int32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
typealias integer { size = 64; align = 8; signed = true; } := int64_t;
typealias integer { size = 64; align = 8; signed = false; base = 16; } := hex64_t;

trace {
	major = 1;
	minor = 8;
	byte_order = le;
	packet.header := struct {
		uint32_t magic;
		uint32_t stream_id;
	};
};

)";
    m += fmt::format(
        "env {{\n\tdomain = \"fay\";\n\ttracer_name = \"fay\";\n\thostname = \"{}\";\n"
        "\tkernel_release = \"{}\";\n\tbackend = \"{}\";\n\troot_pid = {};\n}};\n\n",
        Escape(info_.host), Escape(info_.kernel), Escape(info_.backend), info_.root_pid);
    // offset: CLOCK_REALTIME at monotonic zero, so readers print wall-clock times.
    int64_t offset = static_cast<int64_t>(info_.anchor_realtime_ns - info_.anchor_monotonic_ns);
    int64_t offset_s = offset / 1000000000, offset_ns = offset % 1000000000;
    if (offset_ns < 0) {
      offset_ns += 1000000000;
      --offset_s;
    }
    m += fmt::format(
        "clock {{\n\tname = monotonic;\n\tdescription = \"CLOCK_MONOTONIC of the recording "
        "machine\";\n\tfreq = 1000000000;\n\tprecision = 1;\n\toffset_s = {};\n\toffset = {};\n"
        "\tabsolute = false;\n}};\n\n",
        offset_s, offset_ns);
    m +=
        R"(typealias integer { size = 64; align = 8; signed = false; map = clock.monotonic.value; } := clock_t;

stream {
	id = 0;
	packet.context := struct {
		clock_t timestamp_begin;
		clock_t timestamp_end;
		uint64_t content_size;
		uint64_t packet_size;
		uint64_t events_discarded;
	};
	event.header := struct {
		uint32_t id;
		clock_t timestamp;
	};
};
)";
    for (int nr : seen_) {
      m += fmt::format("\nevent {{\n\tname = \"{}\";\n\tid = {};\n\tstream_id = 0;\n",
                       SyscallEventName(nr), static_cast<uint32_t>(nr));
      m += "\tfields := struct {\n\t\tuint64_t _time;\n\t\tint32_t _pid;\n\t\tint32_t _tid;\n"
           "\t\tint32_t _ppid;\n\t\tuint32_t _uid;\n\t\tstring _comm;\n";
      if (ArgCount(nr) > 0) {
        m += "\t\tstruct {\n";
        for (int i = 0; i < ArgCount(nr); ++i)
          m += fmt::format("\t\t\t{} _{};\n", ArgSigned(nr, i) ? "int64_t" : "hex64_t",
                           ArgName(nr, i));
        m += "\t\t} _args;\n";
      }
      m += "\t\tint64_t _ret;\n\t\tint64_t _errno;\n\t\tuint64_t _latency;\n"
           "\t\tuint64_t _bytes;\n\t\tstring _call;\n\t};\n};\n";
    }
    return m;
  }

  Status WriteMetadata() {
    std::string m = Metadata();
    std::string path = dir_ + "/metadata";
    OwnedFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) return IoError("metadata");
    const char* p = m.data();
    size_t left = m.size();
    while (left > 0) {
      ssize_t n = write(fd.get(), p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return IoError("metadata");
      p += n;
      left -= static_cast<size_t>(n);
    }
    return fd.Close(path);
  }

  std::string dir_;
  RecordingInfo info_;
  OwnedFd stream_;
  std::string events_;  // the current packet's events
  uint64_t begin_ts_ = 0, end_ts_ = 0, last_ts_ = 0;
  uint64_t count_ = 0;
  std::set<int> seen_;
};

}  // namespace

Expected<std::unique_ptr<Exporter>> MakeCtfExporter(const std::string& dir,
                                                    const RecordingInfo& info) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Error(Code::kIo, fmt::format("cannot create directory {}: {}", dir, strerror(errno)));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error(Code::kInvalidArgument, fmt::format("{} exists and is not a directory", dir));
  std::string path = dir + "/stream";
  OwnedFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return Error(Code::kIo, fmt::format("cannot create {}: {}", path, strerror(errno)));
  return std::unique_ptr<Exporter>(std::make_unique<CtfExporter>(dir, info, std::move(fd)));
}

}  // namespace fay::trace
