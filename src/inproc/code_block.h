// Executable memory for trampolines, and writing over code, in the calling process: what the
// in-process runtime does inside a traced program once it is loaded there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"

namespace fay::inproc {

// An anonymous mapping within a rel32 jump's reach (±2 GiB) of an address, so that the function
// there can jump to a trampoline in it with 5 bytes. Read and write while being filled; read
// and execute once Seal()ed. Unmapped when destroyed.
class CodeBlock {
 public:
  static Expected<CodeBlock> MapNear(uint64_t address, size_t size);

  CodeBlock(CodeBlock&& o) noexcept;
  CodeBlock& operator=(CodeBlock&& o) noexcept;
  CodeBlock(const CodeBlock&) = delete;
  CodeBlock& operator=(const CodeBlock&) = delete;
  ~CodeBlock();

  uint64_t address() const { return reinterpret_cast<uint64_t>(base_); }
  size_t size() const { return size_; }
  // Copies bytes in at `offset` (before Seal).
  Status Write(size_t offset, std::span<const uint8_t> bytes);
  // Read and execute from now on.
  Status Seal();
  // Leaves the mapping in place for good (code that may run at any time later).
  void Release() {
    base_ = nullptr;
    size_ = 0;
  }

 private:
  CodeBlock(void* base, size_t size) : base_(base), size_(size) {}
  void* base_ = nullptr;
  size_t size_ = 0;
};

// Writes `bytes` over the code at `address` in this process: the pages are made writable for the
// time of the copy and given back their protection (read and execute). The caller makes sure
// that no thread runs the bytes meanwhile.
Status PokeCode(uint64_t address, std::span<const uint8_t> bytes);

}  // namespace fay::inproc
