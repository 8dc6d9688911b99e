#include "trace/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace fay::trace {
namespace {

// Reflected polynomial 0x1EDC6F41.
constexpr uint32_t kPoly = 0x82F63B78u;

constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  return t;
}

constexpr auto kTables = MakeTables();

}  // namespace

uint32_t Crc32cTable(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  // Slicing-by-8: eight table lookups per 8 bytes instead of one per byte.
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= c;
    c = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
        kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^ kTables[2][(w >> 40) & 0xFF] ^
        kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFF];
  return ~c;
}

#if defined(__x86_64__)
namespace {

// Three independent crc32 instruction chains run three times as fast as one (the instruction's
// latency is three cycles, its throughput one), so long buffers are summed as three lanes of
// kLane bytes that are then joined. Joining moves a lane's register past the kLane bytes of the
// lanes after it: appending zeros to a CRC is linear in the register, a table per byte of it.
constexpr size_t kLane = 4096;

__attribute__((target("sse4.2"))) uint64_t Crc32cRun(uint64_t c, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

struct LaneShift {
  uint32_t t[4][256];
  LaneShift() {
    static const uint8_t zeros[kLane] = {};
    uint32_t basis[32];
    for (int bit = 0; bit < 32; ++bit)
      basis[bit] = static_cast<uint32_t>(Crc32cRun(uint64_t{1} << bit, zeros, kLane));
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int i = 0; i < 8; ++i)
          if (b & (1u << i)) v ^= basis[8 * k + i];
        t[k][b] = v;
      }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
  }
};

}  // namespace

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const void* data, size_t n,
                                                          uint32_t crc) {
  static const LaneShift shift;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = static_cast<uint32_t>(~crc);
  while (n >= 3 * kLane) {
    uint64_t a = c, b = 0, d = 0;
    for (size_t i = 0; i < kLane; i += 8) {
      uint64_t wa, wb, wd;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + kLane + i, 8);
      std::memcpy(&wd, p + 2 * kLane + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      d = _mm_crc32_u64(d, wd);
    }
    c = shift(shift(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^
        static_cast<uint32_t>(d);
    p += 3 * kLane;
    n -= 3 * kLane;
  }
  return ~static_cast<uint32_t>(Crc32cRun(c, p, n));
}

bool Crc32cHardwareAvailable() {
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
}
#else
uint32_t Crc32cHardware(const void* data, size_t n, uint32_t crc) {
  return Crc32cTable(data, n, crc);
}
bool Crc32cHardwareAvailable() {
  return false;
}
#endif

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  return Crc32cHardwareAvailable() ? Crc32cHardware(data, n, crc) : Crc32cTable(data, n, crc);
}

}  // namespace fay::trace
