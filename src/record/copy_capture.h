// The data of an in-kernel copy. copy_file_range, sendfile and splice move file bytes without
// passing them through the program's memory, so no argument buffer holds them; without them a
// --prepare'd source is a hole and the replayed copy writes zeros. The recorder reads what the
// call moved from the source file itself and keeps it as an out buffer on the source fd's
// argument (FORMAT.md, "Copied data").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "schema/syscall_event.h"

namespace fay::record {

// The argument holding a copy's source fd (0, or 1 for sendfile), or -1 for any other call.
int CopySourceArg(int nr);

// Where a copy's source is, when the call is seen after it returned (the eBPF recorder): the
// source file's path and its offset before the call, as the calls before it left them.
struct CopySource {
  std::string path;
  uint64_t offset = 0;
};

// For a copy that moved bytes from a regular file: reads them and adds them to ev (at most
// max_bytes, 0 for all; a cut buffer is marked truncated). Where they were read from is the
// offset argument's value at entry, or, without one:
//   - at the call's exit stop (ptrace, `at_exit_stop`): the fd's offset less what the call
//     moved, read through /proc/TID;
//   - after it (eBPF): `known`, the path and offset the earlier calls give (without it, only
//     a copy that names its offset, from the file the calls name; never /proc/TID/fd, which
//     may be another file by then).
// At most kMaxCopyCapture bytes a call. False when nothing was added (the source is gone, not a
// regular file, or not where it was).
inline constexpr uint64_t kMaxCopyCapture = 16 << 20;
bool CaptureCopiedData(SyscallEvent& ev, pid_t tid, const CopySource* known, bool at_exit_stop,
                       uint64_t max_bytes);

}  // namespace fay::record
