#include "bpf/ringbuf.h"

#include <bpf/libbpf.h>

#include <cerrno>

#include "bpf/map.h"

namespace fay::bpf {

Expected<std::unique_ptr<RingBufferReader>> RingBufferReader::Create(int map_fd, Callback cb) {
  auto r = std::make_unique<RingBufferReader>(Key(), std::move(cb));
  r->rb_ = ring_buffer__new(map_fd, &RingBufferReader::Trampoline, r.get(), nullptr);
  if (r->rb_ == nullptr) return BpfError("cannot open the BPF ring buffer", errno);
  return r;
}

RingBufferReader::~RingBufferReader() {
  ring_buffer__free(rb_);
}

int RingBufferReader::Trampoline(void* ctx, void* data, size_t size) {
  return static_cast<RingBufferReader*>(ctx)->cb_(data, size);
}

Expected<int> RingBufferReader::Poll(int timeout_ms) {
  int n = ring_buffer__poll(rb_, timeout_ms);
  if (n == -EINTR) return 0;
  if (n < 0) return BpfError("cannot poll the BPF ring buffer", -n);
  return n;
}

Expected<int> RingBufferReader::Consume() {
  int n = ring_buffer__consume(rb_);
  if (n < 0) return BpfError("cannot read the BPF ring buffer", -n);
  return n;
}

int RingBufferReader::epoll_fd() const {
  return ring_buffer__epoll_fd(rb_);
}

}  // namespace fay::bpf
