#include "trace/bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace fay::trace {
namespace {

TEST(BytesTest, VarintEncodingIsLeb128) {
  Bytes b;
  PutVarint(b, 0);
  PutVarint(b, 127);
  PutVarint(b, 128);
  PutVarint(b, 300);
  EXPECT_EQ(b, (Bytes{0x00, 0x7F, 0x80, 0x01, 0xAC, 0x02}));
  b.clear();
  PutVarint(b, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(b, (Bytes{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
}

TEST(BytesTest, ZigzagMapsSmallMagnitudesToSmallCodes) {
  EXPECT_EQ(ZigzagEncode(0), 0u);
  EXPECT_EQ(ZigzagEncode(-1), 1u);
  EXPECT_EQ(ZigzagEncode(1), 2u);
  EXPECT_EQ(ZigzagEncode(-2), 3u);
  EXPECT_EQ(ZigzagEncode(std::numeric_limits<int64_t>::min()),
            std::numeric_limits<uint64_t>::max());
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{12345}, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()})
    EXPECT_EQ(ZigzagDecode(ZigzagEncode(v)), v);
}

TEST(BytesTest, ReaderRoundTripsAndStopsAtTheEnd) {
  Bytes b;
  PutVarint(b, 1ull << 40);
  PutZigzag(b, -77);
  PutU32(b, 0xA1B2C3D4);
  PutU64(b, 0x0102030405060708ull);
  PutString(b, "abc");
  ByteReader r(b.data(), b.size());
  uint64_t v;
  int64_t z;
  uint32_t u32;
  uint64_t u64;
  std::string s;
  ASSERT_TRUE(r.Varint(&v));
  EXPECT_EQ(v, 1ull << 40);
  ASSERT_TRUE(r.Zigzag(&z));
  EXPECT_EQ(z, -77);
  ASSERT_TRUE(r.U32(&u32));
  EXPECT_EQ(u32, 0xA1B2C3D4u);
  ASSERT_TRUE(r.U64(&u64));
  EXPECT_EQ(u64, 0x0102030405060708ull);
  ASSERT_TRUE(r.String(&s));
  EXPECT_EQ(s, "abc");
  EXPECT_TRUE(r.empty());
  EXPECT_FALSE(r.Varint(&v));
}

TEST(BytesTest, ReaderRejectsOverlongAndUnterminatedVarints) {
  Bytes overlong(11, 0x80);
  overlong.push_back(0);
  ByteReader a(overlong.data(), overlong.size());
  uint64_t v;
  EXPECT_FALSE(a.Varint(&v));
  Bytes unterminated{0x80, 0x80};
  ByteReader b(unterminated.data(), unterminated.size());
  EXPECT_FALSE(b.Varint(&v));
  Bytes too_big{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02};
  ByteReader c(too_big.data(), too_big.size());
  EXPECT_FALSE(c.Varint(&v));
  Bytes str{5, 'a', 'b'};
  ByteReader d(str.data(), str.size());
  std::string s;
  EXPECT_FALSE(d.String(&s));
}

}  // namespace
}  // namespace fay::trace
