#include "inproc/thread_entries.h"

#include <linux/bpf.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>

#include "inproc/shm_maps.h"

namespace fay::inproc {
namespace {

// One thread's table: a ring of fixed-size records {map, live, key, value}, the newest at
// `top - 1`. Mapped on the thread's first use (mmap, never malloc: a probe may run inside
// malloc) and unmapped when the thread exits.
struct Table {
  size_t record = 0;   // bytes of one record
  uint32_t top = 0;    // records pushed, modulo nothing: index = (top - 1 - i) % kCapacity
  uint32_t count = 0;  // records held, <= kCapacity
  uint8_t records[];   // kCapacity of them
};

struct Header {
  const void* map;
  uint64_t live;  // 0: deleted, a hole popped when it reaches the top
};

constexpr size_t Align8(size_t n) {
  return (n + 7) & ~size_t{7};
}

constinit thread_local Table* t_table = nullptr;
// glibc keeps a thread's first 32 keys in the thread itself; past them it callocs a block.
constexpr pthread_key_t kInlineKeys = 32;
pthread_key_t g_key = PTHREAD_KEYS_MAX;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

size_t TableBytes(size_t record) {
  return offsetof(Table, records) + record * ThreadEntries::kCapacity;
}

Table* Get(uint32_t key_size, uint32_t value_size) {
  const size_t record = sizeof(Header) + Align8(key_size) + Align8(value_size);
  if (t_table && t_table->record == record) return t_table;
  pthread_once(&g_key_once, [] {
    if (pthread_key_create(&g_key, [](void* p) {
          // Probes may still run in this thread after its key destructors (free() in glibc's
          // thread teardown): they find no table, and map a new one if they need it.
          t_table = nullptr;
          munmap(p, TableBytes(static_cast<Table*>(p)->record));
        }) != 0)
      g_key = PTHREAD_KEYS_MAX;
  });
  if (t_table) {
    // Another session's map (a second -p attach with another entry size): its calls are gone.
    if (g_key < kInlineKeys) pthread_setspecific(g_key, nullptr);
    Table* old = t_table;
    t_table = nullptr;
    munmap(old, TableBytes(old->record));
  }
  void* p = mmap(nullptr, TableBytes(record), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  t_table = static_cast<Table*>(p);
  t_table->record = record;
  // Past the first 32 keys glibc allocates a thread's key block with calloc, which a probe
  // running inside malloc must not call: the table is then never unmapped (a leak per thread).
  if (g_key < kInlineKeys) pthread_setspecific(g_key, p);
  return t_table;
}

uint8_t* At(Table* t, uint32_t from_top) {
  const uint32_t i = (t->top - 1 - from_top) % ThreadEntries::kCapacity;
  return t->records + static_cast<size_t>(i) * t->record;
}

// The newest live record of `map` with this key, or null.
uint8_t* Find(Table* t, const void* map, const void* key, uint32_t key_size) {
  for (uint32_t i = 0; i < t->count; ++i) {
    uint8_t* r = At(t, i);
    const auto* h = reinterpret_cast<const Header*>(r);
    if (h->live && h->map == map && KeysEqual(r + sizeof(Header), key, key_size)) return r;
  }
  return nullptr;
}

}  // namespace

void* ThreadEntries::Lookup(const void* map, const void* key, uint32_t key_size,
                            uint32_t value_size) {
  Table* t = Get(key_size, value_size);
  uint8_t* r = t ? Find(t, map, key, key_size) : nullptr;
  return r ? r + sizeof(Header) + Align8(key_size) : nullptr;
}

int64_t ThreadEntries::Update(const void* map, const void* key, const void* value, uint64_t flags,
                              uint32_t key_size, uint32_t value_size) {
  if (flags > BPF_EXIST) return -EINVAL;
  Table* t = Get(key_size, value_size);
  if (!t) return -ENOMEM;
  uint8_t* r = Find(t, map, key, key_size);
  if (r && flags == BPF_NOEXIST) return -EEXIST;
  if (!r && flags == BPF_EXIST) return -ENOENT;
  if (!r) {
    ++t->top;  // the oldest record is overwritten when the ring is full
    if (t->count < kCapacity) ++t->count;
    r = At(t, 0);
    *reinterpret_cast<Header*>(r) = {map, 1};
    std::memcpy(r + sizeof(Header), key, key_size);
  }
  std::memcpy(r + sizeof(Header) + Align8(key_size), value, value_size);
  return 0;
}

int64_t ThreadEntries::Delete(const void* map, const void* key, uint32_t key_size,
                              uint32_t value_size) {
  Table* t = Get(key_size, value_size);
  uint8_t* r = t ? Find(t, map, key, key_size) : nullptr;
  if (!r) return -ENOENT;
  reinterpret_cast<Header*>(r)->live = 0;
  // Holes at the top are popped: a return deletes the newest record, so the ring stays as
  // deep as the calls in flight.
  while (t->count > 0 && reinterpret_cast<const Header*>(At(t, 0))->live == 0) {
    --t->top;
    --t->count;
  }
  return 0;
}

}  // namespace fay::inproc
