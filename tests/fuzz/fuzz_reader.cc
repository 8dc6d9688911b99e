// Reader::Open + ForEach over arbitrary bytes: whatever the file holds, the reader returns a
// Status, never crashes, hangs or allocates what a length field claims without checking it.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trace/bytes.h"
#include "trace/crc32c.h"
#include "trace/format.h"
#include "trace/reader.h"

namespace {

// One file per process, rewritten for every input: the reader takes a path, not bytes.
const std::string& TempPath() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr ? dir : "/tmp") + "/fay_fuzz_reader." +
           std::to_string(::getpid()) + ".fay";
  }();
  return path;
}

bool WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

// Every chunk header and payload carries a CRC32C, so nearly every mutation would stop at the
// first checksum. Recomputing the checksums lets the fuzzer reach the decoders behind them, which
// a hostile (rather than damaged) file reaches too.
void FixChecksums(std::vector<uint8_t>& b) {
  namespace ft = fay::trace;
  size_t at = ft::kPreambleSize;
  while (at + ft::kChunkHeaderSize <= b.size() &&
         std::memcmp(&b[at], ft::kChunkMagic, sizeof(ft::kChunkMagic)) == 0) {
    uint8_t* h = &b[at];
    uint64_t stored = ft::LoadU32(h + 12);
    size_t payload = at + ft::kChunkHeaderSize;
    if (stored <= b.size() - payload) ft::StoreU32(h + 24, ft::Crc32c(&b[payload], stored));
    ft::StoreU32(h + 28, ft::Crc32c(h, 28));
    if (stored > b.size() - payload) break;
    at = payload + stored;
  }
  if (b.size() >= ft::kTrailerSize) {
    uint8_t* t = &b[b.size() - ft::kTrailerSize];
    if (std::memcmp(t, ft::kTrailerMagic, sizeof(ft::kTrailerMagic)) == 0)
      ft::StoreU32(t + 20, ft::Crc32c(t, 20));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = TempPath();
  std::vector<uint8_t> bytes(data, data + size);
  // FAY_FUZZ_KEEP_CRC=1 replays an input byte for byte (a regression file that is already fixed
  // up).
  static const bool fix = std::getenv("FAY_FUZZ_KEEP_CRC") == nullptr;
  if (fix) FixChecksums(bytes);
  if (!WriteFile(path, bytes.data(), bytes.size())) std::abort();
  auto reader = fay::trace::Reader::Open(path);
  if (!reader.ok()) return 0;
  uint64_t sum = 0;
  auto on_syscall = [&](const fay::SyscallEvent& ev) {
    sum += ev.entry_ns + ev.nr;
    for (const auto& b : ev.buffers) sum += b.bytes.size();
  };
  auto on_process = [&](const fay::ProcessEvent& ev) { sum += ev.time_ns; };
  (void)reader->ForEach(on_syscall, on_process);
  (void)reader->TruncationMessage();
  // The indexed path: a time window and a thread filter go through the footer's index.
  fay::trace::ReadFilter filter;
  filter.from_ns = 1000;
  filter.to_ns = 1ull << 62;
  filter.tids = {1, 2, 3};
  (void)reader->ForEach(filter, on_syscall, on_process);
  return static_cast<int>(sum & 0);
}
