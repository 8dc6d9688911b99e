#include "bpf/ring_consumer.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bpf/map.h"

namespace fay::bpf {

Expected<std::unique_ptr<RingConsumer>> RingConsumer::Create(int map_fd, uint64_t size) {
  if (size == 0 || (size & (size - 1)) != 0)
    return Error(Code::kInvalidArgument, "a BPF ring buffer's size must be a power of two");
  auto r = std::make_unique<RingConsumer>(Key(), size);
  r->page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* cons = mmap(nullptr, r->page_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (cons == MAP_FAILED) return BpfError("cannot map the BPF ring buffer", errno);
  r->consumer_page_ = cons;
  // The kernel would map the data twice in a row, so that a record that wraps reads as one
  // piece. Once is enough: Drain copies the few records that wrap, and mapping (and unmapping)
  // each page costs time at start and end (1.2 ms each way for 32 MiB twice).
  void* prod =
      mmap(nullptr, r->page_ + size, PROT_READ, MAP_SHARED, map_fd, static_cast<off_t>(r->page_));
  if (prod == MAP_FAILED) return BpfError("cannot map the BPF ring buffer", errno);
  r->producer_area_ = prod;
  r->data_ = static_cast<const uint8_t*>(prod) + r->page_;
  r->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  r->event_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!r->epoll_ || !r->event_) return BpfError("cannot set up the ring buffer's wakeups", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = 0;
  if (epoll_ctl(r->epoll_.get(), EPOLL_CTL_ADD, map_fd, &ev) != 0)
    return BpfError("cannot wait on the BPF ring buffer", errno);
  ev.data.u32 = 1;
  if (epoll_ctl(r->epoll_.get(), EPOLL_CTL_ADD, r->event_.get(), &ev) != 0)
    return BpfError("cannot set up the ring buffer's wakeups", errno);
  return r;
}

RingConsumer::~RingConsumer() {
  if (consumer_page_) munmap(consumer_page_, page_);
  if (producer_area_) munmap(producer_area_, page_ + size_);
}

uint64_t RingConsumer::Pending() const {
  uint64_t c = __atomic_load_n(static_cast<const uint64_t*>(consumer_page_), __ATOMIC_RELAXED);
  uint64_t p = __atomic_load_n(static_cast<const uint64_t*>(producer_area_), __ATOMIC_ACQUIRE);
  return p - c;
}

const uint8_t* RingConsumer::Unwrap(uint64_t offset, size_t len) {
  wrapped_.resize(len);
  size_t first = static_cast<size_t>(size_ - offset);
  std::memcpy(wrapped_.data(), data_ + offset, first);
  std::memcpy(wrapped_.data() + first, data_, len - first);
  return wrapped_.data();
}

void RingConsumer::Wait(int timeout_ms) {
  epoll_event evs[2];
  int n = epoll_wait(epoll_.get(), evs, 2, timeout_ms);
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.u32 == 1) {
      uint64_t v;
      (void)!read(event_.get(), &v, sizeof v);
    }
  }
}

void RingConsumer::Wake() {
  uint64_t one = 1;
  (void)!write(event_.get(), &one, sizeof one);
}

}  // namespace fay::bpf
