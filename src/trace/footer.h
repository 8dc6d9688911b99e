// The footer chunk: an index of every blob and events chunk, so a reader can seek by time or
// thread and find a blob without walking the file.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "trace/bytes.h"
#include "trace/event_codec.h"

namespace fay::trace {

struct EventChunkIndex {
  uint64_t offset = 0;  // of the chunk header
  uint32_t seq = 0;
  uint32_t stored_length = 0;
  uint32_t raw_length = 0;
  uint64_t first_ns = 0;  // earliest entry/time of any record in the chunk
  uint64_t last_ns = 0;   // latest entry, exit or time of any record in the chunk
  uint32_t records = 0;
  std::vector<int32_t> tids;  // tids of the chunk's syscall and process records, ascending
  uint16_t stream = 0;        // minor 3: see kMaxStreams
};

struct BlobChunkIndex {
  uint64_t offset = 0;
  uint32_t seq = 0;
  uint32_t stored_length = 0;
  uint32_t raw_length = 0;
  std::vector<BlobEntry> blobs;
};

struct Footer {
  std::vector<EventChunkIndex> events;  // in file order
  std::vector<BlobChunkIndex> blobs;    // in file order
};

Bytes EncodeFooter(const Footer& f);
Status DecodeFooter(const uint8_t* data, size_t n, Footer* f);

}  // namespace fay::trace
