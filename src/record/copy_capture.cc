#include "record/copy_capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include <fmt/core.h>

#include "common/unique_fd.h"
#include "schema/syscall_table.h"

namespace fay::record {
namespace {

// The fd's offset now, from /proc/TID/fdinfo/FD's "pos:" line.
std::optional<uint64_t> FdPos(pid_t tid, int fd) {
  std::ifstream in(fmt::format("/proc/{}/fdinfo/{}", tid, fd));
  std::string key;
  uint64_t pos;
  if (in >> key >> pos && key == "pos:") return pos;
  return std::nullopt;
}

}  // namespace

int CopySourceArg(int nr) {
  if (nr == sysno::copy_file_range || nr == sysno::splice) return 0;
  if (nr == sysno::sendfile) return 1;
  return -1;
}

bool CaptureCopiedData(SyscallEvent& ev, pid_t tid, const CopySource* known, bool at_exit_stop,
                       uint64_t max_bytes) {
  int src_arg = CopySourceArg(ev.nr);
  if (src_arg < 0 || ev.ret <= 0) return false;
  int off_arg = ev.nr == sysno::sendfile ? 2 : 1;
  int fd = static_cast<int>(ev.args[src_arg]);
  uint64_t moved = static_cast<uint64_t>(ev.ret);
  std::optional<uint64_t> start;
  if (ev.args[off_arg] != 0) {
    for (const CapturedBuffer& b : ev.buffers)
      if (b.arg == off_arg && b.dir == BufferDir::kIn && !b.not_captured && b.View().size() == 8) {
        uint64_t v;
        std::memcpy(&v, b.View().data(), 8);
        start = v;
      }
  } else if (!known) {
    if (auto pos = FdPos(tid, fd); pos && *pos >= moved) start = *pos - moved;
  } else {
    start = known->offset;
  }
  if (!start) return false;
  // After the call (eBPF) the descriptor may be closed or another file's already: only the
  // path the earlier calls opened is read then.
  if (known == nullptr && !at_exit_stop) return false;
  // A new open of the same file, so the program's own offset is not moved. After the call the
  // fd may be closed or another file's already: the path the earlier calls opened is read.
  std::string from = known ? known->path : fmt::format("/proc/{}/fd/{}", tid, fd);
  // A regular file only, looked at before it is opened: opening a device can act on it.
  struct stat before;
  if (::stat(from.c_str(), &before) != 0 || !S_ISREG(before.st_mode)) return false;
  // O_NOATIME: the read must not move the file's access time, which the program may look at
  // (the owner or CAP_FOWNER may ask; without it, the program's own copy set it already).
  int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  UniqueFd src(::open(from.c_str(), flags | O_NOATIME));
  if (src.get() < 0 && errno == EPERM) src.reset(::open(from.c_str(), flags));
  struct stat st;
  if (src.get() < 0 || ::fstat(src.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  CapturedBuffer b;
  b.arg = static_cast<uint8_t>(src_arg);
  b.dir = BufferDir::kOut;
  b.length = moved;
  // A copy moves up to 2 GiB a call: the recorder holds at most kMaxCopyCapture of it (the
  // rest is marked cut, and the end-state check reports what the replay then misses).
  uint64_t cap = max_bytes ? std::min(max_bytes, kMaxCopyCapture) : kMaxCopyCapture;
  uint64_t want = std::min(moved, cap);
  b.bytes.resize(want);
  uint64_t got = 0;
  while (got < want) {
    ssize_t n =
        ::pread(src.get(), b.bytes.data() + got, want - got, static_cast<off_t>(*start + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<uint64_t>(n);
  }
  // The file shrank since: what is left is not what moved.
  if (got < want) return false;
  b.truncated = want < moved;
  ev.buffers.push_back(std::move(b));
  return true;
}

}  // namespace fay::record
