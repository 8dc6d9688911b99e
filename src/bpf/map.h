// Map: an owned BPF map created with libbpf's low-level API, plus the user-space accessors
// fay needs (per-CPU slices, robust key iteration, clearing between windows).
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/fd.h"
#include "common/status.h"

namespace fay::bpf {

// Status for a failed bpf()/perf_event_open call: "what: strerror", with the privilege fix
// appended on EPERM/EACCES.
Status BpfError(const std::string& what, int err);

// Number of possible CPUs: the slice count of every per-CPU map value.
int PossibleCpus();

class Map {
 public:
  Map() = default;
  Map(Map&&) noexcept = default;
  Map& operator=(Map&&) noexcept = default;

  static Expected<Map> Create(bpf_map_type type, const std::string& name, uint32_t key_size,
                              uint32_t value_size, uint32_t max_entries, uint32_t flags = 0);

  int fd() const { return fd_.get(); }
  uint32_t key_size() const { return key_size_; }
  uint32_t value_size() const { return value_size_; }
  bpf_map_type type() const { return type_; }
  uint32_t max_entries() const { return max_entries_; }
  const std::string& name() const { return name_; }
  // PERCPU_HASH / PERCPU_ARRAY / LRU_PERCPU_HASH.
  bool per_cpu() const;
  // Bytes Lookup() writes for one key: value_size, or PossibleCpus() * round_up(value_size, 8)
  // for per-CPU maps.
  size_t lookup_size() const;

  Status Update(const void* key, const void* value, uint64_t flags = BPF_ANY);
  // Updates `count` entries in one bpf() call; keys and values are packed arrays. Falls back
  // to one call per entry on kernels without batch operations for this map type.
  Status UpdateBatch(const void* keys, const void* values, uint32_t count);
  Status Delete(const void* key);
  // For per-CPU maps value must hold lookup_size() bytes. kNotFound when absent.
  Status Lookup(const void* key, void* value) const;
  // All keys, iterating with get_next_key; robust to concurrent deletes.
  std::vector<std::vector<uint8_t>> Keys() const;
  // Per-CPU slices of one key's value, each value_size bytes (one slice for non-per-CPU maps).
  Expected<std::vector<std::vector<uint8_t>>> LookupPerCpu(const void* key) const;
  // Every entry: key bytes and lookup_size() value bytes (per-CPU values in the same layout as
  // Lookup). Uses the batch interface where the kernel has it -- one syscall per bucket run
  // instead of two per key -- and falls back to Keys() + Lookup().
  struct Entry {
    std::vector<uint8_t> key;
    std::vector<uint8_t> value;
  };
  Expected<std::vector<Entry>> Dump() const;
  // Deletes every key (hash maps); zeroes every element (array maps).
  Status Clear();

 private:
  UniqueFd fd_;
  bpf_map_type type_ = BPF_MAP_TYPE_UNSPEC;
  std::string name_;
  uint32_t key_size_ = 0;
  uint32_t value_size_ = 0;
  uint32_t max_entries_ = 0;
};

}  // namespace fay::bpf
