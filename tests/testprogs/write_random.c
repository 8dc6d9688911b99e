// write_random N K [SEED]: N write(1, buf, K) calls, each of K fresh pseudorandom bytes (xorshift64
// from SEED, default 1), so no two buffers are alike and none compresses. The output is the same
// for the same arguments: a test can compare it byte for byte with an untraced run.
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

static unsigned char buf[1 << 20];

int main(int argc, char** argv) {
  const char* usage = "usage: write_random N K [SEED]   (K <= 1048576)\n";
  long n = testprog_arg(argc, argv, 1, usage);
  long k = testprog_arg(argc, argv, 2, usage);
  uint64_t x = argc > 3 ? (uint64_t)testprog_arg(argc, argv, 3, usage) : 1;
  if (k > (long)sizeof(buf)) {
    (void)!write(2, usage, __builtin_strlen(usage));
    return 2;
  }
  if (x == 0) x = 1;
  int bad = 0;
  for (long i = 0; i < n; i++) {
    for (long j = 0; j < k; j++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      buf[j] = (unsigned char)(x >> 32);
    }
    // A full pipe or disk may take several calls; a test that counts calls uses a file or
    // /dev/null, where one call always writes all K bytes.
    long done = 0;
    while (done < k) {
      long w = syscall(SYS_write, 1, buf + done, k - done);
      if (w <= 0) {
        bad = 1;
        break;
      }
      done += w;
    }
  }
  return bad;
}
