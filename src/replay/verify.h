// --verify: what a replayed call must reproduce, and what it may not.
//
// Compared: every replayed call's return value (new fds only as success or the same errno: the
// numbers are the replayer's own); the bytes returned by read/pread64/readv/preadv/readlink; the
// entries returned by getdents64; the stable fields of the stat family.
//
// Ignored, because they legitimately differ on another file system, machine or run:
//   stat:  st_dev, st_ino, st_blksize, st_blocks (allocation: --prepare makes sparse files),
//          st_atime, st_mtime, st_ctime; for directories also st_size and st_nlink (both count
//          entries and subdirectories the trace never touched, and the size is file-system
//          specific);
//   statx: the same fields, plus stx_mask, stx_attributes(_mask), stx_btime, stx_mnt_id and the
//          direct-I/O alignment fields;
//   getdents64: d_ino, d_off and the order of the entries (hash order on ext4, creation order
//          on tmpfs); the set of (name, type) must match.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "schema/syscall_event.h"

namespace fay::replay {

// Each returns "" when equal, else what differed.
std::string CompareBytes(const CapturedBuffer& recorded, const uint8_t* live, size_t n);
std::string CompareDirents(const CapturedBuffer& recorded, const uint8_t* live, size_t n);
std::string CompareStat(const CapturedBuffer& recorded, const struct stat& live);
std::string CompareStatx(const CapturedBuffer& recorded, const struct statx& live);

}  // namespace fay::replay
