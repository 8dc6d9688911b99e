#include "trace/header_codec.h"

#include <fmt/core.h>

namespace fay::trace {
namespace {

struct TagWriter {
  Bytes out;
  uint32_t fields = 0;

  void Str(uint32_t tag, const std::string& s) {
    PutVarint(out, tag);
    PutString(out, s);
    ++fields;
  }
  void U32(uint32_t tag, uint32_t v) {
    PutVarint(out, tag);
    PutVarint(out, 4);
    PutU32(out, v);
    ++fields;
  }
  void U64(uint32_t tag, uint64_t v) {
    PutVarint(out, tag);
    PutVarint(out, 8);
    PutU64(out, v);
    ++fields;
  }
};

}  // namespace

Bytes EncodeHeader(const RecordingInfo& info, const std::string& writer, uint32_t* fields) {
  TagWriter w;
  w.Str(kTagWriter, writer);
  w.Str(kTagHost, info.host);
  w.Str(kTagKernel, info.kernel);
  w.Str(kTagArch, info.arch);
  w.U64(kTagAnchorMonotonic, info.anchor_monotonic_ns);
  w.U64(kTagAnchorRealtime, info.anchor_realtime_ns);
  w.U32(kTagSyscallTableVersion, info.syscall_table_version);
  for (const auto& a : info.argv) w.Str(kTagArgv, a);
  for (const auto& e : info.env) w.Str(kTagEnv, e);
  w.Str(kTagCwd, info.cwd);
  w.U32(kTagRootPid, static_cast<uint32_t>(info.root_pid));
  w.Str(kTagBackend, info.backend);
  w.U64(kTagMaxBuffer, info.max_buffer);
  w.Str(kTagSyscallFilter, info.syscall_filter);
  if (info.is_flight_dump()) {
    w.Str(kTagFlightReason, info.flight_reason);
    w.U32(kTagFlightDump, info.flight_dump);
    w.U64(kTagFlightRingBytes, info.flight_ring_bytes);
    w.U64(kTagFlightFrom, info.flight_from_ns);
    w.U64(kTagFlightTo, info.flight_to_ns);
    w.U64(kTagFlightEvicted, info.flight_evicted_syscalls);
  }
  *fields = w.fields;
  return std::move(w.out);
}

Status DecodeHeader(const uint8_t* data, size_t n, RecordingInfo* info, std::string* writer) {
  *info = RecordingInfo{};
  ByteReader r(data, n);
  while (!r.empty()) {
    size_t at = r.pos();
    uint64_t tag, len;
    const uint8_t* v;
    if (!r.Varint(&tag) || !r.Varint(&len) || len > r.remaining() || !r.Raw(len, &v))
      return Error(Code::kIo, fmt::format("header field at payload byte {} runs past the end", at));
    auto str = [&] { return std::string(reinterpret_cast<const char*>(v), len); };
    auto fixed = [&](size_t want) -> Status {
      if (len == want) return Status::Ok();
      return Error(Code::kIo,
                   fmt::format("header field {} at payload byte {}: {} bytes, expected {}", tag, at,
                               len, want));
    };
    switch (tag) {
      case kTagHost:
        info->host = str();
        break;
      case kTagKernel:
        info->kernel = str();
        break;
      case kTagArch:
        info->arch = str();
        break;
      case kTagCwd:
        info->cwd = str();
        break;
      case kTagBackend:
        info->backend = str();
        break;
      case kTagSyscallFilter:
        info->syscall_filter = str();
        break;
      case kTagWriter:
        *writer = str();
        break;
      case kTagArgv:
        info->argv.push_back(str());
        break;
      case kTagEnv:
        info->env.push_back(str());
        break;
      case kTagAnchorMonotonic:
        FAY_RETURN_IF_ERROR(fixed(8));
        info->anchor_monotonic_ns = LoadU64(v);
        break;
      case kTagAnchorRealtime:
        FAY_RETURN_IF_ERROR(fixed(8));
        info->anchor_realtime_ns = LoadU64(v);
        break;
      case kTagMaxBuffer:
        FAY_RETURN_IF_ERROR(fixed(8));
        info->max_buffer = LoadU64(v);
        break;
      case kTagSyscallTableVersion:
        FAY_RETURN_IF_ERROR(fixed(4));
        info->syscall_table_version = LoadU32(v);
        break;
      case kTagRootPid:
        FAY_RETURN_IF_ERROR(fixed(4));
        info->root_pid = static_cast<int32_t>(LoadU32(v));
        break;
      case kTagFlightReason:
        info->flight_reason = str();
        break;
      case kTagFlightDump:
        FAY_RETURN_IF_ERROR(fixed(4));
        info->flight_dump = LoadU32(v);
        break;
      case kTagFlightRingBytes:
        FAY_RETURN_IF_ERROR(fixed(8));
        info->flight_ring_bytes = LoadU64(v);
        break;
      case kTagFlightFrom:
        FAY_RETURN_IF_ERROR(fixed(8));
        info->flight_from_ns = LoadU64(v);
        break;
      case kTagFlightTo:
        FAY_RETURN_IF_ERROR(fixed(8));
        info->flight_to_ns = LoadU64(v);
        break;
      case kTagFlightEvicted:
        FAY_RETURN_IF_ERROR(fixed(8));
        info->flight_evicted_syscalls = LoadU64(v);
        break;
      default:
        break;  // a field from a newer minor
    }
  }
  return Status::Ok();
}

}  // namespace fay::trace
