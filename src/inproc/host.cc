#include "inproc/host.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/limits.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "bpf/codegen/codegen.h"
#include "bpf/map.h"
#include "bpf/program.h"
#include "common/clock.h"
#include "inproc/helpers.h"
#include "inproc/interpreter.h"
#include "inproc/patchability.h"
#include "inproc/patcher.h"
#include "inproc/start_files.h"

namespace fay::inproc {
namespace {

size_t Align(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

std::string DefaultLibrary() {
  char exe[PATH_MAX] = {};
  if (readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) return "";
  std::string dir(exe);
  dir.resize(dir.rfind('/'));
  for (const std::string& p : {dir + "/libfay_inproc.so", dir + "/../lib/fay/libfay_inproc.so"})
    if (access(p.c_str(), R_OK) == 0) return p;
  return "";
}

bool HasChildren(pid_t pid) {
  bool any = false;
  if (DIR* d = opendir(fmt::format("/proc/{}/task", pid).c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, e->d_name));
      pid_t c;
      if (in >> c) any = true;
    }
    closedir(d);
  }
  return any;
}

bool IsUprobe(const ProbeInfo& p) {
  return p.kind == ProbeKind::kUprobe || p.kind == ProbeKind::kUretprobe;
}

bool IsUprobeProgram(const bpf::GeneratedProgram& g) {
  return (g.attach.kind == AttachKind::kUprobe || g.attach.kind == AttachKind::kUprobeMulti) &&
         (g.attach.role == ProgRole::kMain || g.attach.role == ProgRole::kEntry);
}

std::vector<int> ProbesOf(const Attachment& a) {
  if (a.kind == AttachKind::kUprobeMulti) return a.probes;
  return {a.probe_index};
}

}  // namespace

Expected<UprobeMode> ParseUprobeMode(const std::string& text) {
  if (text == "auto") return UprobeMode::kAuto;
  if (text == "inprocess") return UprobeMode::kInProcess;
  if (text == "kernel") return UprobeMode::kKernel;
  return Error(Code::kInvalidArgument,
               fmt::format("--uprobes '{}': expected auto, inprocess or kernel", text));
}

Expected<std::unique_ptr<InprocHost>> InprocHost::Create(const Plan& plan,
                                                         const HostOptions& options,
                                                         std::vector<std::string>* notes) {
  const size_t n = plan.probes.size();
  bool any_uprobe = std::any_of(plan.probes.begin(), plan.probes.end(), IsUprobe);
  if (options.mode == UprobeMode::kKernel || !any_uprobe) return std::unique_ptr<InprocHost>();
  const bool strict = options.mode == UprobeMode::kInProcess;
  // A reason that keeps every uprobe of the query on the kernel's path.
  auto all_kernel = [&](const std::string& why) -> Expected<std::unique_ptr<InprocHost>> {
    if (strict) return Error(Code::kUnsupported, "--uprobes inprocess: " + why);
    // Without -c or -p there is no process to run in: the kernel's path is the only one, and
    // nothing is worth saying.
    if (!options.command_exe.empty() || options.pid)
      notes->push_back("uprobes on the kernel's path: " + why);
    return std::unique_ptr<InprocHost>();
  };
  if (options.command_exe.empty() && !options.pid)
    return all_kernel("in-process probes need the process they run in (-c or -p)");
  if (plan.mode != PlanMode::kAggregate)
    return all_kernel("a select query's rows (a ring buffer) are not kept in the process yet");
  for (const Slot& s : plan.keys)
    if (s.type.kind == TypeKind::kStack)
      return all_kernel("stack keys (ustack) are read by the kernel only");
  if (const Field* f =
          FindPlanField(plan, [](FieldSource s) { return s == FieldSource::kTaskBtf; }))
    return all_kernel(fmt::format("{} is the kernel's task, which only the kernel reads", f->name));
  std::string library =
      options.runtime_library.empty() ? DefaultLibrary() : options.runtime_library;
  if (library.empty()) return all_kernel("the runtime library libfay_inproc.so is not next to fay");
  // -p loads the runtime into that one process: its forks keep the patches, but children it
  // already has would be missed.
  if (options.pid && HasChildren(options.pid))
    return all_kernel(fmt::format(
        "process {} has child processes, which in-process probes loaded into it would miss",
        options.pid));
  const std::string exe =
      options.pid ? fmt::format("/proc/{}/exe", options.pid) : options.command_exe;
  // The loader ignores LD_PRELOAD for a program that gains privileges at exec (AT_SECURE): a
  // set-user-ID or set-group-ID file of another owner, or file capabilities for a non-root fay.
  if (struct stat st{};
      options.command_exe.size() && stat(exe.c_str(), &st) == 0 &&
      (((st.st_mode & S_ISUID) && st.st_uid != getuid()) ||
       ((st.st_mode & S_ISGID) && st.st_gid != getgid()) ||
       (getuid() != 0 && getxattr(exe.c_str(), "security.capability", nullptr, 0) > 0)))
    return all_kernel(fmt::format(
        "{} gains privileges when it starts (set-user-ID, set-group-ID or file capabilities), "
        "so the loader will not preload the runtime into it",
        exe));
  // A static executable loads no preloaded library: the runtime would never start in it. (A
  // script starts an interpreter that loads it.)
  if (IsElf64(exe) && !IsProgram(exe))
    return all_kernel(
        fmt::format("{} is a static executable, which loads no runtime library",
                    options.pid ? fmt::format("process {}", options.pid) : options.command_exe));

  if (!plan.states.empty())
    return all_kernel("the query remembers state across probes, which the kernel keeps");
  if (!plan.tables.empty()) return all_kernel("several tables are kept by the kernel only");
  // The same plan compiled for the process: no scope (the runtime is only in the traced
  // processes), and the helpers a process has (no task_struct reads).
  bpf::CodegenOptions copt;
  FAY_ASSIGN_OR_RETURN(bpf::GeneratedQuery gen, bpf::Generate(plan, copt));
  for (int m : {bpf::kMapStacks, bpf::kMapRing})
    if (gen.maps[m].used) return all_kernel("the query needs a map the process does not keep");

  auto host = std::make_unique<InprocHost>(plan);
  host->library_ = library;
  host->in_process_.assign(n, false);
  // The files mapped from the start: a library outside them would be loaded later with
  // dlopen, which the runtime does not follow. Unknown (the loader could not list them): all.
  std::optional<std::set<FileId>> at_start;
  if (auto files = options.pid ? FilesMapped(options.pid) : FilesAtStart(exe); files.ok())
    at_start = std::move(files).value();
  for (size_t i = 0; i < n; ++i) {
    const ProbeInfo& p = plan.probes[i];
    if (!IsUprobe(p)) continue;
    if (auto id = IdOf(p.path);
        at_start && id.ok() && !at_start->count(*id) && (options.pid || !IsProgram(p.path))) {
      const std::string why = fmt::format(
          "{} is not mapped {}: a library loaded later with dlopen, which in-process probes do "
          "not follow",
          p.path,
          options.pid ? fmt::format("in process {}", options.pid)
                      : "when " + options.command_exe + " starts");
      if (strict)
        return Error(Code::kUnsupported, fmt::format("--uprobes inprocess: {}: {}", p.name, why));
      notes->push_back(fmt::format("{}: on the kernel's path: {}", p.name, why));
      continue;
    }
    auto ok = CheckPatchable(p.path, p.file_offset, p.symbol_size, p.symbol_address);
    if (!ok.ok()) {
      if (strict)
        return Error(Code::kUnsupported,
                     fmt::format("--uprobes inprocess: {}: {}", p.name, ok.status().message()));
      notes->push_back(fmt::format("{}: on the kernel's path: {}", p.name, ok.status().message()));
      continue;
    }
    host->in_process_[i] = true;
  }

  // Every program of an in-process probe: verified by the kernel as a uprobe program (with
  // maps of the same shapes, never attached), and known to the interpreter.
  std::vector<int> fds(bpf::kMapCount, -1);
  std::vector<bpf::Map> kernel_maps;
  std::vector<size_t> programs;
  for (size_t gi = 0; gi < gen.programs.size(); ++gi) {
    const bpf::GeneratedProgram& g = gen.programs[gi];
    if (!IsUprobeProgram(g)) continue;
    std::vector<int> probes = ProbesOf(g.attach);
    if (std::none_of(probes.begin(), probes.end(),
                     [&](int p) { return p >= 0 && host->in_process_[p]; }))
      continue;
    if (kernel_maps.empty()) {
      for (int m = 0; m < bpf::kMapCount; ++m) {
        const bpf::MapDesc& d = gen.maps[m];
        if (!d.used) continue;
        FAY_ASSIGN_OR_RETURN(bpf::Map km, bpf::Map::Create(d.type, d.name, d.key_size, d.value_size,
                                                           d.max_entries, d.flags));
        fds[m] = km.fd();
        kernel_maps.push_back(std::move(km));
      }
    }
    bpf::ProgramSpec spec{g.type, "fay_inproc", g.insns, g.relocs};
    auto verified = bpf::Program::Load(spec, fds);
    auto interp = Interpreter::Prepare(
        g.insns, [](int) { return uint64_t{1}; }, RuntimeHelpers());
    std::string why = !verified.ok() ? "the kernel's verifier refused its uprobe program: " +
                                           verified.status().message()
                      : !interp.ok() ? interp.status().message()
                                     : "";
    if (!why.empty()) {
      for (int p : probes) {
        if (p < 0 || !host->in_process_[p]) continue;
        if (strict)
          return Error(Code::kUnsupported,
                       fmt::format("--uprobes inprocess: {}: {}", plan.probes[p].name, why));
        notes->push_back(fmt::format("{}: on the kernel's path: {}", plan.probes[p].name, why));
        host->in_process_[p] = false;
      }
      continue;
    }
    programs.push_back(gi);
  }
  if (std::none_of(host->in_process_.begin(), host->in_process_.end(), [](bool b) { return b; }))
    return std::unique_ptr<InprocHost>();
  FAY_RETURN_IF_ERROR(host->Build(gen, programs));
  return host;
}

Status InprocHost::Build(const bpf::GeneratedQuery& gen, const std::vector<size_t>& programs) {
  counts_matched_ = gen.counts_matched;
  const uint32_t slots =
      std::clamp<uint32_t>(2 * std::max(1u, std::thread::hardware_concurrency()), 4, kMaxSlots);
  // Layout: header, map table, program table, patch table, instructions, then the maps, each
  // on pages of its own.
  std::vector<RegionMap> maps;
  std::vector<RegionPatch> patches;
  size_t insn_count = 0;
  for (size_t gi : programs) insn_count += gen.programs[gi].insns.size();
  for (size_t k = 0; k < programs.size(); ++k) {
    const bpf::GeneratedProgram& g = gen.programs[programs[k]];
    for (int p : ProbesOf(g.attach)) {
      if (p < 0 || !in_process_[p]) continue;
      const ProbeInfo& info = plan_.probes[p];
      struct stat st {};
      if (stat(info.path.c_str(), &st) != 0) return ErrnoError(info.path);
      RegionPatch rp{};
      rp.dev = st.st_dev;
      rp.ino = st.st_ino;
      rp.file_offset = info.file_offset;
      rp.size = info.symbol_size;
      rp.cookie = static_cast<uint64_t>(p);
      rp.program = static_cast<uint32_t>(k);
      rp.is_return = g.attach.is_exit;
      // An entry program that keeps only the time and the six arguments (no strings) does what
      // the return probe's shadow frame does anyway: the runtime serves its record from there.
      if (g.attach.role == ProgRole::kEntry &&
          gen.maps[bpf::kMapEntry].value_size == sizeof(EntryRecord))
        rp.flags |= kRegionPatchEntryRecord;
      std::snprintf(rp.path, sizeof rp.path, "%s", info.name.c_str());
      char real[PATH_MAX];
      std::snprintf(rp.file, sizeof rp.file, "%s",
                    realpath(info.path.c_str(), real) ? real : info.path.c_str());
      patches.push_back(rp);
    }
  }
  size_t off = Align(sizeof(RegionHeader), 64);
  const size_t maps_off = off;
  int used = 0;
  for (int m = 0; m < bpf::kMapCount; ++m) used += gen.maps[m].used;
  off += Align(sizeof(RegionMap) * used, 64);
  const size_t programs_off = off;
  off += Align(sizeof(RegionProgram) * programs.size(), 64);
  const size_t patches_off = off;
  off += Align(sizeof(RegionPatch) * patches.size(), 64);
  const size_t insns_off = off;
  off += Align(sizeof(bpf_insn) * insn_count, 4096);
  for (int m = 0; m < bpf::kMapCount; ++m) {
    const bpf::MapDesc& d = gen.maps[m];
    if (!d.used) continue;
    MapShape shape{d.type, d.key_size, d.value_size, d.max_entries};
    FAY_ASSIGN_OR_RETURN(size_t bytes, ShmMap::BytesFor(shape, slots));
    const uint32_t flags = m == bpf::kMapEntry ? kRegionMapThreadKeyed : 0;
    maps.push_back(RegionMap{m, static_cast<uint32_t>(d.type), d.key_size, d.value_size,
                             d.max_entries, slots, flags, off, bytes});
    off += Align(bytes, 4096);
  }
  bytes_ = off;

  // Close-on-exec: only the command keeps it (HeldChild::SpawnOptions::inherit_fd).
  fd_.reset(memfd_create("fay-inproc", MFD_CLOEXEC));
  if (!fd_) return ErrnoError("memfd_create for in-process probes");
  if (ftruncate(fd_.get(), static_cast<off_t>(bytes_)) != 0)
    return ErrnoError("sizing the in-process probes' memory");
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (p == MAP_FAILED) return ErrnoError("mapping the in-process probes' memory");
  base_ = static_cast<uint8_t*>(p);
  header_ = reinterpret_cast<RegionHeader*>(base_);  // zeroed by ftruncate
  header_->version = kRegionVersion;
  header_->slots = slots;
  // Slots a thread may keep for its life need fay's membarrier (WaitForRunsInFlight); a
  // quarter, and at least 2, stay for the threads past them, claimed run by run.
  // fay frees a dead thread's slot by its id in fay's pid namespace: only processes of that
  // namespace may own one (the runtime compares).
  struct stat ns {};
  if (stat("/proc/self/ns/pid", &ns) == 0) {
    header_->pid_ns_dev = ns.st_dev;
    header_->pid_ns_ino = ns.st_ino;
  }
  const long mb = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (mb > 0 && (mb & MEMBARRIER_CMD_GLOBAL_EXPEDITED))
    header_->owned_slots = slots - std::max(2u, slots / 4);
  header_->total_bytes = bytes_;
  header_->map_count = static_cast<uint32_t>(maps.size());
  header_->program_count = static_cast<uint32_t>(programs.size());
  header_->patch_count = static_cast<uint32_t>(patches.size());
  header_->maps_off = maps_off;
  header_->programs_off = programs_off;
  header_->patches_off = patches_off;
  header_->heartbeat_ns.store(ClockNs(CLOCK_MONOTONIC_COARSE));
  tsc_.Start(&header_->clock);
  std::memcpy(base_ + maps_off, maps.data(), sizeof(RegionMap) * maps.size());
  std::memcpy(base_ + patches_off, patches.data(), sizeof(RegionPatch) * patches.size());
  size_t at = insns_off;
  for (size_t k = 0; k < programs.size(); ++k) {
    const auto& insns = gen.programs[programs[k]].insns;
    RegionProgram rp{at, static_cast<uint32_t>(insns.size()), 0};
    std::memcpy(base_ + programs_off + k * sizeof rp, &rp, sizeof rp);
    std::memcpy(base_ + at, insns.data(), insns.size() * sizeof(bpf_insn));
    at += insns.size() * sizeof(bpf_insn);
  }
  for (const RegionMap& m : maps) {
    MapShape shape{static_cast<bpf_map_type>(m.type), m.key_size, m.value_size, m.max_entries};
    FAY_ASSIGN_OR_RETURN(ShmMap sm, ShmMap::Place(shape, m.slots, {base_ + m.offset, m.bytes}));
    maps_.emplace_back(m.id, sm);
  }
  patches_ = patches.size();
  // Last: a runtime trusts nothing before the magic.
  std::atomic_thread_fence(std::memory_order_release);
  header_->magic = kRegionMagic;
  return Status::Ok();
}

InprocHost::~InprocHost() {
  if (header_) header_->stop.store(1);
  if (base_) munmap(base_, bytes_);
}

std::string InprocHost::Spec() const {
  return fmt::format("{},{}", fd_.get(), getpid());
}

std::vector<std::string> InprocHost::Environment() const {
  std::string preload = library_;
  if (const char* old = getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  return {"LD_PRELOAD=" + preload, fmt::format("{}={}", kRegionEnv, Spec())};
}

std::vector<FunctionAt> InprocHost::Functions() const {
  std::vector<FunctionAt> out;
  for (size_t i = 0; i < in_process_.size(); ++i) {
    if (!in_process_[i]) continue;
    char real[PATH_MAX];
    const std::string& path = plan_.probes[i].path;
    out.push_back({realpath(path.c_str(), real) ? real : path, plan_.probes[i].file_offset});
  }
  return out;
}

void InprocHost::Heartbeat() {
  if (!header_) return;
  header_->heartbeat_ns.store(ClockNs(CLOCK_MONOTONIC_COARSE), std::memory_order_relaxed);
  tsc_.Refresh(&header_->clock);
  // A thread that died inside a probe (its process exited or was killed) still holds its slot:
  // freed here, or enough such deaths would leave no slot to run in.
  for (uint32_t s = 0; s < header_->slots; ++s) {
    uint32_t held = header_->slot[s].held.load(std::memory_order_relaxed);
    const auto tid = static_cast<pid_t>(held & ~kSlotOwned);
    if (held == 0 || kill(tid, 0) == 0 || errno != ESRCH) continue;
    if (held & kSlotOwned) {
      // Its owner died mid-run: no run is in flight there any more. Made even while the dead
      // owner's id still holds the slot, so that no new owner writes the count meanwhile.
      const uint32_t runs = header_->slot[s].runs.load();
      if (runs & 1) header_->slot[s].runs.store(runs + 1);
    }
    header_->slot[s].held.compare_exchange_strong(held, 0);
  }
}

void InprocHost::Stop() {
  if (!header_) return;
  header_->stop.store(1);
  WaitForRunsInFlight();
}

// Every slot held now let go once (50 ms at most): what a run that started before a window's
// flip, or before the stop, writes is then in the maps fay reads next. Unlike a BPF program,
// its thread can be preempted mid-run.
void InprocHost::WaitForRunsInFlight() const {
  // A thread running in a slot it owns marks the run with plain stores, which may still sit in
  // its CPU's store buffer: the membarrier makes them visible here, and makes what fay stored
  // (the window, the stop) visible to every run that starts after it.
  if (header_->owned_slots > 0 &&
      syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0)
    std::atomic_thread_fence(std::memory_order_seq_cst);  // not expected: registered processes
  uint32_t held[kMaxSlots], runs[kMaxSlots];
  for (uint32_t s = 0; s < header_->slots; ++s) {
    held[s] = header_->slot[s].held.load();
    runs[s] = header_->slot[s].runs.load();
  }
  auto busy = [&](uint32_t s) {
    if (held[s] & kSlotOwned) return (runs[s] & 1) && header_->slot[s].runs.load() == runs[s];
    return held[s] != 0 && header_->slot[s].held.load() == held[s];
  };
  for (int waited = 0; waited < 500; ++waited) {
    bool any = false;
    for (uint32_t s = 0; s < header_->slots && !any; ++s) any = busy(s);
    if (!any) break;
    usleep(100);
  }
}

std::vector<std::string> InprocHost::Report(bool verbose) const {
  std::vector<std::string> out;
  if (!header_) return out;
  uint64_t procs = header_->processes.load(), patched = header_->patched.load(),
           refused = header_->refused.load();
  if (procs > 0 && patched == 0 && refused == 0)
    out.push_back(
        "warning: no function of the query's in-process probes was found mapped in the "
        "command's processes: they saw nothing; --uprobes kernel traces them through the kernel");
  if (procs == 0)
    out.push_back(
        "warning: the in-process runtime started in no process of the command (its "
        "environment cleared, or only static executables): its in-process probes saw nothing; "
        "--uprobes kernel traces them through the kernel");
  if (refused)
    out.push_back(fmt::format(
        "warning: {} in-process patch{} refused, the first: {}", refused, refused == 1 ? "" : "es",
        // The process writes it: never trusted to end.
        std::string(header_->first_error,
                    strnlen(header_->first_error, sizeof header_->first_error))));
  if (verbose) {
    uint64_t interpreted = header_->interpreted.load();
    out.push_back(fmt::format("in-process probes: {} process{}, {} function{} patched{}", procs,
                              procs == 1 ? "" : "es", patched, patched == 1 ? "" : "s",
                              interpreted ? fmt::format(", {} program{} interpreted", interpreted,
                                                        interpreted == 1 ? "" : "s")
                                          : ""));
  }
  return out;
}

const ShmMap* InprocHost::MapAt(int id) const {
  for (const auto& [m, sm] : maps_)
    if (m == id) return &sm;
  return nullptr;
}

void InprocHost::SetWindow(uint64_t window) {
  if (const ShmMap* c = MapAt(bpf::kMapControl)) {
    uint32_t zero = 0;
    auto* v = static_cast<uint64_t*>(c->Lookup(&zero, 0));
    if (v) __atomic_store_n(v, window, __ATOMIC_SEQ_CST);
  }
  WaitForRunsInFlight();
}

void InprocHost::Fold(int map, bool clear,
                      const std::function<void(const uint8_t*, const uint8_t*)>& fn) {
  const ShmMap* agg = MapAt(map);
  if (agg) {
    agg->ForEach([&](const uint8_t* key, uint32_t, const uint8_t* value) { fn(key, value); });
    if (clear) agg->Clear();
  }
  // The cache in front of it: [u64 used][key][value] per entry, as in the kernel's.
  const ShmMap* cache = MapAt(map == bpf::kMapAggA ? bpf::kMapCacheA : bpf::kMapCacheB);
  if (cache) {
    const size_t ks = static_cast<size_t>(plan_.key_size);
    cache->ForEach([&](const uint8_t*, uint32_t, const uint8_t* e) {
      uint64_t used;
      std::memcpy(&used, e, 8);
      if (used) fn(e + 8, e + 8 + ks);
    });
    if (clear) cache->Clear();
  }
}

void InprocHost::AddStats(RunStats* st) const {
  const ShmMap* stats = MapAt(bpf::kMapStats);
  if (!stats) return;
  uint64_t sum[bpf::kStatCount] = {};
  stats->ForEach([&](const uint8_t*, uint32_t, const uint8_t* v) {
    uint64_t c[bpf::kStatCount];
    std::memcpy(c, v, sizeof c);
    for (int k = 0; k < bpf::kStatCount; ++k) sum[k] += c[k];
  });
  if (!counts_matched_) sum[bpf::kStatMatched] = sum[bpf::kStatSeen];
  bpf::AddStatCounters(sum, st);
  if (header_) st->dropped += header_->dropped.load();
}

}  // namespace fay::inproc
