#include "inproc/patchability.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "inproc/relocate.h"

namespace fay::inproc {

Expected<size_t> CheckPatchable(const std::string& path, uint64_t file_offset, uint64_t size,
                                uint64_t address) {
  // Enough of a long function to see its branches: a branch into the first bytes from further
  // than this is rare, and the runtime checks again with the whole function.
  constexpr uint64_t kMaxBytes = 64 << 10;
  std::vector<uint8_t> code(std::min(size, kMaxBytes));
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error(Code::kIo, fmt::format("{}: {}", path, strerror(errno)));
  ssize_t n = pread(fd, code.data(), code.size(), static_cast<off_t>(file_offset));
  int err = errno;
  close(fd);
  if (n < 0) return Error(Code::kIo, fmt::format("{}: {}", path, strerror(err)));
  code.resize(static_cast<size_t>(n));
  // Any trampoline within reach: the runtime maps it as near as it can.
  FAY_ASSIGN_OR_RETURN(Prologue p, RelocatePrologue(code, address, address + (1 << 20)));
  return p.length;
}

}  // namespace fay::inproc
