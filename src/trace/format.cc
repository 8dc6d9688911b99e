#include "trace/format.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <cstring>

#include "trace/bytes.h"
#include "trace/crc32c.h"

namespace fay::trace {

std::string_view ChunkTypeName(ChunkType t) {
  switch (t) {
    case ChunkType::kHeader:
      return "header";
    case ChunkType::kBlobs:
      return "blobs";
    case ChunkType::kEvents:
      return "events";
    case ChunkType::kFooter:
      return "footer";
    case ChunkType::kEndState:
      return "end state";
  }
  return "unknown";
}

void EncodeChunkHeader(const ChunkHeader& h, uint8_t out[kChunkHeaderSize]) {
  std::memcpy(out, kChunkMagic, 4);
  out[4] = static_cast<uint8_t>(h.type);
  out[5] = static_cast<uint8_t>(h.codec);
  out[6] = static_cast<uint8_t>(h.flags);
  out[7] = static_cast<uint8_t>(h.flags >> 8);
  StoreU32(out + 8, h.seq);
  StoreU32(out + 12, h.stored_length);
  StoreU32(out + 16, h.raw_length);
  StoreU32(out + 20, h.count);
  StoreU32(out + 24, h.payload_crc);
  StoreU32(out + 28, Crc32c(out, 28));
}

HeaderCheck DecodeChunkHeader(const uint8_t in[kChunkHeaderSize], ChunkHeader* h) {
  if (std::memcmp(in, kChunkMagic, 4) != 0) return HeaderCheck::kBadMagic;
  if (LoadU32(in + 28) != Crc32c(in, 28)) return HeaderCheck::kBadCrc;
  h->type = static_cast<ChunkType>(in[4]);
  h->codec = static_cast<Codec>(in[5]);
  h->flags = static_cast<uint16_t>(in[6] | in[7] << 8);
  h->seq = LoadU32(in + 8);
  h->stored_length = LoadU32(in + 12);
  h->raw_length = LoadU32(in + 16);
  h->count = LoadU32(in + 20);
  h->payload_crc = LoadU32(in + 24);
  return HeaderCheck::kOk;
}

void EncodeTrailer(const Trailer& t, uint8_t out[kTrailerSize]) {
  std::memcpy(out, kTrailerMagic, 8);
  StoreU64(out + 8, t.footer_offset);
  StoreU32(out + 16, t.chunk_count);
  StoreU32(out + 20, Crc32c(out, 20));
}

bool DecodeTrailer(const uint8_t in[kTrailerSize], Trailer* t) {
  if (std::memcmp(in, kTrailerMagic, 8) != 0) return false;
  if (LoadU32(in + 20) != Crc32c(in, 20)) return false;
  t->footer_offset = LoadU64(in + 8);
  t->chunk_count = LoadU32(in + 16);
  return true;
}

Hash128 HashBlobAvx2(const void* data, size_t n);  // blob_hash_avx2.cc

Hash128 HashBlob(const void* data, size_t n) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return HashBlobAvx2(data, n);
#endif
  XXH128_hash_t h = XXH3_128bits(data, n);
  return Hash128{h.low64, h.high64};
}

std::string HashHex(const Hash128& h) {
  return fmt::format("{:016x}{:016x}", h.hi, h.lo);
}

std::string DescribeBytes(const uint8_t* p, size_t n) {
  bool printable = true;
  for (size_t i = 0; i < n; ++i) printable &= p[i] >= 0x20 && p[i] < 0x7F;
  if (printable) return "'" + std::string(reinterpret_cast<const char*>(p), n) + "'";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}{:02x}", i ? " " : "", p[i]);
  return s;
}

}  // namespace fay::trace
