// CRC32C (Castagnoli), the checksum of every chunk in a .fay file. It is the CRC that iSCSI,
// ext4 and SSE4.2 compute, so an independent reader finds it in any standard library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fay::trace {

// CRC32C of data, continuing from crc (0 to start): Crc32c(ab) == Crc32c(b, Crc32c(a)).
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// The two implementations, exposed so tests can check that they agree.
uint32_t Crc32cTable(const void* data, size_t n, uint32_t crc = 0);
uint32_t Crc32cHardware(const void* data, size_t n, uint32_t crc = 0);  // needs SSE4.2
bool Crc32cHardwareAvailable();

}  // namespace fay::trace
