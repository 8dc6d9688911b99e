// Little-endian fixed-width fields, LEB128 varints and zigzag: the only primitives the .fay
// encoding is built from (docs/FORMAT.md, "Primitives").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace fay::trace {

using Bytes = std::vector<uint8_t>;

inline uint64_t ZigzagEncode(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t ZigzagDecode(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline void PutU8(Bytes& out, uint8_t v) {
  out.push_back(v);
}
inline void PutU16(Bytes& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void PutU32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void PutU64(Bytes& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
// Writes v as a varint at p, which has room for 10 bytes; returns the byte after it.
inline uint8_t* PutVarintAt(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}
inline uint8_t* PutZigzagAt(uint8_t* p, int64_t v) {
  return PutVarintAt(p, ZigzagEncode(v));
}
inline void PutVarint(Bytes& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}
inline void PutZigzag(Bytes& out, int64_t v) {
  PutVarint(out, ZigzagEncode(v));
}
inline void PutRaw(Bytes& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
// A varint length followed by the bytes.
inline void PutString(Bytes& out, std::string_view s) {
  PutVarint(out, s.size());
  PutRaw(out, s.data(), s.size());
}

inline uint32_t LoadU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
inline uint64_t LoadU64(const uint8_t* p) {
  return uint64_t{LoadU32(p)} | uint64_t{LoadU32(p + 4)} << 32;
}
inline void StoreU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void StoreU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Bounds-checked cursor over an in-memory payload. Every getter returns false, and leaves the
// cursor failed, when the bytes run out or a varint is longer than 10 bytes.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t n) : begin_(data), p_(data), end_(data + n) {}

  size_t pos() const { return static_cast<size_t>(p_ - begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool empty() const { return p_ == end_; }

  bool U8(uint8_t* v) {
    if (p_ == end_) return false;
    *v = *p_++;
    return true;
  }
  bool U32(uint32_t* v) {
    if (remaining() < 4) return false;
    *v = LoadU32(p_);
    p_ += 4;
    return true;
  }
  bool U64(uint64_t* v) {
    if (remaining() < 8) return false;
    *v = LoadU64(p_);
    p_ += 8;
    return true;
  }
  bool Varint(uint64_t* v) {
    // One byte is the common case (small deltas): decoding speed is query speed offline.
    if (p_ != end_ && *p_ < 0x80) {
      *v = *p_++;
      return true;
    }
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) return false;
      uint8_t b = *p_++;
      if (shift == 63 && b > 1) return false;  // would overflow 64 bits
      r |= uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  bool Zigzag(int64_t* v) {
    uint64_t u;
    if (!Varint(&u)) return false;
    *v = ZigzagDecode(u);
    return true;
  }
  bool Raw(size_t n, const uint8_t** out) {
    if (remaining() < n) return false;
    *out = p_;
    p_ += n;
    return true;
  }
  bool String(std::string* s) {
    uint64_t n;
    const uint8_t* b;
    if (!Varint(&n) || n > remaining() || !Raw(n, &b)) return false;
    s->assign(reinterpret_cast<const char*>(b), n);
    return true;
  }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace fay::trace
