// UniqueFd: sole owner of a file descriptor. Every kernel object fay creates (maps, programs,
// perf events, links) and every file it writes lives behind one, so closing fay -- even by
// kill -9 -- releases it all.
#pragma once

#include <unistd.h>

#include <string>
#include <utility>

#include "common/status.h"

namespace fay {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }

  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0 && fd_ != fd) ::close(fd_);
    fd_ = fd;
  }
  // close(2) with its error reported: a full disk or NFS can surface only here.
  Status Close(const std::string& what) {
    int fd = release();
    if (fd >= 0 && ::close(fd) != 0) return ErrnoError(what);
    return Status::Ok();
  }

 private:
  int fd_ = -1;
};

}  // namespace fay
