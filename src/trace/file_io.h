// Whole-buffer I/O the trace writer and reader use, on fay's common UniqueFd.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace fay::trace {

using OwnedFd = fay::UniqueFd;

// Writes all n bytes (retrying short writes and EINTR); on failure *written holds how many made it.
Status WriteAll(int fd, const void* data, size_t n, const std::string& what);
// The same at `offset`, with pwrite: the file position does not move.
Status PwriteAll(int fd, uint64_t offset, const void* data, size_t n, const std::string& what);

// Reads exactly n bytes at offset; *got holds how many were available (less at end of file).
Status ReadAt(int fd, uint64_t offset, void* data, size_t n, size_t* got, const std::string& what);

}  // namespace fay::trace
