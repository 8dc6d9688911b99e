// The entry states of a thread's calls in flight, for the map whose keys start with the
// thread's own id (the entry map: {pid_tgid, sp} -> entry time and arguments, codegen.h). In
// the kernel it is one hash table all CPUs share; in the process no other thread ever reads a
// thread's keys, so each thread keeps its own, with no hashing and no atomic operation: a stack
// searched from the top, where a return finds its entry first. Bounded: when full, the oldest
// entry goes, as in the kernel's LRU map, and its return then counts as one with no entry.
#pragma once

#include <cstdint>

namespace fay::inproc {

class ThreadEntries {
 public:
  static constexpr uint32_t kCapacity = 4096;

  // The helpers' semantics over the calling thread's own table; key_size and value_size are
  // the map's (the same on every call for one map).
  static void* Lookup(const void* map, const void* key, uint32_t key_size, uint32_t value_size);
  static int64_t Update(const void* map, const void* key, const void* value, uint64_t flags,
                        uint32_t key_size, uint32_t value_size);
  static int64_t Delete(const void* map, const void* key, uint32_t key_size, uint32_t value_size);
};

}  // namespace fay::inproc
