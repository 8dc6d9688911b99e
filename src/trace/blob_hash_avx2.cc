// XXH3-128 built for AVX2, chosen at run time by HashBlob. Debian's libxxhash is built for the
// baseline x86-64 (SSE2), and hashing every captured byte at half speed was a tenth of the
// recorder's CPU on a workload that reads a gigabyte. Only this file is compiled with -mavx2
// (see CMakeLists.txt); nothing calls it unless the CPU has AVX2.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "trace/format.h"

namespace fay::trace {

Hash128 HashBlobAvx2(const void* data, size_t n) {
  XXH128_hash_t h = XXH3_128bits(data, n);
  return Hash128{h.low64, h.high64};
}

}  // namespace fay::trace
