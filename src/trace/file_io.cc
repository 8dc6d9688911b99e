#include "trace/file_io.h"

#include <unistd.h>

#include <cerrno>

namespace fay::trace {

Status WriteAll(int fd, const void* data, size_t n, const std::string& what) {
  return PwriteAll(fd, UINT64_MAX, data, n, what);
}

// UINT64_MAX: at the file position (write), for WriteAll.
Status PwriteAll(int fd, uint64_t offset, const void* data, size_t n, const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w =
        offset == UINT64_MAX ? ::write(fd, p, n) : ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what);
    }
    if (w == 0) return ErrnoError(what, ENOSPC);
    p += w;
    n -= static_cast<size_t>(w);
    if (offset != UINT64_MAX) offset += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

Status ReadAt(int fd, uint64_t offset, void* data, size_t n, size_t* got, const std::string& what) {
  auto* p = static_cast<uint8_t*>(data);
  *got = 0;
  while (*got < n) {
    ssize_t r = ::pread(fd, p + *got, n - *got, static_cast<off_t>(offset + *got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what);
    }
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace fay::trace
