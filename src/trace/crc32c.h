// CRC32C (Castagnoli), the checksum of every chunk in a .fay file. It is the CRC that iSCSI,
// ext4 and SSE4.2 compute, so an independent reader finds it in any standard library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fay::trace {

// CRC32C of data, continuing from crc (0 to start): Crc32c(ab) == Crc32c(b, Crc32c(a)).
// ISA-L's, which chooses the fastest code for the CPU at run time.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// A plain table-driven CRC32C: the reference the tests hold ISA-L's to.
uint32_t Crc32cTable(const void* data, size_t n, uint32_t crc = 0);

}  // namespace fay::trace
