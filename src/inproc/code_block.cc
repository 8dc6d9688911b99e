#include "inproc/code_block.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace fay::inproc {
namespace {

constexpr uint64_t kReach = (1ull << 31) - (1ull << 20);  // a rel32 jump's, with a margin
constexpr uint64_t kStep = 1ull << 20;

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

Expected<CodeBlock> CodeBlock::MapNear(uint64_t address, size_t size) {
  const uint64_t page = PageSize();
  size = (size + page - 1) / page * page;
  const uint64_t origin = address & ~(kStep - 1);
  // Nearest first, below then above: MAP_FIXED_NOREPLACE takes the hint or fails, and never
  // moves what is mapped there already.
  for (uint64_t d = kStep; d < kReach; d += kStep) {
    for (int side : {-1, 1}) {
      if (side < 0 && origin < d + page) continue;
      uint64_t hint = side < 0 ? origin - d : origin + d;
      void* p = mmap(reinterpret_cast<void*>(hint), size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p != MAP_FAILED) return CodeBlock(p, size);
      if (errno != EEXIST && errno != EPERM && errno != EINVAL)
        return Error(Code::kIo, fmt::format("mmap near {:#x}: {}", address, strerror(errno)));
    }
  }
  return Error(Code::kUnsupported,
               fmt::format("no free memory within a jump's reach (2 GiB) of {:#x}", address));
}

CodeBlock::CodeBlock(CodeBlock&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}

CodeBlock& CodeBlock::operator=(CodeBlock&& o) noexcept {
  if (this != &o) {
    if (base_) munmap(base_, size_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

CodeBlock::~CodeBlock() {
  if (base_) munmap(base_, size_);
}

Status CodeBlock::Write(size_t offset, std::span<const uint8_t> bytes) {
  if (offset > size_ || bytes.size() > size_ - offset)
    return Error(Code::kInvalidArgument, fmt::format("{} bytes at {} do not fit a {}-byte block",
                                                     bytes.size(), offset, size_));
  std::memcpy(static_cast<uint8_t*>(base_) + offset, bytes.data(), bytes.size());
  return Status::Ok();
}

Status CodeBlock::Seal() {
  if (mprotect(base_, size_, PROT_READ | PROT_EXEC) != 0)
    return Error(Code::kIo, fmt::format("mprotect: {}", strerror(errno)));
  return Status::Ok();
}

Status PokeCode(uint64_t address, std::span<const uint8_t> bytes) {
  const uint64_t page = PageSize();
  const uint64_t first = address & ~(page - 1);
  const uint64_t end = (address + bytes.size() + page - 1) & ~(page - 1);
  void* at = reinterpret_cast<void*>(first);
  if (mprotect(at, end - first, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
    return Error(Code::kIo, fmt::format("cannot make the code at {:#x} writable: {}", address,
                                        strerror(errno)));
  std::memcpy(reinterpret_cast<void*>(address), bytes.data(), bytes.size());
  // The instruction cache is coherent on x86-64: the new bytes run from the next fetch.
  if (mprotect(at, end - first, PROT_READ | PROT_EXEC) != 0)
    return Error(Code::kIo, fmt::format("mprotect: {}", strerror(errno)));
  return Status::Ok();
}

}  // namespace fay::inproc
