// The writer's set of blob hashes already stored: one insert per captured buffer, hundreds of
// thousands per second when a program streams data. Open addressing over a flat array: no
// allocation per entry, and the hashes are already uniformly random, so their low bits index.
#pragma once

#include <cstddef>
#include <vector>

#include "trace/format.h"

namespace fay::trace {

class Hash128Set {
 public:
  // Returns true when h was not in the set (and adds it).
  bool Insert(const Hash128& h) {
    if ((count_ + 1) * 2 > slots_.size()) Grow();
    if (Place(slots_, h)) {
      ++count_;
      return true;
    }
    return false;
  }
  size_t size() const { return count_; }

 private:
  // The all-zero hash marks an empty slot; the one real blob hashing to it is kept aside.
  bool Place(std::vector<Hash128>& slots, const Hash128& h) {
    if (h.lo == 0 && h.hi == 0) {
      if (has_zero_) return false;
      has_zero_ = true;
      return true;
    }
    size_t mask = slots.size() - 1;
    for (size_t i = static_cast<size_t>(h.lo) & mask;; i = (i + 1) & mask) {
      Hash128& s = slots[i];
      if (s.lo == 0 && s.hi == 0) {
        s = h;
        return true;
      }
      if (s == h) return false;
    }
  }
  void Grow() {
    std::vector<Hash128> bigger(slots_.empty() ? 1024 : slots_.size() * 2);
    bool zero = has_zero_;
    has_zero_ = false;
    for (const Hash128& h : slots_)
      if (h.lo != 0 || h.hi != 0) Place(bigger, h);
    has_zero_ = zero;
    slots_.swap(bigger);
  }

  std::vector<Hash128> slots_;
  size_t count_ = 0;
  bool has_zero_ = false;
};

}  // namespace fay::trace
