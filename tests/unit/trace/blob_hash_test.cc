#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

#include "trace/format.h"

namespace fay::trace {
Hash128 HashBlobAvx2(const void* data, size_t n);

namespace {

// The AVX2 build of XXH3-128 must give the library's hashes, or traces written on one machine
// would not verify on another.
TEST(BlobHashTest, Avx2BuildMatchesTheLibraryOnEverySizeClass) {
  std::mt19937 rng(3);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : {0, 1, 3, 16, 17, 128, 129, 240, 241, 1024, 4096, 4097, 65536, 70000}) {
    XXH128_hash_t lib = XXH3_128bits(buf.data(), n);
    Hash128 ours = HashBlob(buf.data(), n);
    EXPECT_EQ(ours.lo, lib.low64) << n;
    EXPECT_EQ(ours.hi, lib.high64) << n;
    if (__builtin_cpu_supports("avx2")) {
      Hash128 avx2 = HashBlobAvx2(buf.data(), n);
      EXPECT_EQ(avx2.lo, lib.low64) << n;
      EXPECT_EQ(avx2.hi, lib.high64) << n;
    }
  }
}

}  // namespace
}  // namespace fay::trace
