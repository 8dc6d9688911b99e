#include "inproc/shm_maps.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace fay::inproc {
namespace {

// A hash entry's state word, then its key and value.
enum : uint64_t { kEmpty = 0, kClaimed = 1, kFull = 2, kDeleted = 3 };

size_t Align8(size_t n) {
  return (n + 7) & ~size_t{7};
}

std::atomic<uint64_t>& State(uint8_t* entry) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(entry);
}

// A hash table: the count of its keys, then its buckets.
std::atomic<uint64_t>& Count(uint8_t* table) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(table);
}

// Eight bytes at a time (fay's keys are 8-byte multiples), then the rest byte by byte: a byte
// loop (FNV-1a) was most of a lookup's cost.
uint64_t HashKey(const uint8_t* key, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, key + i, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ key[i]) * 0x100000001b3ull;
  return h ^ (h >> 32);
}

size_t RoundUp64(size_t n) {
  return (n + 63) & ~size_t{63};
}

}  // namespace

Expected<size_t> ShmMap::BytesFor(const MapShape& s, uint32_t slots) {
  if (s.value_size == 0 || s.max_entries == 0 || slots == 0)
    return Error(Code::kInvalidArgument, "a map needs a value size, entries and a slot");
  const bool per_slot = s.type == BPF_MAP_TYPE_PERCPU_ARRAY || s.type == BPF_MAP_TYPE_PERCPU_HASH;
  size_t table;
  switch (s.type) {
    case BPF_MAP_TYPE_ARRAY:
    case BPF_MAP_TYPE_PERCPU_ARRAY:
      if (s.key_size != 4) return Error(Code::kInvalidArgument, "an array's key is 4 bytes");
      table = Align8(s.value_size) * s.max_entries;
      break;
    case BPF_MAP_TYPE_HASH:
    case BPF_MAP_TYPE_PERCPU_HASH:
    case BPF_MAP_TYPE_LRU_HASH: {
      if (s.key_size == 0) return Error(Code::kInvalidArgument, "a hash map needs a key");
      uint64_t buckets = 1;
      while (buckets < 2ull * s.max_entries) buckets <<= 1;
      table = 8 + (8 + Align8(s.key_size) + Align8(s.value_size)) * buckets;  // count, entries
      break;
    }
    default:
      return Error(Code::kUnsupported,
                   fmt::format("map type {} has no in-process form", static_cast<int>(s.type)));
  }
  // Each slot's copy on cache lines of its own: two threads counting in neighbouring slots
  // would otherwise pass one line back and forth on every call.
  return per_slot ? RoundUp64(table) * slots : table;
}

Expected<ShmMap> ShmMap::Place(const MapShape& s, uint32_t slots, std::span<uint8_t> region) {
  FAY_ASSIGN_OR_RETURN(size_t need, BytesFor(s, slots));
  if (region.size() < need)
    return Error(Code::kInvalidArgument,
                 fmt::format("the map needs {} bytes, the region has {}", need, region.size()));
  ShmMap m;
  m.shape_ = s;
  m.slots_ = slots;
  m.base_ = region.data();
  if (m.IsArray()) {
    m.entry_bytes_ = Align8(s.value_size);
    m.table_bytes_ = m.entry_bytes_ * s.max_entries;
  } else {
    m.buckets_ = 1;
    while (m.buckets_ < 2ull * s.max_entries) m.buckets_ <<= 1;
    m.value_off_ = 8 + Align8(s.key_size);
    m.entry_bytes_ = m.value_off_ + Align8(s.value_size);
    m.table_bytes_ = 8 + m.entry_bytes_ * m.buckets_;
  }
  if (m.PerSlot()) m.table_bytes_ = RoundUp64(m.table_bytes_);
  return m;
}

void* ShmMap::LookupHash(const void* key, uint32_t slot) const {
  if (slot >= slots_) return nullptr;
  const auto* k = static_cast<const uint8_t*>(key);
  return Find(Table(slot), k, static_cast<uint32_t>(HashKey(k, shape_.key_size)));
}

void* ShmMap::Find(uint8_t* t, const uint8_t* k, uint32_t hash) const {
  const uint32_t mask = buckets_ - 1;
  for (uint32_t n = 0, b = hash & mask; n < buckets_; ++n, b = (b + 1) & mask) {
    uint8_t* e = t + 8 + static_cast<size_t>(b) * entry_bytes_;
    uint64_t st = State(e).load(std::memory_order_acquire);
    if (st == kEmpty) return nullptr;
    if (st == kFull && KeysEqual(e + key_off_, k, shape_.key_size)) return e + value_off_;
  }
  return nullptr;
}

int64_t ShmMap::Update(const void* key, const void* value, uint64_t flags, uint32_t slot) const {
  if (slot >= slots_ || flags > BPF_EXIST) return -EINVAL;
  if (IsArray()) {
    if (flags == BPF_NOEXIST) return -EEXIST;  // every index of an array exists
    void* v = Lookup(key, slot);
    if (!v) return -E2BIG;
    std::memcpy(v, value, shape_.value_size);
    return 0;
  }
  const auto* k = static_cast<const uint8_t*>(key);
  uint8_t* t = Table(slot);
  const uint32_t hash = static_cast<uint32_t>(HashKey(k, shape_.key_size));  // once, for both
  if (void* v = Find(t, k, hash)) {
    if (flags == BPF_NOEXIST) return -EEXIST;
    std::memcpy(v, value, shape_.value_size);
    return 0;
  }
  if (flags == BPF_EXIST) return -ENOENT;
  const uint32_t mask = buckets_ - 1;
  // The map holds max_entries keys, as the kernel's does, however many buckets it has.
  if (Count(t).fetch_add(1, std::memory_order_acq_rel) >= shape_.max_entries) {
    Count(t).fetch_sub(1, std::memory_order_acq_rel);
    return -E2BIG;
  }
  for (uint32_t n = 0, b = hash & mask; n < buckets_; ++n, b = (b + 1) & mask) {
    uint8_t* e = t + 8 + static_cast<size_t>(b) * entry_bytes_;
    uint64_t st = State(e).load(std::memory_order_acquire);
    if (st != kEmpty && st != kDeleted) continue;
    if (!State(e).compare_exchange_strong(st, kClaimed, std::memory_order_acq_rel)) continue;
    std::memcpy(e + key_off_, k, shape_.key_size);
    std::memcpy(e + value_off_, value, shape_.value_size);
    State(e).store(kFull, std::memory_order_release);
    return 0;
  }
  Count(t).fetch_sub(1, std::memory_order_acq_rel);
  return -E2BIG;
}

int64_t ShmMap::Delete(const void* key, uint32_t slot) const {
  if (IsArray()) return -EINVAL;
  void* v = Lookup(key, slot);
  if (!v) return -ENOENT;
  uint8_t* e = static_cast<uint8_t*>(v) - value_off_;
  State(e).store(kDeleted, std::memory_order_release);
  Count(Table(slot)).fetch_sub(1, std::memory_order_acq_rel);
  return 0;
}

void ShmMap::ForEach(
    const std::function<void(const uint8_t*, uint32_t, const uint8_t*)>& fn) const {
  for (uint32_t s = 0; s < (PerSlot() ? slots_ : 1); ++s) {
    uint8_t* t = Table(s);
    if (IsArray()) {
      for (uint32_t i = 0; i < shape_.max_entries; ++i) {
        const uint8_t* key = reinterpret_cast<const uint8_t*>(&i);
        fn(key, s, t + static_cast<size_t>(i) * entry_bytes_);
      }
      continue;
    }
    if (Count(t).load(std::memory_order_acquire) == 0) continue;
    for (uint32_t b = 0; b < buckets_; ++b) {
      uint8_t* e = t + 8 + static_cast<size_t>(b) * entry_bytes_;
      if (State(e).load(std::memory_order_acquire) == kFull) fn(e + key_off_, s, e + value_off_);
    }
  }
}

void ShmMap::Clear() const {
  for (uint32_t s = 0; s < (PerSlot() ? slots_ : 1); ++s) {
    uint8_t* t = Table(s);
    if (IsArray()) {
      std::memset(t, 0, table_bytes_);
      continue;
    }
    if (Count(t).load(std::memory_order_acquire) == 0) continue;
    // Deleted entries go too: a probe's search stops at the first empty bucket.
    for (uint32_t b = 0; b < buckets_; ++b)
      State(t + 8 + static_cast<size_t>(b) * entry_bytes_).store(kEmpty, std::memory_order_release);
    Count(t).store(0, std::memory_order_release);
  }
}

}  // namespace fay::inproc
