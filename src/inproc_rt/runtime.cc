// libfay_inproc.so: the runtime fay preloads into a traced command (and, through its
// environment, into every process the command starts) to run uprobe probes inside the process
// instead of through the kernel (docs/INPROCESS.md). Before main it maps the region fay filled
// (src/inproc/region.h), finds the query's functions in the files this process has mapped,
// patches them, and from then on every call runs the query's program, the one the kernel's
// verifier accepted, in the interpreter, with the maps in the region that fay reads.
//
// It never fails the program: whatever it cannot do it counts in the region and leaves
// undone, and the process runs as it would have.
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inproc/context_span.h"
#include "inproc/helpers.h"
#include "inproc/interpreter.h"
#include "inproc/patcher.h"
#include "inproc/region.h"
#include "inproc/shm_maps.h"

namespace fay::inproc {
namespace {

struct Run {
  const Interpreter* program;
  uint64_t cookie;
  // The pt_regs fields it reads (context_span.h), every bit set when that is not known.
  uint32_t ctx_fields;
};

// One patched function: what runs at its entry and at its return.
struct Site {
  uint64_t address = 0;
  uint64_t size = 0;
  std::vector<Run> on_entry, on_return;
  // Every entry program reads only argument registers: they run on the trampoline's saved
  // registers, with no pt_regs built.
  bool entry_args_only = false;
  // The pt_regs fields the return programs read: only those are filled for them.
  uint32_t return_fields = 0;
  // The return probe keeps the entry record the return programs read (kRegionPatchEntryRecord),
  // in place of the entry program that would store it.
  bool keeps_record = false;
  std::string path;
};

struct Runtime {
  RegionHeader* header = nullptr;
  const RegionPatch* patch_table = nullptr;
  std::map<int, ShmMap> maps;  // by fay's map slot
  std::vector<Interpreter> programs;
  std::vector<uint32_t> ctx_fields;  // by program: ContextFieldsRead, or every bit
  std::vector<std::unique_ptr<Site>> sites;
  std::vector<std::unique_ptr<EntryPatch>> patches;
};

Runtime* g_runtime = nullptr;
thread_local bool t_in_probe = false;

// x86-64 struct pt_regs, as a uprobe program's context.
struct PtRegs {
  uint64_t r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags,
      sp, ss;
};

static_assert(sizeof(PtRegs) == 8 * kPtRegsFields);

[[gnu::always_inline]] inline bool Live(const RegionHeader* h) {
  if (h->stop.load(std::memory_order_relaxed)) return false;
  // The clock is read every 64th run of a thread: a busy function stops within a second of
  // fay's death plus 63 runs, and pays a clock read (20 ns here) a 64th of the time.
  thread_local uint32_t runs = 0;
  thread_local bool live = true;
  if (runs++ % 64 != 0) return live;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // the vDSO: a few ns
  uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + ts.tv_nsec;
  uint64_t beat = h->heartbeat_ns.load(std::memory_order_relaxed);
  // fay gone (killed): the probes stop costing anything but this check.
  live = now < beat + kHeartbeatTimeoutNs;
  return live;
}

// fay's heartbeat is stale: the run is skipped, and counted where fay will see it if it is
// only slow.
[[gnu::always_inline]] inline bool LiveOrCount(RegionHeader* h) {
  if (Live(h)) return true;
  if (!h->stop.load(std::memory_order_relaxed)) h->dropped.fetch_add(1, std::memory_order_relaxed);
  return false;
}

// A probe run holds a slot for its whole run, as a program holds its CPU in the kernel: the
// per-CPU maps' copy it writes is its alone. A thread starts from its own slot, so threads
// rarely meet.
constexpr uint32_t kNoSlot = ~0u;
uint32_t TakeSlot(RegionHeader* h, uint32_t tid) {
  const uint32_t n = h->slots;
  // The thread's own slot, computed once (a division costs more than the rest of the claim);
  // recomputed when the tid changes, in a forked child.
  thread_local uint32_t t_first_tid = 0, t_first = 0;
  if (t_first_tid != tid || t_first >= n) {
    t_first = tid % n;
    t_first_tid = tid;
  }
  for (int pass = 0; pass < 64; ++pass)
    for (uint32_t i = 0, s = t_first; i < n; ++i, s = s + 1 == n ? 0 : s + 1) {
      uint32_t free = 0;
      // The holder's id: fay frees the slot of a thread that died holding it.
      if (h->slot[s].held.load(std::memory_order_relaxed) == 0 &&
          h->slot[s].held.compare_exchange_strong(free, tid, std::memory_order_acquire))
        return s;
    }
  return kNoSlot;
}

// The locked compare-exchange of a claim was about 40% of a probed call. So a thread keeps
// one of the first owned_slots slots for its life and marks a run in it with plain stores;
// fay, before it reads the maps, makes every thread's stores visible with a membarrier that
// this process registered for (WaitForRunsInFlight). Threads past those slots, or of a
// process that may not own one (OwnershipAllowed), claim a slot per run as before.
struct OwnedSlot {
  uint32_t tid = 0;  // the thread the claim was for: a forked child's differs
  uint32_t slot = kNoSlot;
  uint32_t retry = 0;  // runs until a thread that found none free looks again
};
constinit thread_local OwnedSlot t_owned;

// Whether this process may own slots, decided once per process (a forked child decides
// again): fay must have set some aside, the process must be in fay's pid namespace (fay frees
// a dead owner's slot by its thread id, as fay's namespace numbers it), and registered for
// fay's membarrier. Decided at the runtime's start, where registering is cheap (one thread).
bool OwnershipAllowed(const RegionHeader* h) {
  static std::atomic<uint32_t> decided_pid{0};
  static std::atomic<bool> allowed{false};
  const auto pid = static_cast<uint32_t>(thread_state::t_ids.pid_tgid >> 32);
  if (decided_pid.load(std::memory_order_acquire) == pid)
    return allowed.load(std::memory_order_relaxed);
  struct stat ns {};
  const bool ok = h->owned_slots > 0 && stat("/proc/self/ns/pid", &ns) == 0 &&
                  ns.st_dev == h->pid_ns_dev && ns.st_ino == h->pid_ns_ino &&
                  syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  allowed.store(ok, std::memory_order_relaxed);
  decided_pid.store(pid, std::memory_order_release);
  return ok;
}

void OwnSlot(RegionHeader* h, uint32_t tid) {
  t_owned = {tid, kNoSlot, 1024};
  const uint32_t n = h->owned_slots;
  if (n == 0 || !OwnershipAllowed(h)) return;
  for (uint32_t i = 0, s = tid % n; i < n; ++i, s = s + 1 == n ? 0 : s + 1) {
    uint32_t held = h->slot[s].held.load(std::memory_order_relaxed);
    // Already this thread's: its id kept across an exec, whose new image starts afresh.
    const bool mine = held == (tid | kSlotOwned);
    if (mine || (held == 0 && h->slot[s].held.compare_exchange_strong(held, tid | kSlotOwned,
                                                                      std::memory_order_acquire))) {
      // Even: no run of this thread is in flight (one cut short by an exec or a death).
      const uint32_t runs = h->slot[s].runs.load(std::memory_order_relaxed);
      if (runs & 1) h->slot[s].runs.store(runs + 1, std::memory_order_relaxed);
      t_owned.slot = s;
      return;
    }
  }
}

[[gnu::always_inline]] inline void RunPrograms(const std::vector<Run>& runs, uint64_t ctx,
                                               uint32_t slot) {
  SetCurrentSlot(slot);
  for (const Run& r : runs) {
    SetCurrentCookie(r.cookie);
    r.program->Run(ctx);
  }
}

[[gnu::always_inline]] inline void RunAll(const std::vector<Run>& runs, uint64_t ctx) {
  RegionHeader* h = g_runtime->header;
  const uint32_t tid = CurrentTid();
  // A slot fay gave back (it saw its owner's id gone) is claimed again rather than shared.
  if (t_owned.tid != tid ||
      (t_owned.slot == kNoSlot ? --t_owned.retry == 0
                               : h->slot[t_owned.slot].held.load(std::memory_order_relaxed) !=
                                     (tid | kSlotOwned))) [[unlikely]]
    OwnSlot(h, tid);
  if (const uint32_t slot = t_owned.slot; slot != kNoSlot) [[likely]] {
    std::atomic<uint32_t>& count = h->slot[slot].runs;
    const uint32_t at = count.load(std::memory_order_relaxed);
    count.store(at + 1, std::memory_order_relaxed);
    // The stop is read again inside the marked run: fay stores it, then looks for runs in
    // flight, so one of the two sees the other.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!h->stop.load(std::memory_order_relaxed)) RunPrograms(runs, ctx, slot);
    count.store(at + 2, std::memory_order_release);
    return;
  }
  const uint32_t slot = TakeSlot(h, tid);
  if (slot == kNoSlot) {
    h->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // As in an owned slot: the claim is a full barrier, then the stop is read again.
  if (!h->stop.load(std::memory_order_relaxed)) RunPrograms(runs, ctx, slot);
  h->slot[slot].held.store(0, std::memory_order_release);
}

void OnEntry(void* context, const EntryRegs* regs) {
  const Site* site = static_cast<const Site*>(context);
  // A probed function the probe itself calls (clock_gettime, malloc, memcpy) runs unprobed, as
  // a kernel uprobe does not fire inside a BPF program: the flag is set before any call.
  if (t_in_probe) return;
  t_in_probe = true;
  if (site->on_entry.empty() || !LiveOrCount(g_runtime->header)) {
    t_in_probe = false;
    return;
  }
  if (site->entry_args_only) {
    RunAll(site->on_entry, reinterpret_cast<uint64_t>(regs) - kPtRegsR11);
    t_in_probe = false;
    return;
  }
  // Every field written one by one: `PtRegs pt{}` became a `rep stos`, a fifth of a run.
  // Registers the trampoline does not save read as 0, as before.
  PtRegs pt;
  pt.r15 = pt.r14 = pt.r13 = pt.r12 = pt.bp = pt.bx = 0;
  pt.di = regs->rdi;
  pt.si = regs->rsi;
  pt.dx = regs->rdx;
  pt.cx = regs->rcx;
  pt.r8 = regs->r8;
  pt.r9 = regs->r9;
  pt.r10 = regs->r10;
  pt.r11 = regs->r11;
  pt.ax = regs->rax;
  pt.orig_ax = pt.cs = pt.flags = pt.ss = 0;
  pt.ip = site->address;
  // Where the return address sits, right above what the trampoline pushed: the entry's rsp.
  pt.sp = reinterpret_cast<uint64_t>(regs) + sizeof(EntryRegs);
  RunAll(site->on_entry, reinterpret_cast<uint64_t>(&pt));
  t_in_probe = false;
}

void OnReturn(void* context, uint64_t ret, const EntryRecord* entry, uint64_t sp) {
  const Site* site = static_cast<const Site*>(context);
  if (t_in_probe) return;
  t_in_probe = true;
  if (!LiveOrCount(g_runtime->header)) {
    t_in_probe = false;
    return;
  }
  // Only the fields the return programs read are written (typically ax and sp): registers a
  // return does not keep read as 0, as before.
  PtRegs pt;
  auto* field = reinterpret_cast<uint64_t*>(&pt);
  for (uint32_t f = site->return_fields; f != 0; f &= f - 1) field[__builtin_ctz(f)] = 0;
  pt.ax = ret;
  pt.sp = sp;
  pt.ip = site->address;
  // The exit programs' key: this thread's id and the slot that held the return address.
  SetCurrentEntryRecord(entry, sp - 8);
  RunAll(site->on_return, reinterpret_cast<uint64_t>(&pt));
  SetCurrentEntryRecord(nullptr, 0);
  t_in_probe = false;
}

void NoteRefusal(RegionHeader* h, const std::string& why) {
  h->refused.fetch_add(1, std::memory_order_relaxed);
  uint32_t no = 0;
  if (h->error_claimed.compare_exchange_strong(no, 1)) {
    std::snprintf(h->first_error, sizeof h->first_error, "%s", why.c_str());
  }
}

// The region, from the descriptor fay left the command, or else through fay's own.
RegionHeader* MapRegion(const char* env) {
  int fd = -1, fay_pid = 0;
  if (std::sscanf(env, "%d,%d", &fd, &fay_pid) != 2) return nullptr;
  auto try_fd = [](int f) -> RegionHeader* {
    RegionHeader head;
    if (pread(f, &head, sizeof head, 0) != static_cast<ssize_t>(sizeof head)) return nullptr;
    if (head.magic != kRegionMagic || head.version != kRegionVersion) return nullptr;
    void* p = mmap(nullptr, head.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    return p == MAP_FAILED ? nullptr : static_cast<RegionHeader*>(p);
  };
  if (RegionHeader* h = try_fd(fd)) {
    // Not needed past this point; the program's descriptors are its own again.
    close(fd);
    return h;
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", fay_pid, fd);
  int f = open(path, O_RDWR | O_CLOEXEC);
  if (f < 0) return nullptr;
  RegionHeader* h = try_fd(f);
  close(f);
  return h;
}

// Where this process mapped the file offset `off` of file (dev, ino) executable, or 0.
uint64_t AddressOf(uint64_t dev, uint64_t ino, const char* file, uint64_t off) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return 0;
  char line[512];
  uint64_t found = 0;
  while (!found && std::fgets(line, sizeof line, f)) {
    unsigned long start, end, pgoff, inode;
    unsigned maj, min;
    char perms[8];
    int name_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, perms, &pgoff, &maj, &min,
                    &inode, &name_at) != 7)
      continue;
    if (perms[2] != 'x') continue;
    // By device and inode, as a uprobe is placed; by path where the maps name another device
    // for the same file (overlayfs before 6.8, btrfs subvolumes).
    std::string name = name_at ? std::string(line + name_at) : "";
    if (!name.empty() && name.back() == '\n') name.pop_back();
    if ((inode != ino || makedev(maj, min) != dev) && name != file) continue;
    if (off >= pgoff && off < pgoff + (end - start)) found = start + (off - pgoff);
  }
  std::fclose(f);
  return found;
}

// Patches the region's functions this process maps, each address once. Called by Start: the
// process's one thread, or every other thread stopped by fay. Libraries a process loads later
// with dlopen are not followed: fay keeps probes on them on the kernel's path (host.cc).
void PatchMapped(Runtime* rt) {
  RegionHeader* h = rt->header;
  const bool debug = getenv("FAY_INPROC_DEBUG") != nullptr;
  std::map<uint64_t, Site*> by_address;
  for (uint32_t i = 0; i < h->patch_count; ++i) {
    const RegionPatch& p = rt->patch_table[i];
    uint64_t at = AddressOf(p.dev, p.ino, p.file, p.file_offset);
    if (!at || p.program >= rt->programs.size()) continue;  // not in this process
    Site*& site = by_address[at];
    if (!site) {
      rt->sites.push_back(std::make_unique<Site>());
      site = rt->sites.back().get();
      site->address = at;
      site->size = p.size;
      site->path = p.path;
    }
    if (p.flags & kRegionPatchEntryRecord)
      site->keeps_record = true;
    else
      (p.is_return ? site->on_return : site->on_entry)
          .push_back({&rt->programs[p.program], p.cookie, rt->ctx_fields[p.program]});
  }
  for (auto& [at, site] : by_address) {
    // The fields from r11 to di: what EntryRegs holds in pt_regs's order.
    constexpr uint32_t kArgFields = FieldsWithin(kPtRegsR11, kPtRegsDiEnd);
    site->entry_args_only =
        std::all_of(site->on_entry.begin(), site->on_entry.end(),
                    [&](const Run& r) { return (r.ctx_fields & ~kArgFields) == 0; });
    for (const Run& r : site->on_return) site->return_fields |= r.ctx_fields;
    if (debug) std::fprintf(stderr, "patching %s at %lx\n", site->path.c_str(), (unsigned long)at);
    auto patch = site->on_return.empty()
                     ? EntryPatch::Install(site->address, site->size, &OnEntry, site)
                     : EntryPatch::InstallReturn(site->address, site->size,
                                                 site->on_entry.empty() ? nullptr : &OnEntry,
                                                 &OnReturn, site, site->keeps_record);
    if (!patch.ok()) {
      NoteRefusal(h, site->path + ": " + patch.status().message());
      continue;
    }
    rt->patches.push_back(std::move(patch).value());
    h->patched.fetch_add(1, std::memory_order_relaxed);
  }
}

// `spec`: "FD,PID" as kRegionEnv holds it.
void Start(const char* spec) {
  // Nothing this thread calls while it patches is probed: a patched function the patching
  // itself uses (mmap, mprotect, memcpy) runs as it was.
  t_in_probe = true;
  struct Done {
    ~Done() { t_in_probe = false; }
  } done;
  if (!spec) return;
  RegionHeader* h = MapRegion(spec);
  if (!h) return;
  h->processes.fetch_add(1, std::memory_order_relaxed);
  auto rt = std::make_unique<Runtime>();
  rt->header = h;
  auto* base = reinterpret_cast<uint8_t*>(h);
  const auto* maps = reinterpret_cast<const RegionMap*>(base + h->maps_off);
  for (uint32_t i = 0; i < h->map_count; ++i) {
    const RegionMap& m = maps[i];
    MapShape shape{static_cast<bpf_map_type>(m.type), m.key_size, m.value_size, m.max_entries};
    auto placed = ShmMap::Place(shape, m.slots, {base + m.offset, m.bytes});
    if (!placed.ok()) return NoteRefusal(h, placed.status().message());
    if (m.flags & kRegionMapThreadKeyed) placed->SetThreadKeyed();
    rt->maps.emplace(m.id, *placed);
  }
  const auto* progs = reinterpret_cast<const RegionProgram*>(base + h->programs_off);
  for (uint32_t i = 0; i < h->program_count; ++i) {
    const auto* insns = reinterpret_cast<const bpf_insn*>(base + progs[i].insns_off);
    auto interp = Interpreter::Prepare(
        std::vector<bpf_insn>(insns, insns + progs[i].insn_count),
        [&rt](int id) {
          auto it = rt->maps.find(id);
          return it == rt->maps.end() ? uint64_t{0} : reinterpret_cast<uint64_t>(&it->second);
        },
        RuntimeHelpers(), /*translate=*/getenv("FAY_INPROC_INTERPRET") == nullptr);
    if (!interp.ok()) return NoteRefusal(h, interp.status().message());
    if (!interp->translated()) h->interpreted.fetch_add(1, std::memory_order_relaxed);
    rt->programs.push_back(std::move(interp).value());
    rt->ctx_fields.push_back(
        ContextFieldsRead(insns, progs[i].insn_count).value_or((1u << kPtRegsFields) - 1));
  }
  g_runtime = rt.get();
  SetTscClock(&h->clock);
  SetEntryClock(&ProbeClockNs);
  // Before any probed call: registering for fay's membarrier is cheapest while this process
  // has one thread (-c's start), and never then on a probed call's path.
  (void)CurrentTid();
  (void)OwnershipAllowed(h);
  rt->patch_table = reinterpret_cast<const RegionPatch*>(base + h->patches_off);
  PatchMapped(rt.get());
  // Kept for the life of the process: a thread may be inside a trampoline at any moment,
  // until exit, so nothing of it is ever freed.
  (void)rt.release();
}

}  // namespace
}  // namespace fay::inproc

// Before main, with the program's one thread: nothing else runs the bytes being patched.
__attribute__((constructor)) static void FayInprocStart() {
  fay::inproc::Start(getenv(fay::inproc::kRegionEnv));
}

// fay -p calls these in a running process it holds stopped with ptrace (src/inproc/inject.h),
// after loading the library with dlopen: every other thread is stopped while they patch.
// Returns the functions patched, or -1 when the region could not be mapped.
extern "C" __attribute__((visibility("default"))) long fay_inproc_attach(const char* spec) {
  using namespace fay::inproc;
  Runtime* before = g_runtime;
  Start(spec);
  if (g_runtime == before) return -1;
  return static_cast<long>(g_runtime->patches.size());
}

// Puts back every patched function's bytes (the trampolines stay, for a thread stopped inside
// one) and stops the probes. Returns the functions restored.
extern "C" __attribute__((visibility("default"))) long fay_inproc_detach() {
  using namespace fay::inproc;
  if (!g_runtime) return 0;
  long restored = 0;
  for (auto& p : g_runtime->patches) restored += p->Remove().ok();
  g_runtime->header->stop.store(1);
  return restored;
}
