#include "inproc/helpers.h"

#include <linux/bpf.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "common/clock.h"
#include "inproc/shm_maps.h"
#include "inproc/thread_entries.h"
#include "inproc/tsc_clock.h"

namespace fay::inproc {

namespace thread_state {
constinit thread_local Ids t_ids;
constinit thread_local uint32_t t_slot = 0;
constinit thread_local uint64_t t_cookie = 0;
constinit thread_local const void* t_entry_record = nullptr;
constinit thread_local uint64_t t_entry_slot = 0;
std::atomic<uint64_t> g_fork_generation{1};
namespace {
pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
}  // namespace

const Ids& Refresh() {
  Ids& t = t_ids;
  const uint64_t gen = g_fork_generation.load(std::memory_order_relaxed);
  // Registered on the first read of any thread, which is before any thread can hold ids a
  // fork would make stale.
  pthread_once(&g_atfork_once, [] {
    pthread_atfork(nullptr, nullptr,
                   [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
  });
  t.pid_tgid = (static_cast<uint64_t>(getpid()) << 32) | static_cast<uint32_t>(gettid());
  t.uid_gid = (static_cast<uint64_t>(getgid()) << 32) | getuid();
  prctl(PR_GET_NAME, t.comm);  // a thread renamed later keeps the name it had here
  t.generation = gen;
  return t;
}
}  // namespace thread_state

namespace {

using thread_state::t_cookie;
using thread_state::t_entry_record;
using thread_state::t_entry_slot;
using thread_state::t_ids;
using thread_state::t_slot;
using ThreadIds = thread_state::Ids;
const TscClock* g_clock = nullptr;

// Ids are read once per thread, and again after a fork: the child's copy of a thread's
// variables still holds its parent's.
const ThreadIds& Ids() {
  if (t_ids.generation == thread_state::g_fork_generation.load(std::memory_order_relaxed))
      [[likely]]
    return t_ids;
  return thread_state::Refresh();
}

// Copies from this process's memory without touching it directly: a bad address is an error
// (EFAULT), never a fault. What could not be read is zeroed, as the kernel's helper does.
int64_t ReadUser(void* dst, uint64_t size, uint64_t src) {
  if (size == 0) return 0;
  iovec local{dst, size}, remote{reinterpret_cast<void*>(src), size};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(size)) return 0;
  std::memset(dst, 0, size);
  return -EFAULT;
}

// Up to size bytes of a NUL-terminated string: its length with the NUL, or -EFAULT. Read a page
// at a time, so that a string ending just before an unmapped page reads whole.
int64_t ReadUserString(char* dst, uint64_t size, uint64_t src) {
  if (size == 0) return -EINVAL;
  uint64_t done = 0;
  while (done < size - 1) {
    const uint64_t page_left = 4096 - ((src + done) & 4095);
    const uint64_t want = std::min(page_left, size - 1 - done);
    iovec local{dst + done, want}, remote{reinterpret_cast<void*>(src + done), want};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (done == 0) {
        dst[0] = '\0';
        return -EFAULT;
      }
      break;
    }
    const void* nul = std::memchr(dst + done, '\0', static_cast<size_t>(n));
    if (nul) return static_cast<const char*>(nul) - dst + 1;
    done += static_cast<uint64_t>(n);
  }
  dst[done] = '\0';
  return static_cast<int64_t>(done + 1);
}

const ShmMap* MapOf(uint64_t a) {
  return reinterpret_cast<const ShmMap*>(a);
}

// A key of a thread-keyed map that starts with this thread's pid_tgid: this thread's alone.
// Any other key (none in fay's programs) goes to the shared table, so either way the map
// answers as the kernel's does.
bool Mine(const ShmMap* m, const void* key) {
  if (!m->thread_keyed() || m->shape().key_size < 8) return false;
  uint64_t first;
  std::memcpy(&first, key, 8);
  return first == Ids().pid_tgid;
}

// The entry record the return being probed carries, when `key` (already this thread's) names
// its slot: {pid_tgid, slot}, as the exit program builds it.
const void* ServedRecord(const ShmMap* m, const void* key) {
  if (!t_entry_record || m->shape().key_size < 16 || m->shape().value_size != 56) return nullptr;
  uint64_t slot;
  std::memcpy(&slot, static_cast<const uint8_t*>(key) + 8, 8);
  // Above bit 48 the key names its probe (bpf/codegen/codegen.h): every probe of this function
  // reads the one record its return keeps.
  slot &= (uint64_t{1} << 48) - 1;
  return slot == t_entry_slot ? t_entry_record : nullptr;
}

}  // namespace

void SetTscClock(const TscClock* clock) {
  g_clock = clock;
}

// Where t_slot is from the thread pointer: the same in every thread, as the variable is in
// the static TLS block (this library is built initial-exec). 0 when it does not fit a disp32.
int64_t SlotTlsOffset() {
  uintptr_t tp;
  asm("mov %%fs:0, %0" : "=r"(tp));
  const int64_t off = static_cast<int64_t>(reinterpret_cast<uintptr_t>(&t_slot) - tp);
  return off >= INT32_MIN && off <= INT32_MAX ? off : 0;
}

uint64_t ProbeClockNs() {
  uint64_t ns = g_clock ? ReadTscClock(*g_clock) : 0;
  if (ns == 0) ns = ClockNs(CLOCK_MONOTONIC);  // the vDSO: no system call
  // fay's refreshed mapping may sit a few hundred ns from the last: a thread never sees its
  // clock go back, so a latency is never negative.
  static constinit thread_local uint64_t t_last = 0;
  if (ns < t_last) ns = t_last;
  t_last = ns;
  return ns;
}

Helpers RuntimeHelpers() {
  Helpers h;
  h.array_layout = [](uint64_t map, ArrayLayout* out) { return MapOf(map)->Layout(out); };
  h.slot_tls_offset = SlotTlsOffset();
  auto& f = h.fns;
  f[BPF_FUNC_map_lookup_elem] = [](void*, const uint64_t a[5]) {
    const ShmMap* m = MapOf(a[0]);
    const void* key = reinterpret_cast<const void*>(a[1]);
    if (Mine(m, key)) {
      // Read-only use only: fay's exit programs copy the record out and delete it.
      if (const void* served = ServedRecord(m, key)) return reinterpret_cast<uint64_t>(served);
      return reinterpret_cast<uint64_t>(
          ThreadEntries::Lookup(m, key, m->shape().key_size, m->shape().value_size));
    }
    return reinterpret_cast<uint64_t>(m->Lookup(key, t_slot));
  };
  f[BPF_FUNC_map_update_elem] = [](void*, const uint64_t a[5]) {
    const ShmMap* m = MapOf(a[0]);
    const void* key = reinterpret_cast<const void*>(a[1]);
    const void* value = reinterpret_cast<const void*>(a[2]);
    if (Mine(m, key))
      return static_cast<uint64_t>(
          ThreadEntries::Update(m, key, value, a[3], m->shape().key_size, m->shape().value_size));
    return static_cast<uint64_t>(m->Update(key, value, a[3], t_slot));
  };
  f[BPF_FUNC_map_delete_elem] = [](void*, const uint64_t a[5]) {
    const ShmMap* m = MapOf(a[0]);
    const void* key = reinterpret_cast<const void*>(a[1]);
    if (Mine(m, key)) {
      if (ServedRecord(m, key)) return uint64_t{0};  // it goes with the shadow frame
      return static_cast<uint64_t>(
          ThreadEntries::Delete(m, key, m->shape().key_size, m->shape().value_size));
    }
    return static_cast<uint64_t>(m->Delete(key, t_slot));
  };
  f[BPF_FUNC_ktime_get_ns] = [](void*, const uint64_t*) { return ProbeClockNs(); };
  f[BPF_FUNC_get_prandom_u32] = [](void*, const uint64_t*) {
    thread_local uint64_t x = 0x9e3779b97f4a7c15ull ^ reinterpret_cast<uint64_t>(&x);
    x ^= x << 13;  // xorshift64: sampling needs speed, not secrecy
    x ^= x >> 7;
    x ^= x << 17;
    return x & 0xffffffffu;
  };
  f[BPF_FUNC_get_attach_cookie] = [](void*, const uint64_t*) { return t_cookie; };
  f[BPF_FUNC_get_smp_processor_id] = [](void*, const uint64_t*) { return uint64_t{t_slot}; };
  f[BPF_FUNC_get_current_pid_tgid] = [](void*, const uint64_t*) { return Ids().pid_tgid; };
  f[BPF_FUNC_get_current_uid_gid] = [](void*, const uint64_t*) { return Ids().uid_gid; };
  f[BPF_FUNC_get_current_comm] = [](void*, const uint64_t a[5]) {
    if (a[1] == 0) return static_cast<uint64_t>(-EINVAL);
    const ThreadIds& t = Ids();
    auto* dst = reinterpret_cast<char*>(a[0]);
    size_t n = std::min<uint64_t>(a[1], sizeof t.comm);
    std::memcpy(dst, t.comm, n);
    dst[n - 1] = '\0';
    return uint64_t{0};
  };
  f[BPF_FUNC_probe_read_user] = [](void*, const uint64_t a[5]) {
    return static_cast<uint64_t>(ReadUser(reinterpret_cast<void*>(a[0]), a[1], a[2]));
  };
  f[BPF_FUNC_probe_read_user_str] = [](void*, const uint64_t a[5]) {
    return static_cast<uint64_t>(ReadUserString(reinterpret_cast<char*>(a[0]), a[1], a[2]));
  };
  return h;
}

}  // namespace fay::inproc
