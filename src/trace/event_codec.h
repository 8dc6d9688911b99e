// Records inside an events chunk: syscall, process and loss records, delta- and varint-encoded
// against state that starts fresh in every chunk, so any chunk decodes on its own.
#pragma once

#include <algorithm>

#include <array>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "schema/syscall_event.h"
#include "trace/bytes.h"
#include "trace/format.h"

namespace fay::trace {

// Events the recorder could not deliver (a full ring buffer, say): counted, never silently lost.
struct LossRecord {
  uint64_t time_ns = 0;
  uint64_t count = 0;
  int32_t cpu = -1;  // where the events were lost; -1: not known (or not per CPU)
};

// The delta state shared by encoder and decoder; both reset it at the start of each chunk.
struct ChunkCodecState {
  struct ThreadContext {
    int32_t pid = 0;
    int32_t ppid = 0;
    uint32_t uid = 0;
    std::array<char, 16> comm{};
  };
  uint64_t prev_time = 0;
  int32_t prev_tid = 0;
  std::unordered_map<int32_t, ThreadContext> threads;
  std::unordered_map<int32_t, std::array<uint64_t, 6>> args;  // by syscall number

  // The thread of the previous syscall record and its entry in `threads` (most records come
  // from the thread of the one before: one hash lookup fewer each).
  int32_t last_ctx_tid = 0;
  ThreadContext* last_ctx = nullptr;

  void Reset() {
    prev_time = 0;
    prev_tid = 0;
    last_ctx = nullptr;
    threads.clear();
    args.clear();
    std::fill(flat_args_.begin(), flat_args_.end(), std::array<uint64_t, 6>{});
  }
  // The previous arguments of syscall nr in this chunk (zeros at first). Every event asks, so
  // the numbers real syscalls use are an array, not a hash lookup.
  std::array<uint64_t, 6>& PrevArgs(int32_t nr) {
    if (nr >= 0 && nr < kFlatArgs) {
      if (flat_args_.empty()) flat_args_.resize(kFlatArgs);
      return flat_args_[static_cast<size_t>(nr)];
    }
    return args[nr];
  }

 private:
  static constexpr int32_t kFlatArgs = 512;
  std::vector<std::array<uint64_t, 6>> flat_args_;
};

class EventEncoder {
 public:
  // Receives each buffer payload stored out of line (longer than kInlineMax bytes).
  using BlobSink = std::function<void(const Hash128&, const std::vector<uint8_t>&)>;

  void Reset() { state_.Reset(); }
  void Syscall(const SyscallEvent& ev, const BlobSink& blobs, Bytes* out);
  void Process(const ProcessEvent& ev, Bytes* out);
  void Loss(const LossRecord& loss, Bytes* out);

 private:
  ChunkCodecState state_;
  Bytes body_;
};

struct DecodeSinks {
  // Asked before a syscall's blobs are fetched (buffers hold no bytes yet); false skips it.
  std::function<bool(const SyscallEvent&)> want_syscall;
  // Handed the decoder's own scratch event, which it rebuilds field by field for the next
  // record: a sink may move the buffers out instead of copying them.
  std::function<void(SyscallEvent&)> syscall;
  std::function<void(const ProcessEvent&)> process;
  std::function<void(const LossRecord&)> loss;
  // Fills *bytes with the blob's content, or fails when the blob is unknown or unreadable.
  std::function<Status(const Hash128&, uint64_t size, std::vector<uint8_t>* bytes)> blob;
  // When set, used instead of `blob` and `shared_blob`: the buffer is left unread, as a
  // CapturedBuffer::stored reference, once this has checked the reference.
  std::function<Status(const Hash128&, uint64_t size)> blob_ref;
  // With blob_ref: which buffers to leave unread.
  std::function<bool(const SyscallEvent&, const CapturedBuffer&)> leave_unread;
  // When set, used instead of `blob`: the buffer points to one shared copy of the blob.
  std::function<Status(const Hash128&, uint64_t size, CapturedBuffer::SharedBytes* shared)>
      shared_blob;
};

// Decodes a whole raw (decompressed) events payload holding `count` records. Errors name the
// record index and its byte position in the payload; records before it have been delivered.
Status DecodeEvents(const uint8_t* data, size_t n, uint32_t count, const DecodeSinks& sinks);

// One blob chunk payload entry: where a blob's bytes sit inside the raw payload.
struct BlobEntry {
  Hash128 hash;
  uint32_t offset = 0;  // of the first content byte in the raw payload
  uint32_t size = 0;
};
// Blob chunk payload: for each blob, 16-byte hash, varint size, bytes.
void EncodeBlob(const Hash128& h, const std::vector<uint8_t>& bytes, Bytes* out);
Status DecodeBlobs(const uint8_t* data, size_t n, uint32_t count, std::vector<BlobEntry>* out);

}  // namespace fay::trace
