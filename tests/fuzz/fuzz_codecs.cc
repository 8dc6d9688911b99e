// The chunk payload decoders on raw bytes, without the chunk framing or CRC in front of them:
// the first byte picks the decoder, the next four the record count, the rest is the payload.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "trace/event_codec.h"
#include "trace/footer.h"
#include "trace/format.h"
#include "trace/header_codec.h"

namespace ft = fay::trace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  uint8_t which = data[0] % 5;
  uint32_t count;
  std::memcpy(&count, data + 1, sizeof(count));
  const uint8_t* p = data + 5;
  size_t n = size - 5;
  switch (which) {
    case 0: {
      std::vector<ft::BlobEntry> entries;
      fay::Status st = ft::DecodeBlobs(p, n, count, &entries);
      // A decoded entry must lie inside the payload: the reader copies from it unchecked.
      if (st.ok())
        for (const ft::BlobEntry& e : entries)
          if (uint64_t{e.offset} + e.size > n) __builtin_trap();
      break;
    }
    case 1:
    case 2: {
      ft::DecodeSinks sinks;
      uint64_t sum = 0;
      sinks.want_syscall = [&](const fay::SyscallEvent& ev) { return (ev.nr & 1) == 0; };
      sinks.syscall = [&](const fay::SyscallEvent& ev) { sum += ev.buffers.size(); };
      sinks.process = [&](const fay::ProcessEvent& ev) { sum += ev.time_ns; };
      sinks.loss = [&](const ft::LossRecord& l) { sum += l.count; };
      // Half the time blobs resolve (to bytes of the claimed size, capped), half they fail.
      bool resolve = which == 1;
      sinks.blob = [&](const ft::Hash128&, uint64_t sz, std::vector<uint8_t>* out) {
        if (!resolve) return fay::Error(fay::Code::kIo, "no blob");
        out->assign(static_cast<size_t>(sz < 4096 ? sz : 4096), 0x5a);
        return fay::Status();
      };
      (void)ft::DecodeEvents(p, n, count, sinks);
      break;
    }
    case 3: {
      ft::Footer f;
      (void)ft::DecodeFooter(p, n, &f);
      break;
    }
    case 4: {
      fay::RecordingInfo info;
      std::string writer;
      (void)ft::DecodeHeader(p, n, &info, &writer);
      if (n >= ft::kChunkHeaderSize) {
        ft::ChunkHeader h;
        (void)ft::DecodeChunkHeader(p, &h);
      }
      break;
    }
  }
  return 0;
}
