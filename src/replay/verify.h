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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "schema/syscall_event.h"

namespace fay::replay {

// The files fay made other than the trace says they were, by device and inode: those --prepare
// made (see prepare.h), and those whose set-id bits a replayed chmod, fchmod or creating open
// asked for and did not get. A stat of one of them that differs from its recording only by the
// bits withheld, or by the owner not given, is what fay chose, not a mismatch. Only those
// files: the same difference on any other file is a mismatch. Added to by Preparer::Apply and
// by the replay's workers while others look up.
class PreparedDiffs {
 public:
  struct Diff {
    uint32_t mode_bits = 0;  // S_ISUID, S_ISGID, S_ISVTX bits recorded and not given
    bool owner = false;      // uid/gid not the recorded ones
  };
  void Add(uint64_t dev, uint64_t ino, Diff d);
  // A copy: another thread may add to the same file meanwhile.
  std::optional<Diff> Find(uint64_t dev, uint64_t ino) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Diff> diffs_;
};

// Each returns "" when equal, else what differed. For the stat family, a difference that
// `prepared` expects sets *as_prepared and returns "".
std::string CompareBytes(const CapturedBuffer& recorded, const uint8_t* live, size_t n);
std::string CompareDirents(const CapturedBuffer& recorded, const uint8_t* live, size_t n);

// Calls fn(name, d_type) for each struct linux_dirent64 (d_ino u64, d_off s64, d_reclen u16,
// d_type u8, d_name[]) in d, in order; stops at a record that does not fit.
template <typename F>
void ForEachDirent(std::span<const uint8_t> d, F&& fn) {
  constexpr size_t kHeader = 19;
  for (size_t at = 0; at + kHeader <= d.size();) {
    uint16_t reclen;
    std::memcpy(&reclen, d.data() + at + 16, 2);
    if (reclen < kHeader || at + reclen > d.size()) return;
    const char* name = reinterpret_cast<const char*>(d.data() + at + kHeader);
    fn(std::string_view(name, strnlen(name, reclen - kHeader)), d[at + 18]);
    at += reclen;
  }
}
std::string CompareStat(const CapturedBuffer& recorded, const struct stat& live,
                        const PreparedDiffs* prepared = nullptr, bool* as_prepared = nullptr);
std::string CompareStatx(const CapturedBuffer& recorded, const struct statx& live,
                         const PreparedDiffs* prepared = nullptr, bool* as_prepared = nullptr);

}  // namespace fay::replay
