// The header chunk's payload: RecordingInfo as tagged fields (tag, length, value), so later
// minors can add fields that older readers skip.
#pragma once

#include <string>

#include "common/status.h"
#include "schema/syscall_event.h"
#include "trace/bytes.h"

namespace fay::trace {

// Header field tags (docs/FORMAT.md, "Header chunk"). Never renumber; only add.
enum HeaderTag : uint32_t {
  kTagHost = 1,
  kTagKernel = 2,
  kTagArch = 3,
  kTagAnchorMonotonic = 4,
  kTagAnchorRealtime = 5,
  kTagSyscallTableVersion = 6,
  kTagArgv = 7,  // repeated, in order
  kTagEnv = 8,   // repeated, in order
  kTagCwd = 9,
  kTagRootPid = 10,
  kTagBackend = 11,
  kTagMaxBuffer = 12,
  kTagSyscallFilter = 13,
  kTagWriter = 14,  // the program that wrote the file, e.g. "fay 0.1.0"; informational
  // Minor 7: a flight recorder's dump (RecordingInfo::flight_*).
  kTagFlightReason = 15,
  kTagFlightDump = 16,
  kTagFlightRingBytes = 17,
  kTagFlightFrom = 18,
  kTagFlightTo = 19,
  kTagFlightEvicted = 20,
};

// Returns the payload; *fields receives the number of tagged fields (the chunk's count).
Bytes EncodeHeader(const RecordingInfo& info, const std::string& writer, uint32_t* fields);

// Unknown tags are skipped. The error message names the byte position inside the payload.
Status DecodeHeader(const uint8_t* data, size_t n, RecordingInfo* info, std::string* writer);

}  // namespace fay::trace
