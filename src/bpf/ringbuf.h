// RingBufferReader: consumes records from a BPF_MAP_TYPE_RINGBUF map via libbpf.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "common/status.h"

struct ring_buffer;

namespace fay::bpf {

class RingBufferReader {
 public:
  // Return 0 to continue; a negative value stops the current Poll/Consume, which returns it
  // as an error.
  using Callback = std::function<int(const void* data, size_t size)>;

  static Expected<std::unique_ptr<RingBufferReader>> Create(int map_fd, Callback cb);

  // Only Create() can make the key: a reader must not exist without its ring.
  class Key {
    friend class RingBufferReader;
    Key() = default;
  };
  RingBufferReader(Key, Callback cb) : cb_(std::move(cb)) {}
  ~RingBufferReader();
  RingBufferReader(const RingBufferReader&) = delete;
  RingBufferReader& operator=(const RingBufferReader&) = delete;

  // Events consumed; EINTR -> 0.
  Expected<int> Poll(int timeout_ms);
  Expected<int> Consume();
  // Readable when records are pending: lets callers multiplex with other fds.
  int epoll_fd() const;

 private:
  static int Trampoline(void* ctx, void* data, size_t size);

  Callback cb_;
  ring_buffer* rb_ = nullptr;
};

}  // namespace fay::bpf
