// The trace writer's way to the file: an append-only byte stream written in large, block-aligned
// pieces, with O_DIRECT where the file system takes it, by a thread of its own.
//
// A recording that keeps every buffer writes as fast as the program reads (a gigabyte in a
// fraction of a second). Through the page cache, that many dirty pages make the kernel throttle
// the writer, and copying them costs as much CPU as the recording itself; direct writes of a few
// MiB cost neither. A second thread writes one segment while the next fills, so encoding and
// the disk overlap. Whole blocks go out directly; the last partial block stays staged, is
// written through the page cache only when Flush asks for everything, and is written again,
// directly, once the stream has grown past it. Where O_DIRECT is refused (tmpfs, some FUSE file
// systems) the same segments are plain writes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "trace/file_io.h"

namespace fay::trace {

class FileSink {
 public:
  static constexpr size_t kBlock = 4096;
  static constexpr size_t kSegment = 4 << 20;
  // The first segment; each next one is twice as long, up to kSegment. A small trace is then
  // mostly in the file while it is recorded, instead of all of it written when it is closed.
  static constexpr size_t kFirstSegment = 64 << 10;

  // `fd` is open for writing, at offset 0 of an empty file; `what` names it in errors.
  FileSink(OwnedFd fd, std::string what);
  ~FileSink();
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // Appends n bytes to the stream. Whole segments go to the file in the background; an error
  // writing an earlier one is returned by the next call.
  Status Append(const void* data, size_t n);
  // Everything appended so far reaches the file before this returns.
  Status Flush();
  // Bytes appended, and bytes known to be in the file.
  uint64_t size() const { return base_ + len_; }
  uint64_t durable() const { return durable_.load(std::memory_order_acquire); }
  // After a failed write: cuts the file to `length` bytes (never more than are durable) and
  // drops what is staged. Nothing may be appended afterwards.
  bool Truncate(uint64_t length);
  Status Close();

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

  static Buffer Allocate();
  // Writes n bytes (a multiple of kBlock when direct) at file offset `at`.
  Status WriteOut(const uint8_t* data, size_t n, uint64_t at);
  Status WriteTail();        // the staged bytes past the last whole block, through the page cache
  Status HandOff(size_t n);  // the first n staged bytes, to the I/O thread
  Status WaitIdle();         // until no segment is in flight; its error, if any
  void IoLoop(bool rt);      // rt: running at real-time priority (direct writes)
  bool SetDirect(bool on);

  OwnedFd fd_;
  std::string what_;
  bool direct_ = false;  // touched by one thread at a time: the I/O thread only while in flight

  // The appending thread's.
  Buffer fill_;
  size_t len_ = 0;     // staged bytes
  uint64_t base_ = 0;  // file offset of fill_[0]
  bool broken_ = false;
  size_t segment_ = kFirstSegment;  // the length that hands staged bytes to the I/O thread

  // Shared with the I/O thread.
  std::mutex mu_;
  std::condition_variable cv_;
  Buffer flight_;
  size_t flight_len_ = 0;
  uint64_t flight_at_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  Status io_error_;
  std::atomic<uint64_t> durable_{0};
  std::thread io_;
};

}  // namespace fay::trace
