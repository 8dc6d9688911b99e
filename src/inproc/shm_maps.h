// eBPF maps kept in memory that fay and the traced process share, for the programs the
// in-process interpreter runs: arrays and hash tables, shared or with one copy per slot (what
// a per-CPU map is in the kernel). A slot is held by one thread for the whole run of a program,
// as a CPU is in the kernel (preemption is off there), so a program may keep a pointer to a
// slot's value as it does in the kernel. Fay reads them as it reads the kernel's per-CPU maps:
// every slot's value of a key, merged.
//
// Shared hash tables take concurrent updates from many threads: an entry is claimed with a
// compare-and-swap on its state, then filled, then published. Unlike the kernel's, which locks
// a bucket, two threads adding the same new key at the same moment may both add it: fay's
// programs add only per-thread keys (a tid) to shared tables, and per-slot tables have one
// thread at a time. An LRU table evicts nothing: full is full (-E2BIG), as for a hash.
#pragma once

#include <linux/bpf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>

#include "common/status.h"
#include "inproc/interpreter.h"

namespace fay::inproc {

// fay's keys are mostly 8 or 16 bytes (a tid; a tid and a stack pointer): compared as words,
// not through a memcmp call.
inline bool KeysEqual(const void* a, const void* b, size_t n) {
  uint64_t x[2], y[2];
  switch (n) {
    case 8:
      std::memcpy(x, a, 8), std::memcpy(y, b, 8);
      return x[0] == y[0];
    case 16:
      std::memcpy(x, a, 16), std::memcpy(y, b, 16);
      return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
    default:
      return std::memcmp(a, b, n) == 0;
  }
}

struct MapShape {
  bpf_map_type type = BPF_MAP_TYPE_ARRAY;  // ARRAY, PERCPU_ARRAY, HASH, PERCPU_HASH, LRU_HASH
  uint32_t key_size = 0;
  uint32_t value_size = 0;
  uint32_t max_entries = 0;
};

// One map inside a memory region. The object itself is a view: what it points to lives in the
// region, so fay and the process each make one over the same bytes.
class ShmMap {
 public:
  // Bytes a map of this shape takes with `slots` slots (per-CPU types; 1 for the others).
  static Expected<size_t> BytesFor(const MapShape& shape, uint32_t slots);
  // Lays out a new, empty map in `region` (zeroed, BytesFor bytes), or views one laid out by
  // another process (`fresh` false).
  static Expected<ShmMap> Place(const MapShape& shape, uint32_t slots, std::span<uint8_t> region);

  // The helpers' semantics: a value's address or null; 0 or -errno (EEXIST for BPF_NOEXIST on
  // a present key, ENOENT for BPF_EXIST on a missing one, E2BIG when full, EINVAL for an array
  // update with BPF_NOEXIST or a delete); `slot` picks the copy of a per-CPU map.
  // The array case is inline: it is most probes' whole map work (a count's slot).
  void* Lookup(const void* key, uint32_t slot) const {
    if (!IsArray()) return LookupHash(key, slot);
    uint32_t i;
    std::memcpy(&i, key, 4);
    if (slot >= slots_ || i >= shape_.max_entries) return nullptr;
    return Table(slot) + static_cast<size_t>(i) * entry_bytes_;
  }
  int64_t Update(const void* key, const void* value, uint64_t flags, uint32_t slot) const;
  int64_t Delete(const void* key, uint32_t slot) const;

  // Every present key with its value in each slot (fay's side: merge them as per-CPU values).
  // A hash table with no key is skipped unread: the pages of slots no thread used stay
  // unallocated.
  void ForEach(
      const std::function<void(const uint8_t* key, uint32_t slot, const uint8_t* value)>& fn) const;
  // Empties a hash map (every slot), or zeroes an array's values. Only while no program runs on
  // it (fay's idle window).
  void Clear() const;

  // An array's layout, for inlined lookups (interpreter.h); false for a hash table.
  bool Layout(ArrayLayout* out) const {
    if (!IsArray()) return false;
    *out = {base_, table_bytes_, entry_bytes_, shape_.max_entries, slots_, PerSlot()};
    return true;
  }

  // Keys that start with their thread's pid_tgid are kept per thread (thread_entries.h) by
  // the helpers, not in this map.
  void SetThreadKeyed() { thread_keyed_ = true; }
  bool thread_keyed() const { return thread_keyed_; }

  const MapShape& shape() const { return shape_; }
  uint32_t slots() const { return slots_; }

 private:
  void* LookupHash(const void* key, uint32_t slot) const;
  // A present key's value in table `t`, found from its hash.
  void* Find(uint8_t* t, const uint8_t* key, uint32_t hash) const;
  bool PerSlot() const {
    return shape_.type == BPF_MAP_TYPE_PERCPU_ARRAY || shape_.type == BPF_MAP_TYPE_PERCPU_HASH;
  }
  bool IsArray() const {
    return shape_.type == BPF_MAP_TYPE_ARRAY || shape_.type == BPF_MAP_TYPE_PERCPU_ARRAY;
  }
  uint8_t* Table(uint32_t slot) const { return base_ + (PerSlot() ? slot : 0) * table_bytes_; }

  MapShape shape_;
  uint32_t slots_ = 1;
  uint32_t buckets_ = 0;    // hash tables: a power of two, twice max_entries at least
  size_t entry_bytes_ = 0;  // hash: state (8), key, value, each 8-aligned; array: value
  size_t key_off_ = 8, value_off_ = 0;
  size_t table_bytes_ = 0;
  uint8_t* base_ = nullptr;
  bool thread_keyed_ = false;
};

}  // namespace fay::inproc
