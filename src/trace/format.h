// The framing of a .fay file: preamble, chunk headers, trailer, and the content hash of blobs.
// docs/FORMAT.md is the normative description; the constants here are its byte layouts.
//
//   preamble (16) | header chunk | { blob chunk | events chunk }* | [end state chunk]
//   | footer chunk | trailer (24)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fay::trace {

// Major changes what existing bytes mean: a reader refuses a major newer than its own.
// Minor only adds (chunk types, record kinds, header/footer tags, fields at the end of a
// record): a reader skips what it does not know.
inline constexpr uint16_t kFormatMajor = 1;
// Minor 4 added the end state chunk (trace/end_state.h); minor 6 the signal record.
inline constexpr uint16_t kFormatMinor = 7;

// PNG-style: the high byte catches 7-bit transfers, CR LF / ^Z / LF catch text-mode mangling.
inline constexpr char kFileMagic[8] = {'\x89', 'F', 'A', 'Y', '\r', '\n', '\x1a', '\n'};
inline constexpr size_t kPreambleSize = 16;  // magic, u16 major, u16 minor, u32 flags (0)

inline constexpr char kChunkMagic[4] = {'F', 'A', 'Y', 'C'};
inline constexpr size_t kChunkHeaderSize = 32;

inline constexpr char kTrailerMagic[8] = {'F', 'A', 'Y', 'T', 'R', 'A', 'I', 'L'};
inline constexpr size_t kTrailerSize = 24;

// kEndState [minor 4]: at most one, right before the footer, which does not index it.
enum class ChunkType : uint8_t { kHeader = 1, kBlobs = 2, kEvents = 3, kFooter = 4, kEndState = 5 };
enum class Codec : uint8_t { kNone = 0, kZstd = 1 };

// An events chunk belongs to one of at most this many streams (minor 3; minor 2 files have one,
// stream 0). A writer with several encoding threads gives each a stream; a thread's events are
// all in one stream, in order. Sequential readers merge the streams by time.
inline constexpr uint16_t kMaxStreams = 256;

// Record kinds inside an events chunk.
enum class RecordKind : uint8_t { kSyscall = 1, kProcess = 2, kLoss = 3, kSignal = 4 };

// Buffers of at most this many bytes are stored inside the event record rather than in the blob
// store: a 16-byte hash reference would cost as much as the bytes.
inline constexpr size_t kInlineMax = 32;

std::string_view ChunkTypeName(ChunkType t);

struct ChunkHeader {
  ChunkType type = ChunkType::kEvents;
  Codec codec = Codec::kZstd;
  uint16_t flags = 0;          // events chunk [minor 3]: its stream (see kMaxStreams)
  uint32_t seq = 0;            // 0 for the header chunk, +1 per chunk
  uint32_t stored_length = 0;  // payload bytes following the chunk header
  uint32_t raw_length = 0;     // payload bytes after decompression
  uint32_t count = 0;          // records, blobs, header tags, or end state entries
  uint32_t payload_crc = 0;    // CRC32C of the stored payload
};

void EncodeChunkHeader(const ChunkHeader& h, uint8_t out[kChunkHeaderSize]);

enum class HeaderCheck { kOk, kBadMagic, kBadCrc };
HeaderCheck DecodeChunkHeader(const uint8_t in[kChunkHeaderSize], ChunkHeader* h);

struct Trailer {
  uint64_t footer_offset = 0;  // file offset of the footer chunk's header
  uint32_t chunk_count = 0;    // chunks in the file, header and footer included
};
void EncodeTrailer(const Trailer& t, uint8_t out[kTrailerSize]);
bool DecodeTrailer(const uint8_t in[kTrailerSize], Trailer* t);

// XXH3-128 of a blob's bytes; stored as lo then hi, each little-endian.
struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const Hash128&) const = default;
};
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 31)); }
};
Hash128 HashBlob(const void* data, size_t n);
std::string HashHex(const Hash128& h);  // hi then lo, 32 hex digits, as xxhsum prints it

// "'FAYC'" for printable bytes, "'F' 0x00 ..." otherwise: what a corrupt-file message shows.
std::string DescribeBytes(const uint8_t* p, size_t n);

}  // namespace fay::trace
