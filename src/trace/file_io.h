// The file descriptor and whole-buffer I/O the trace writer and reader use.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace fay::trace {

class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& o) noexcept : fd_(o.release()) {}
  OwnedFd& operator=(OwnedFd&& o) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() { reset(); }

  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();
  // close(2) with its error reported: a full disk or NFS can surface only here.
  Status Close(const std::string& what);

 private:
  int fd_ = -1;
};

// Writes all n bytes (retrying short writes and EINTR); on failure *written holds how many made it.
Status WriteAll(int fd, const void* data, size_t n, const std::string& what);

// Reads exactly n bytes at offset; *got holds how many were available (less at end of file).
Status ReadAt(int fd, uint64_t offset, void* data, size_t n, size_t* got, const std::string& what);

}  // namespace fay::trace
