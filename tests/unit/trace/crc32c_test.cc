#include "trace/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace fay::trace {
namespace {

// Vectors from RFC 3720 (iSCSI), appendix B.4, and the usual check value.
struct Vector {
  std::vector<uint8_t> data;
  uint32_t crc;
};

std::vector<Vector> Vectors() {
  std::vector<Vector> v;
  const char* check = "123456789";
  v.push_back({{check, check + 9}, 0xE3069283u});
  v.push_back({{}, 0x00000000u});
  v.push_back({std::vector<uint8_t>(32, 0x00), 0x8A9136AAu});
  v.push_back({std::vector<uint8_t>(32, 0xFF), 0x62A8AB43u});
  std::vector<uint8_t> up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  v.push_back({up, 0x46DD794Eu});
  v.push_back({down, 0x113FDB5Cu});
  return v;
}

TEST(Crc32cTest, KnownVectors) {
  for (const Vector& v : Vectors()) {
    EXPECT_EQ(Crc32c(v.data.data(), v.data.size()), v.crc);
    EXPECT_EQ(Crc32cTable(v.data.data(), v.data.size()), v.crc);
  }
}

TEST(Crc32cTest, ContinuesAcrossPieces) {
  const char* s = "123456789";
  for (size_t cut = 0; cut <= 9; ++cut) {
    uint32_t crc = Crc32c(s, cut);
    EXPECT_EQ(Crc32c(s + cut, 9 - cut, crc), 0xE3069283u) << "cut at " << cut;
  }
}

// ISA-L's code differs by length (folds of 64, 256 or more bytes, then a tail) and by the
// buffer's alignment: every short length at nine alignments, with a seed, must agree with the
// table.
TEST(Crc32cTest, LibraryAndTableAgreeOnEveryLengthAndAlignment) {
  std::mt19937 rng(1);
  std::vector<uint8_t> buf(600);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t start = 0; start < 9; ++start)
    for (size_t n = 0; n + start <= buf.size(); ++n)
      ASSERT_EQ(Crc32c(buf.data() + start, n, 0x1234), Crc32cTable(buf.data() + start, n, 0x1234))
          << start << "+" << n;
}

// Long buffers, around the sizes where the library's loops change, and a chunk's worth.
TEST(Crc32cTest, LibraryAgreesWithTheTableOnLongBuffers) {
  std::mt19937 rng(2);
  std::vector<uint8_t> buf((1 << 20) + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : {1023, 1024, 1025, 4095, 4096, 4097, 12287, 12288, 12297, 65536, 1 << 20})
    for (size_t start : {0, 3})
      ASSERT_EQ(Crc32c(buf.data() + start, n, 0xdeadbeef),
                Crc32cTable(buf.data() + start, n, 0xdeadbeef))
          << start << "+" << n;
}

}  // namespace
}  // namespace fay::trace
