#include "trace/file_sink.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/thread_name.h"

namespace fay::trace {

void FileSink::FreeDeleter::operator()(uint8_t* p) const {
  std::free(p);
}

FileSink::Buffer FileSink::Allocate() {
  void* p = nullptr;
  // Twice a segment: a segment fills while up to one more sits staged.
  if (posix_memalign(&p, kBlock, 2 * kSegment) != 0) return nullptr;
  return Buffer(static_cast<uint8_t*>(p));
}

FileSink::FileSink(OwnedFd fd, std::string what) : fd_(std::move(fd)), what_(std::move(what)) {
  fill_ = Allocate();
  flight_ = Allocate();
  if (!fill_ || !flight_) {
    broken_ = true;
    io_error_ = Error(Code::kInternal, what_ + ": cannot allocate the write buffers");
    return;
  }
  direct_ = SetDirect(true);
  io_ = std::thread([this, direct = direct_] {
    NameThisThread("fay-writer");
    // A direct write leaves the disk idle from its completion until this thread runs again to
    // hand over the next segment, and on a busy machine (a recorded program and its consumer
    // on every CPU) that wait was the disk's longest: W2 to ext4 took 536 against 588 ms
    // (medians of 9 interleaved runs) at real-time priority. The thread only waits on the
    // device, so it takes little CPU from anyone; plain writes copy into the page cache and
    // keep the normal priority. Refused (no CAP_SYS_NICE), it runs as before.
    bool rt = false;
    if (direct) {
      sched_param param{};
      param.sched_priority = 1;
      rt = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
    }
    IoLoop(rt);
  });
}

FileSink::~FileSink() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (io_.joinable()) io_.join();
}

bool FileSink::SetDirect(bool on) {
  int flags = fcntl(fd_.get(), F_GETFL);
  if (flags < 0) return false;
  flags = on ? (flags | O_DIRECT) : (flags & ~O_DIRECT);
  return fcntl(fd_.get(), F_SETFL, flags) == 0;
}

Status FileSink::WriteOut(const uint8_t* data, size_t n, uint64_t at) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd_.get(), data + done, n - done, static_cast<off_t>(at + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct_) {
      // The file system took the flag but not the write: plain writes from here on.
      direct_ = false;
      SetDirect(false);
      continue;
    }
    if (w < 0) return ErrnoError(what_);
    if (w == 0) return ErrnoError(what_, ENOSPC);
    done += static_cast<size_t>(w);
    durable_.store(std::max(durable(), at + done), std::memory_order_release);
    // A short direct write leaves an unaligned remainder: finish it with plain writes.
    if (done % kBlock != 0 && direct_) {
      direct_ = false;
      SetDirect(false);
    }
  }
  return Status::Ok();
}

void FileSink::IoLoop(bool rt) {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return busy_ || stop_; });
    if (!busy_) return;
    lk.unlock();
    Status st = WriteOut(flight_.get(), flight_len_, flight_at_);
    if (rt && !direct_) {  // fell back to plain writes: once, to normal priority
      sched_param normal{};
      (void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
      rt = false;
    }
    lk.lock();
    if (!st.ok() && io_error_.ok()) io_error_ = st;
    busy_ = false;
    cv_.notify_all();
  }
}

Status FileSink::WaitIdle() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_; });
  return io_error_;
}

Status FileSink::HandOff(size_t n) {
  FAY_RETURN_IF_ERROR(WaitIdle());
  {
    std::lock_guard lk(mu_);
    std::swap(fill_, flight_);
    flight_len_ = n;
    flight_at_ = base_;
    busy_ = true;
  }
  cv_.notify_all();
  // The bytes past the handed-off part start the new buffer (the I/O thread reads only [0, n)).
  std::memcpy(fill_.get(), flight_.get() + n, len_ - n);
  len_ -= n;
  base_ += n;
  return Status::Ok();
}

Status FileSink::Append(const void* data, size_t n) {
  if (broken_) return io_error_;
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    size_t take = std::min(n, 2 * kSegment - len_);
    std::memcpy(fill_.get() + len_, p, take);
    len_ += take;
    p += take;
    n -= take;
    if (len_ >= segment_) {
      FAY_RETURN_IF_ERROR(HandOff(len_ / segment_ * segment_));
      segment_ = std::min(2 * segment_, kSegment);
    }
  }
  return Status::Ok();
}

Status FileSink::WriteTail() {
  size_t whole = len_ / kBlock * kBlock;
  size_t tail = len_ - whole;
  if (tail == 0) return Status::Ok();
  bool was_direct = direct_;
  if (was_direct) SetDirect(false);
  direct_ = false;
  Status st = WriteOut(fill_.get() + whole, tail, base_ + whole);
  if (was_direct) direct_ = SetDirect(true);
  return st;
}

Status FileSink::Flush() {
  if (broken_) return io_error_;
  FAY_RETURN_IF_ERROR(WaitIdle());
  if (durable() == size()) return Status::Ok();
  // No segment is in flight: this thread may write.
  size_t whole = direct_ ? len_ / kBlock * kBlock : len_;
  if (whole > 0) {
    FAY_RETURN_IF_ERROR(WriteOut(fill_.get(), whole, base_));
    std::memmove(fill_.get(), fill_.get() + whole, len_ - whole);
    len_ -= whole;
    base_ += whole;
  }
  // The partial last block stays staged; the next direct write covers it again.
  return WriteTail();
}

bool FileSink::Truncate(uint64_t length) {
  (void)WaitIdle();
  broken_ = true;
  if (io_error_.ok()) io_error_ = Error(Code::kIo, what_ + ": the trace was cut after an error");
  length = std::min(length, durable());
  len_ = 0;
  base_ = length;
  if (::ftruncate(fd_.get(), static_cast<off_t>(length)) != 0) return false;
  durable_.store(length, std::memory_order_release);
  return true;
}

Status FileSink::Close() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (io_.joinable()) io_.join();
  return fd_.Close(what_);
}

}  // namespace fay::trace
