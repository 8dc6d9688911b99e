// Sets of syscalls as `-e` names them, in strace's trace= syntax.
#pragma once

#include <bitset>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace fay {

class SyscallSet {
 public:
  static constexpr int kMaxNr = 512;

  SyscallSet() = default;
  static SyscallSet All();

  bool Contains(int nr) const { return nr >= 0 && nr < kMaxNr && bits_.test(nr); }
  // Ascending.
  std::vector<int> Numbers() const;
  bool IsAll() const;
  bool Empty() const { return bits_.none(); }

  void Add(int nr) {
    if (nr >= 0 && nr < kMaxNr) bits_.set(nr);
  }
  void Remove(int nr) {
    if (nr >= 0 && nr < kMaxNr) bits_.reset(nr);
  }

 private:
  std::bitset<kMaxNr> bits_;
};

// strace's trace= list: "open,close", "%file", "%desc,write", "!%memory", "all", "none",
// "/regex", "?name" (no error when unknown), with an optional leading "trace=". A leading '!'
// negates the whole list, as in strace. Unknown names fail with the nearest known one.
Expected<SyscallSet> ParseSyscallSet(std::string_view spec);

}  // namespace fay
