#include "probes/mmap_events.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <time.h>

#include "common/clock.h"
#include "probes/symbolizer.h"

namespace fay {

namespace {

constexpr size_t kDataPages = 64;  // 256 KiB a CPU: a burst of thousands of execs between drains

int OnlineCpus() {
  long n = sysconf(_SC_NPROCESSORS_CONF);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

struct MmapEvents::Ring {
  UniqueFd fd;
  void* base = nullptr;
  size_t bytes = 0;  // the whole mapping: the metadata page and the data pages
  ~Ring() {
    if (base) munmap(base, bytes);
  }
  perf_event_mmap_page* meta() const { return static_cast<perf_event_mmap_page*>(base); }
  const uint8_t* data() const { return static_cast<const uint8_t*>(base) + page(); }
  static size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
};

Expected<std::unique_ptr<MmapEvents>> MmapEvents::Open() {
  std::unique_ptr<MmapEvents> ev(new MmapEvents());
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.mmap = 1;   // executable mappings
  attr.mmap2 = 1;  // with the file's inode, to check the file is still the one mapped
  attr.comm = 1;
  attr.comm_exec = 1;  // an exec replaces the process's mappings
  attr.task = 1;       // a forked process starts with its parent's
  attr.sample_id_all = 1;
  attr.sample_type = PERF_SAMPLE_TIME;  // every record ends with its time: merged in order
  attr.use_clockid = 1;                 // one clock for every CPU's records, and fay's
  attr.clockid = CLOCK_MONOTONIC;
  attr.exclude_kernel = 1;
  const size_t page = Ring::page();
  for (int cpu = 0; cpu < OnlineCpus(); ++cpu) {
    auto r = std::make_unique<Ring>();
    r->fd.reset(
        static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)));
    if (!r->fd) {
      if (errno == ENODEV || errno == EINVAL) continue;  // a CPU that is not there
      return ErrnoError(fmt::format("perf_event_open of the mapping records on CPU {}", cpu));
    }
    r->bytes = page * (1 + kDataPages);
    void* p = mmap(nullptr, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd.get(), 0);
    if (p == MAP_FAILED) return ErrnoError("mapping the ring of the mapping records");
    r->base = p;
    ev->rings_.push_back(std::move(r));
  }
  if (ev->rings_.empty()) return Error(Code::kUnsupported, "no CPU took a mapping-records event");
  return ev;
}

MmapEvents::~MmapEvents() = default;

void MmapEvents::Drain(Symbolizer& sym) {
  // Only what happened before this moment is applied now; anything later waits for the next
  // drain, by when every CPU's ring holds what came before it.
  const uint64_t cut = ClockNs(CLOCK_MONOTONIC);
  std::vector<Pending> records = std::move(pending_);
  pending_.clear();
  for (auto& r : rings_) {
    perf_event_mmap_page* m = r->meta();
    const uint64_t size = m->data_size ? m->data_size : Ring::page() * kDataPages;
    const uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = m->data_tail;
    while (tail + sizeof(perf_event_header) <= head) {
      perf_event_header h;
      auto copy = [&](uint64_t at, void* out, size_t n) {
        for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(out)[i] = r->data()[(at + i) % size];
      };
      copy(tail, &h, sizeof h);
      if (h.size < sizeof h || tail + h.size > head) break;
      Pending rec;
      rec.bytes.resize(h.size);
      copy(tail, rec.bytes.data(), h.size);
      tail += h.size;
      if (h.type == PERF_RECORD_LOST) {
        uint64_t lost = 0;
        if (h.size >= sizeof h + 16) std::memcpy(&lost, rec.bytes.data() + sizeof h + 8, 8);
        lost_ += lost;
        continue;
      }
      if (h.type != PERF_RECORD_MMAP2 && h.type != PERF_RECORD_COMM && h.type != PERF_RECORD_FORK)
        continue;
      if (h.size < sizeof h + 8) continue;
      std::memcpy(&rec.time, rec.bytes.data() + h.size - 8, 8);
      records.push_back(std::move(rec));
    }
    __atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
  }
  // The CPUs' rings interleave: an exec on one CPU comes before the mappings its program makes
  // on another.
  std::stable_sort(records.begin(), records.end(),
                   [](const Pending& a, const Pending& b) { return a.time < b.time; });
  for (Pending& rec : records) {
    if (rec.time > cut) {
      pending_.push_back(std::move(rec));
      continue;
    }
    perf_event_header h;
    std::memcpy(&h, rec.bytes.data(), sizeof h);
    const uint8_t* body = rec.bytes.data() + sizeof h;
    const size_t body_size = h.size - sizeof h - 8;  // less the time
    uint32_t pid, tid;
    if (body_size < 8) continue;
    std::memcpy(&pid, body, 4);
    std::memcpy(&tid, body + 4, 4);
    if (h.type == PERF_RECORD_MMAP2) {
      // {pid, tid, addr, len, pgoff, maj, min, ino, ino_generation, prot, flags, filename}
      constexpr size_t kName = 8 + 8 * 3 + 8 + 8 + 8 + 8;
      if (body_size <= kName || (h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) continue;
      uint64_t addr, len, pgoff, ino;
      std::memcpy(&addr, body + 8, 8);
      std::memcpy(&len, body + 16, 8);
      std::memcpy(&pgoff, body + 24, 8);
      std::memcpy(&ino, body + 40, 8);
      const char* name = reinterpret_cast<const char*>(body + kName);
      std::string path(name, strnlen(name, body_size - kName));
      // [vdso], and perf's "//anon" for anonymous executable memory (a JIT's code).
      if (path.empty() || path[0] != '/' || path.compare(0, 2, "//") == 0) continue;
      sym.OnMmap(static_cast<int32_t>(pid), addr, len, pgoff, ino, path);
    } else if (h.type == PERF_RECORD_COMM) {
      if (h.misc & PERF_RECORD_MISC_COMM_EXEC) sym.OnExec(static_cast<int32_t>(pid));
    } else if (h.type == PERF_RECORD_FORK) {
      // {pid, ppid, tid, ptid, time}: a new process when pid differs from its parent's.
      uint32_t ppid;
      std::memcpy(&ppid, body + 4, 4);
      if (pid != ppid) sym.OnFork(static_cast<int32_t>(pid), static_cast<int32_t>(ppid));
    }
  }
}

}  // namespace fay
