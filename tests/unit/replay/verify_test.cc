// What --verify compares and what it ignores.
#include "replay/verify.h"

#include <gtest/gtest.h>

#include <cstring>

namespace fay::replay {
namespace {

CapturedBuffer Buf(const void* p, size_t n) {
  CapturedBuffer b;
  b.dir = BufferDir::kOut;
  b.bytes.assign(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  b.length = n;
  return b;
}

void Dirent(std::vector<uint8_t>* out, uint64_t ino, const std::string& name, uint8_t type) {
  size_t reclen = (19 + name.size() + 1 + 7) / 8 * 8;
  size_t at = out->size();
  out->resize(at + reclen);
  std::memcpy(out->data() + at, &ino, 8);
  uint16_t r = static_cast<uint16_t>(reclen);
  std::memcpy(out->data() + at + 16, &r, 2);
  (*out)[at + 18] = type;
  std::memcpy(out->data() + at + 19, name.data(), name.size());
}

TEST(VerifyTest, Bytes) {
  CapturedBuffer b = Buf("hello", 5);
  EXPECT_EQ(CompareBytes(b, reinterpret_cast<const uint8_t*>("hello"), 5), "");
  EXPECT_EQ(CompareBytes(b, reinterpret_cast<const uint8_t*>("help!"), 5),
            "data differs at byte 3 (0x6c recorded, 0x70 returned)");
  EXPECT_EQ(CompareBytes(b, reinterpret_cast<const uint8_t*>("hell"), 4),
            "data: 5 bytes recorded, 4 returned");
  b.truncated = true;  // cut by --max-buffer: compared as far as it goes
  EXPECT_EQ(CompareBytes(b, reinterpret_cast<const uint8_t*>("hello world"), 11), "");
}

TEST(VerifyTest, DirentsIgnoreInodesAndOrder) {
  std::vector<uint8_t> a, b, c;
  Dirent(&a, 1, ".", 4);
  Dirent(&a, 2, "f", 8);
  Dirent(&a, 3, "d", 4);
  Dirent(&b, 90, "d", 4);
  Dirent(&b, 91, ".", 4);
  Dirent(&b, 92, "f", 8);
  Dirent(&c, 1, ".", 4);
  Dirent(&c, 2, "g", 8);
  Dirent(&c, 3, "d", 4);
  CapturedBuffer rec = Buf(a.data(), a.size());
  EXPECT_EQ(CompareDirents(rec, b.data(), b.size()), "");
  EXPECT_EQ(CompareDirents(rec, c.data(), c.size()),
            "directory entries differ: 1 missing 'f' 1 extra 'g'");
}

TEST(VerifyTest, StatComparesStableFieldsOnly) {
  struct stat want {};
  want.st_mode = S_IFREG | 0644;
  want.st_nlink = 1;
  want.st_uid = 1000;
  want.st_size = 4096;
  want.st_ino = 1;
  want.st_dev = 2;
  want.st_blocks = 8;
  want.st_mtim.tv_sec = 5;
  struct stat got = want;
  got.st_ino = 77;
  got.st_dev = 78;
  got.st_blocks = 0;  // a sparse prepared file
  got.st_mtim.tv_sec = 6;
  CapturedBuffer rec = Buf(&want, sizeof(want));
  EXPECT_EQ(CompareStat(rec, got), "");
  got.st_mode = S_IFREG | 0600;
  got.st_size = 1;
  EXPECT_EQ(CompareStat(rec, got),
            "st_mode 0100644 recorded, 0100600 returned; st_size 4096 recorded, 1 returned");
}

TEST(VerifyTest, DirectorySizeAndLinkCountAreIgnored) {
  struct stat want {};
  want.st_mode = S_IFDIR | 0755;
  want.st_nlink = 9;
  want.st_size = 4096;
  struct stat got = want;
  got.st_nlink = 2;
  got.st_size = 60;
  EXPECT_EQ(CompareStat(Buf(&want, sizeof(want)), got), "");
}

TEST(VerifyTest, StatxOnlyWhatBothAskedFor) {
  struct statx want {};
  want.stx_mask = STATX_BASIC_STATS;
  want.stx_mode = S_IFREG | 0644;
  want.stx_size = 10;
  want.stx_nlink = 1;
  struct statx got = want;
  got.stx_ino = 5;
  got.stx_mask = STATX_BASIC_STATS | STATX_BTIME;
  EXPECT_EQ(CompareStatx(Buf(&want, sizeof(want)), got), "");
  got.stx_size = 11;
  EXPECT_EQ(CompareStatx(Buf(&want, sizeof(want)), got), "stx_size 10 recorded, 11 returned");
}

}  // namespace
}  // namespace fay::replay
