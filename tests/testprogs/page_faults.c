// page_faults N: maps N pages at 0x7e0000000000 (no huge pages) and writes one byte to each:
// exactly N page faults at addresses in [0x7e0000000000, 0x7e0000000000 + N * 4096), for
// `software:page-faults | where addr >= ...`. Exits 1 if the mapping cannot be placed there.
#include <sys/mman.h>

#include "common.h"

int main(int argc, char** argv) {
  long n = testprog_arg(argc, argv, 1, "usage: page_faults N\n");
  char* base = (char*)0x7e0000000000UL;
  char* p = mmap(base, (size_t)n * 4096, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p != base) return 1;
  madvise(p, (size_t)n * 4096, MADV_NOHUGEPAGE);
  for (long i = 0; i < n; i++) ((volatile char*)p)[i * 4096] = 1;
  return 0;
}
