// A BPF ring buffer read in batches, without libbpf's per-record bookkeeping: the recorder
// drains whatever is there, returns the space once per batch, and needs the ring's fill level
// to decide when to throttle the traced program. Stop() wakes a waiting consumer at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bpf/fd.h"
#include "common/status.h"

namespace fay::bpf {

class RingConsumer {
  struct Key {};

 public:
  // `size` is the ring's data size (max_entries of the map).
  static Expected<std::unique_ptr<RingConsumer>> Create(int map_fd, uint64_t size);
  RingConsumer(Key, uint64_t size) : size_(size) {}
  ~RingConsumer();
  RingConsumer(const RingConsumer&) = delete;
  RingConsumer& operator=(const RingConsumer&) = delete;

  // Bytes written by the probes and not yet consumed.
  uint64_t Pending() const;
  uint64_t size() const { return size_; }

  // Calls fn(data, len) for each committed record, in order, until the ring is empty, a record
  // is still being written, or about `max_bytes` were consumed. Returns the bytes consumed.
  template <typename Fn>
  uint64_t Drain(Fn&& fn, uint64_t max_bytes = UINT64_MAX);

  // Waits until the probes wake the reader, Wake() is called, or timeout_ms passes.
  void Wait(int timeout_ms);
  void Wake();

 private:
  static constexpr uint32_t kBusy = 1u << 31;
  static constexpr uint32_t kDiscard = 1u << 30;
  static constexpr uint64_t kHeader = 8;

  // A record whose data runs past the end of the ring (the data is mapped once), copied whole.
  const uint8_t* Unwrap(uint64_t offset, size_t len);

  uint64_t size_;
  size_t page_ = 0;
  void* consumer_page_ = nullptr;
  void* producer_area_ = nullptr;  // producer page, then the data
  const uint8_t* data_ = nullptr;
  std::vector<uint8_t> wrapped_;
  UniqueFd epoll_;
  UniqueFd event_;
};

template <typename Fn>
uint64_t RingConsumer::Drain(Fn&& fn, uint64_t max_bytes) {
  auto* cons = static_cast<uint64_t*>(consumer_page_);
  const auto* prod = static_cast<const uint64_t*>(producer_area_);
  uint64_t c = __atomic_load_n(cons, __ATOMIC_RELAXED);
  const uint64_t start = c;
  uint64_t handed_back = c;
  uint64_t p = __atomic_load_n(prod, __ATOMIC_ACQUIRE);
  while (c < p && c - start < max_bytes) {
    const uint8_t* rec = data_ + (c & (size_ - 1));
    uint32_t len = __atomic_load_n(reinterpret_cast<const uint32_t*>(rec), __ATOMIC_ACQUIRE);
    if (len & kBusy) break;
    const size_t n = len & ~(kBusy | kDiscard);
    if (!(len & kDiscard)) {
      const uint64_t at = (c + kHeader) & (size_ - 1);
      fn(at + n <= size_ ? data_ + at : Unwrap(at, n), n);
    }
    c += (kHeader + n + 7) & ~uint64_t{7};
    // Hand space back as we go, so a slow batch does not hold the whole ring.
    if (c - handed_back >= (1u << 20)) {
      __atomic_store_n(cons, c, __ATOMIC_RELEASE);
      handed_back = c;
    }
    if (c >= p) p = __atomic_load_n(prod, __ATOMIC_ACQUIRE);
  }
  __atomic_store_n(cons, c, __ATOMIC_RELEASE);
  return c - start;
}

}  // namespace fay::bpf
