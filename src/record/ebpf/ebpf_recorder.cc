#include "record/ebpf/ebpf_recorder.h"

#include "bpf/btf_offsets.h"

#include <bpf/btf.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "bpf/attach.h"
#include "bpf/map.h"
#include "bpf/program.h"
#include "bpf/ring_consumer.h"
#include "common/child_process.h"
#include "common/thread_name.h"
#include "common/unique_fd.h"
#include "common/worker_thread.h"
#include "probes/tracefs.h"
#include "record/copy_capture.h"
#include "record/ebpf/capture_spec.h"
#include "record/ebpf/restart_merger.h"
#include "record/ebpf/signal_placer.h"
#include "record/ebpf/throttle.h"
#include "record/stop_signals.h"
#include "record/task_info.h"
#include "schema/syscall_set.h"
#include "schema/syscall_table.h"
#include "trace/writer.h"

extern char** environ;

namespace fay::record {
namespace ebpf {

namespace {

bool IsCloneFamily(int64_t nr) {
  return nr == sysno::clone || nr == sysno::clone3 || nr == sysno::fork || nr == sysno::vfork;
}

bool IsExec(int64_t nr) {
  return nr == sysno::execve || nr == sysno::execveat;
}

// What an enter record and a whole-call record both carry.
template <typename Wire>
void CallFromWire(const Wire& w, SyscallEvent* ev) {
  ev->entry_ns = w.entry_ns;
  ev->pid = static_cast<int32_t>(w.tgid);
  ev->tid = static_cast<int32_t>(w.tid);
  ev->ppid = static_cast<int32_t>(w.ppid);
  ev->uid = w.uid;
  std::memcpy(ev->comm.data(), w.comm, 16);
  ev->nr = static_cast<int32_t>(w.nr);
  for (int i = 0; i < 6; ++i) ev->args[i] = w.args[i];
  ev->cpu = w.cpu == 0xffff ? -1 : static_cast<int32_t>(w.cpu);
}

}  // namespace

size_t Assembler::open_calls() const {
  size_t n = 0;
  for (const auto& [tid, p] : pending_) n += p.open;
  return n;
}

Assembler::Pending& Assembler::PendingOf(int32_t tid) {
  if (last_ && last_tid_ == tid) return *last_;
  last_tid_ = tid;
  last_ = &pending_[tid];
  return *last_;
}

void Assembler::Complete(Pending& p, Out* out) {
  SyscallEvent& ev = p.ev;
  for (size_t i = 0; i < ev.buffers.size(); ++i) {
    CapturedBuffer& b = ev.buffers[i];
    uint32_t f = p.explicit_flags[i];
    if (f & kFragExplicit) {
      b.truncated = f & kFragTruncated;
      b.not_captured = f & kFragNotCaptured;
    } else if (b.Size() == 0 && b.length > 0) {
      b.not_captured = true;
    } else {
      b.truncated = b.Size() < b.length;
    }
  }
  p.open = false;
  p.explicit_flags.clear();
  // Before its program starts, the command's failed execs are the launcher's PATH search.
  if (IsExec(ev.nr) && ev.ret < 0 && !(ev.flags & kEventNoExit) && !started_.count(ev.pid)) {
    ++dropped_exec_attempts_;
    ev.buffers.clear();
    return;
  }
  out->syscalls.push_back(std::move(ev));
  ev = SyscallEvent{};
}

bool Assembler::Feed(const void* data, size_t size, Out* out) {
  if (size < 4) return false;
  uint32_t type;
  std::memcpy(&type, data, 4);
  const auto* bytes = static_cast<const uint8_t*>(data);
  switch (type) {
    case kRecBatch: {
      WireBatch b;
      if (size < sizeof b) return false;
      std::memcpy(&b, data, sizeof b);
      if (b.bytes > kStageBytes || sizeof b + b.bytes > size) return false;
      // Whole calls and short fragments, each padded to 8 bytes, as the probes staged them.
      size_t at = sizeof b, end = sizeof b + b.bytes;
      while (at < end) {
        uint32_t t;
        if (end - at < sizeof t) return false;
        std::memcpy(&t, bytes + at, sizeof t);
        size_t n;
        if (t == kRecCall) {
          n = sizeof(WireCall);
        } else if (t == kRecFrag && end - at >= sizeof(WireFragHeader)) {
          WireFragHeader h;
          std::memcpy(&h, bytes + at, sizeof h);
          n = sizeof h + h.len;
        } else {
          return false;
        }
        if (n > end - at || !Feed(bytes + at, n, out)) return false;
        at += (n + 7) & ~size_t{7};
      }
      return true;
    }
    case kRecEnter: {
      if (size < sizeof(WireEnter)) return false;
      WireEnter w;
      std::memcpy(&w, data, sizeof w);
      Pending& p = PendingOf(static_cast<int32_t>(w.tid));
      if (p.open) ++orphans_;  // its return record was lost
      // Buffers still waiting belonged to a call whose record was lost.
      if (!p.ev.buffers.empty()) ++orphans_;
      p.ev.buffers.clear();
      p.explicit_flags.clear();
      p.open = true;
      CallFromWire(w, &p.ev);
      p.ev.exit_ns = 0;
      p.ev.ret = 0;
      p.ev.flags = 0;
      return true;
    }
    case kRecFrag: {
      if (size < sizeof(WireFragHeader)) return false;
      WireFragHeader h;
      std::memcpy(&h, data, sizeof h);
      if (sizeof h + h.len > size) return false;
      // A call written as one record (kRecCall) sends its buffers ahead of it: they wait here.
      Pending& p = PendingOf(static_cast<int32_t>(h.tid));
      auto& bufs = p.ev.buffers;
      if (h.offset == 0) {
        // A second reading of an inbound buffer (see the exit probe) replaces the failed one.
        for (size_t i = 0; i < bufs.size(); ++i) {
          if (bufs[i].arg == h.arg && bufs[i].sub == h.sub &&
              bufs[i].dir == static_cast<BufferDir>(h.dir)) {
            bufs.erase(bufs.begin() + static_cast<long>(i));
            p.explicit_flags.erase(p.explicit_flags.begin() + static_cast<long>(i));
            break;
          }
        }
        CapturedBuffer b;
        b.arg = h.arg;
        b.sub = h.sub;
        b.dir = static_cast<BufferDir>(h.dir);
        b.addr = h.addr;
        b.length = h.total;
        if (blob_store_ && h.len == h.total && h.len > trace::kInlineMax) {
          // The whole buffer is here: into the blob store straight from the ring.
          b.stored = blob_store_(bytes + sizeof h, h.len);
          bufs.push_back(std::move(b));
          p.explicit_flags.push_back(h.flags);
          return true;
        }
        bufs.push_back(std::move(b));
        p.explicit_flags.push_back(h.flags);
      } else if (bufs.empty() || bufs.back().arg != h.arg ||
                 bufs.back().dir != static_cast<BufferDir>(h.dir) ||
                 bufs.back().bytes.size() != h.offset) {
        ++orphans_;  // its predecessor was lost
        return true;
      }
      auto& v = bufs.back().bytes;
      v.insert(v.end(), bytes + sizeof h, bytes + sizeof h + h.len);
      return true;
    }
    case kRecCall: {
      if (size < sizeof(WireCall)) return false;
      WireCall w;
      std::memcpy(&w, data, sizeof w);
      Pending& p = PendingOf(static_cast<int32_t>(w.tid));
      if (!p.open && p.ev.buffers.empty() && !IsExec(static_cast<int64_t>(w.nr))) {
        // Nearly every call: no buffer waits for it, so it is built where it will be handed
        // over instead of in the thread's slot and moved.
        SyscallEvent& ev = out->syscalls.emplace_back();
        CallFromWire(w, &ev);
        ev.exit_ns = w.exit_ns;
        ev.ret = w.ret;
        ev.flags = w.flags;
        return true;
      }
      if (p.open) {
        ++orphans_;  // an earlier call's return record was lost
        p.open = false;
      }
      SyscallEvent& ev = p.ev;
      CallFromWire(w, &ev);
      ev.exit_ns = w.exit_ns;
      ev.ret = w.ret;
      ev.flags = w.flags;
      Complete(p, out);
      return true;
    }
    case kRecReturn: {
      if (size < sizeof(WireReturn)) return false;
      WireReturn w;
      std::memcpy(&w, data, sizeof w);
      auto it = pending_.find(static_cast<int32_t>(w.tid));
      if (it == pending_.end() || !it->second.open || it->second.ev.nr != w.nr) {
        // A new thread or process returning from the clone that made it entered nothing; what
        // its exit probe captured (clone's out pointers) belongs to no call of its own.
        if (!IsCloneFamily(w.nr)) ++orphans_;
        if (it != pending_.end() && !it->second.open) {
          it->second.ev.buffers.clear();
          it->second.explicit_flags.clear();
        }
        return true;
      }
      it->second.ev.ret = w.ret;
      it->second.ev.exit_ns = w.exit_ns;
      Complete(it->second, out);
      return true;
    }
    case kRecSignal: {
      if (size < 32 + kSiginfoBytes) return false;
      WireProc w{};
      std::memcpy(&w, data, 32 + kSiginfoBytes);
      ProcessEvent pe;
      pe.kind = ProcessEventKind::kSignal;
      pe.time_ns = w.time_ns;
      pe.pid = static_cast<int32_t>(w.pid);
      pe.tid = static_cast<int32_t>(w.tid);
      pe.signo = static_cast<int32_t>(w.parent);
      pe.siginfo.assign(w.filename, w.filename + kSiginfoBytes);
      pe.is_thread = w.is_thread != 0;  // noted when sent: SignalPlacer places it
      out->processes.push_back(std::move(pe));
      return true;
    }
    case kRecFork:
    case kRecExec:
    case kRecProcExit: {
      if (size < 32) return false;
      WireProc w{};
      std::memcpy(&w, data, std::min(size, sizeof w));
      ProcessEvent pe;
      pe.kind = type == kRecFork   ? ProcessEventKind::kFork
                : type == kRecExec ? ProcessEventKind::kExec
                                   : ProcessEventKind::kExit;
      pe.time_ns = w.time_ns;
      pe.pid = static_cast<int32_t>(w.pid);
      pe.tid = static_cast<int32_t>(w.tid);
      if (type == kRecFork) {
        pe.parent_pid = static_cast<int32_t>(w.parent);
        pe.is_thread = w.is_thread != 0;
      }
      if (type == kRecExec) {
        started_.insert(pe.pid);
        // A thread that execs takes the leader's id: its open exec moves with it.
        auto old_tid = static_cast<int32_t>(w.parent);
        if (old_tid != 0 && old_tid != pe.tid) {
          auto old = pending_.find(old_tid);
          if (old != pending_.end()) {
            Pending moved = std::move(old->second);
            Forget();
            pending_.erase(old);
            moved.ev.tid = pe.tid;
            pending_[pe.tid] = std::move(moved);
          }
        }
        if (size >= sizeof w) pe.path.assign(w.filename, strnlen(w.filename, sizeof w.filename));
      }
      if (type == kRecProcExit) {
        pe.exit_status = w.exit_code;
        auto it = pending_.find(pe.tid);
        if (it != pending_.end()) {
          if (it->second.open) {
            it->second.ev.flags |= kEventNoExit;
            Complete(it->second, out);
          }
          Forget();
          pending_.erase(it);
        }
        if (w.is_thread) started_.erase(pe.pid);
      }
      out->processes.push_back(std::move(pe));
      return true;
    }
    default:
      return false;
  }
}

}  // namespace ebpf

namespace {

using namespace ebpf;

std::atomic<int> g_stop_signal{0};
void OnStopSignal(int sig) {
  g_stop_signal = sig;
}

uint64_t Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Status TaskOffsetsFromBtf(ProbeOptions* o) {
  auto off = bpf::TaskStructOffsets();
  if (!off.ok())
    return Error(Code::kUnsupported,
                 "the eBPF recorder needs the kernel's BTF: " + off.status().message());
  o->task_comm = off->comm;
  o->task_pid = off->pid;
  o->task_tgid = off->tgid;
  o->task_real_parent = off->real_parent;
  o->task_exit_code = off->exit_code;
  o->binprm_filename = off->binprm_filename;
  o->task_cred = off->cred;
  o->cred_uid = off->cred_uid;
  o->task_cpu = off->cpu;
  o->task_struct_btf_id = off->task_struct_btf_id;
  o->rdonly_cast_btf_id = off->rdonly_cast_btf_id;
  o->exit_has_group_dead = off->exit_has_group_dead != 0;
  o->sys_enter_btf_id = off->sys_enter_btf_id;
  o->sys_exit_btf_id = off->sys_exit_btf_id;
  o->task_pending_signal = off->pending_signal;
  o->task_signal = off->signal;
  o->signal_shared_pending = off->shared_pending_signal;
  o->signal_flags = off->signal_flags;
  o->group_exit_code = off->group_exit_code;
  o->group_exec_task = off->group_exec_task;
  return Status::Ok();
}

// One ring's default size. Its pages are allocated, zeroed and charged to the memory cgroup at
// every start (3.5 ms of CPU per 16 MiB on a cgroup v1 host). It was 16 MiB for that, but the
// half above the governor's mark is all that absorbs the time the governor is kept from running,
// and stalls of 3 to 6 ms (a CPU zeroing another ring in the kernel, which this kernel does not
// preempt) let three writers at full speed overflow 8 MiB beside other recordings. With 32 MiB
// W3 took no longer (333 against 358 ms, medians of 9 interleaved runs here) and W5 paused 46
// times instead of 99. Several rings share twice that: each consumer then has a CPU of its own.
constexpr uint64_t kDefaultRingBytes = 32ull << 20;
constexpr uint64_t kDefaultSharedRingBytes = 64ull << 20;
// How long a consumer sleeps on an empty ring: while records come, and at most while none do.
constexpr int kConsumerWaitMs = 2;
constexpr int kConsumerIdleWaitMs = 32;
// --loss=block: the consumers' nice value (see where they start).
constexpr int kConsumerNice = -10;
// A consumer looks at its ring's fill between drains of this much (--loss=block).
constexpr uint64_t kAssistBytes = 1 << 20;
// The governor's look while the rings are calm, should a wakeup from the probes not come.
constexpr long kGovernorCalmWaitMs = 20;

// One consumer thread per 4 CPUs fay may use, at most kMaxRings: a consumer needs a CPU of its
// own, and the program the others. On 2 to 7 CPUs, one.
uint32_t DefaultConsumers() {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp<uint32_t>(static_cast<uint32_t>(cpus / 4), 1, kMaxRings);
}

// /proc/sys/kernel/pid_max rounded up to a power of two: every tgid is below it.
uint64_t PidLimit() {
  uint64_t max = 1 << 22;  // the most pid_max can be on 64-bit
  if (FILE* f = fopen("/proc/sys/kernel/pid_max", "re")) {
    unsigned long long v = 0;
    if (fscanf(f, "%llu", &v) == 1 && v > 0) max = v;
    fclose(f);
  }
  uint64_t p = 64;
  while (p < max) p <<= 1;
  return p;
}
// A ring's size as --ring-size takes it: 256K, 16M, 1G.
std::string RingSizeText(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return fmt::format("{}M", bytes >> 20);
  return fmt::format("{}K", bytes >> 10);
}
// A buffer may take at most this share of the ring, so one call cannot fill it.
constexpr uint64_t kBufferShareOfRing = 4;

class EbpfRecorder {
 public:
  explicit EbpfRecorder(const RecordOptions& options) : opt_(options) {}
  Expected<RecordResult> Run();
  // Everything but running a command: the maps and the verified programs.
  Status LoadOnly() {
    FAY_RETURN_IF_ERROR(Configure());
    FAY_RETURN_IF_ERROR(Prepare());
    return LoadProbes();
  }

 private:
  Status Configure();
  // Loading, in two steps: the maps (rings included) and the programs' code; then the programs,
  // verified on two threads.
  Status Prepare();
  Status LoadProbes();
  Status AttachProcessProbes();
  Status AttachSyscallProbes();
  Status GovernorEvents();
  // One consumer thread's: its ring, the events it rebuilds from it, its lane of the writer.
  struct Lane {
    size_t index = 0;
    std::unique_ptr<bpf::RingConsumer> ring;
    Assembler assembler;
    Assembler::Out out;
    RestartMerger restarts;
    SignalPlacer signals;
    std::vector<trace::Writer::Item> batch;
    bool write_failed = false;
    uint64_t syscalls = 0, processes = 0, threads = 0;  // handed to the writer; forks seen
  };
  void Consume(Lane& l);
  // Runs until governor_stopping_; sets ready once it looks at the rings at real-time priority.
  void Govern(std::promise<void>& ready);
  // --loss=block freezes the program while a ring holds more than this.
  uint64_t FreezeMark() const { return ring_bytes_ / 2; }
  void OnRecord(Lane& l, const void* data, size_t size);
  void Deliver(Lane& l);
  void DrainStaged();

  const RecordOptions& opt_;
  RecordResult result_;
  SyscallSet filter_ = SyscallSet::All();
  uint64_t ring_bytes_ = kDefaultRingBytes;  // each ring's
  uint32_t rings_ = 1;
  uint64_t max_buffer_ = 0;
  uint64_t pid_limit_ = 0;
  bool block_ = true;
  std::optional<bpf::Map> maps_[kMapCount];
  struct Unmap {
    void operator()(uint64_t* p) const { munmap(p, static_cast<size_t>(sysconf(_SC_PAGESIZE))); }
  };
  std::unique_ptr<uint64_t, Unmap> asleep_;  // kMapWake's values (kWakeSlots), mapped
  ProbeOptions po_;
  ProbeSet set_;
  std::vector<int> fds_;  // maps_' descriptors, by slot, for the programs
  enum ProgIndex {
    kProgEnter,
    kProgExit,
    kProgFork,
    kProgExec,
    kProgProcExit,
    kProgSwitch,
    kProgSignal,
    kProgSignalIgnored
  };
  std::optional<bpf::Program> progs_[kProgSignalIgnored + 1];
  std::vector<bpf::Link> links_;
  std::unique_ptr<trace::Writer> writer_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unique_ptr<Throttle> throttle_;
  std::atomic<bool> consumer_stop_{false};
  // The governor sleeps on this: every ring (edge-triggered, woken by the probes) and
  // governor_stop_, an eventfd written once to stop it after governor_stopping_ is set.
  UniqueFd governor_ep_, governor_stop_;
  std::atomic<bool> governor_stopping_{false};
};

Status EbpfRecorder::Configure() {
  if (!opt_.syscall_filter.empty()) {
    FAY_ASSIGN_OR_RETURN(filter_, ParseSyscallSet(opt_.syscall_filter));
  }
  if (opt_.consumers > kMaxRings)
    return Error(Code::kInvalidArgument,
                 fmt::format("--consumers {}: at most {}", opt_.consumers, kMaxRings));
  rings_ = opt_.consumers ? opt_.consumers : DefaultConsumers();
  // The default memory is shared: each of several rings gets the largest power of two that
  // fits its share.
  if (rings_ > 1) {
    ring_bytes_ = kDefaultSharedRingBytes;
    while (ring_bytes_ * rings_ > kDefaultSharedRingBytes) ring_bytes_ >>= 1;
  }
  if (opt_.ring_size) {
    if (opt_.ring_size < (1u << 16) || (opt_.ring_size & (opt_.ring_size - 1)) != 0)
      return Error(Code::kInvalidArgument,
                   fmt::format("--ring-size {} must be a power of two of at least 64K "
                               "(examples: 8M, 64M, 1G)",
                               opt_.ring_size));
    // The map's size is a u32: 4G would reach the kernel as 0 and fail as "invalid argument".
    if (opt_.ring_size > (1ull << 31))
      return Error(Code::kInvalidArgument,
                   fmt::format("--ring-size {} is more than a ring buffer can hold (at most 2G)",
                               opt_.ring_size));
    ring_bytes_ = opt_.ring_size;
  }
  uint64_t share = ring_bytes_ / kBufferShareOfRing;
  if (opt_.max_buffer > share)
    return Error(Code::kInvalidArgument,
                 fmt::format("--max-buffer {} is more than a quarter of the ring buffer ({} "
                             "bytes); hint: add --ring-size {}M",
                             opt_.max_buffer, ring_bytes_,
                             std::max<uint64_t>(1, (opt_.max_buffer * kBufferShareOfRing) >> 20)));
  max_buffer_ = opt_.max_buffer ? opt_.max_buffer : share;
  if (opt_.loss.empty())
    block_ = opt_.pid == 0;
  else if (opt_.loss == "block" || opt_.loss == "drop")
    block_ = opt_.loss == "block";
  else
    return Error(Code::kInvalidArgument,
                 fmt::format("--loss '{}': expected block or drop", opt_.loss));
  if (block_ && opt_.pid)
    return Error(Code::kUnsupported,
                 "--loss=block throttles a command fay starts; with -p use --loss=drop");
  return Status::Ok();
}

Status EbpfRecorder::Prepare() {
  // Declared before the helper that fills it, so it outlives the job on every return.
  std::vector<Expected<bpf::Map>> rings;
  // Started now, so that it is running (on another CPU) by the time the programs are ready.
  WorkerThread helper;
  // The ring first, on the helper: its pages are allocated, zeroed and charged to the memory
  // cgroup one at a time (3 ms for 16 MiB), the longest step before the verifier, which needs
  // it. The other maps and the programs' code are made meanwhile.
  helper.Submit([this, &rings] {
    for (uint32_t i = 0; i < rings_; ++i) {
      rings.push_back(bpf::Map::Create(BPF_MAP_TYPE_RINGBUF, "fay_rec_ring", 0, 0,
                                       static_cast<uint32_t>(ring_bytes_)));
      if (!rings.back().ok()) break;
    }
  });
  po_.max_buffer = max_buffer_;
  po_.wake_bytes = ring_bytes_ / 8;
  po_.rings = rings_;
  pid_limit_ = PidLimit();
  po_.pid_limit = pid_limit_;
  FAY_RETURN_IF_ERROR(TaskOffsetsFromBtf(&po_));

  auto mk = [&](int slot, bpf_map_type type, const char* name, uint32_t k, uint32_t v, uint32_t n,
                uint32_t flags = 0) -> Status {
    FAY_ASSIGN_OR_RETURN(bpf::Map m, bpf::Map::Create(type, name, k, v, n, flags));
    maps_[slot] = std::move(m);
    return Status::Ok();
  };
  // Allocated as processes appear: preallocating 65536 entries was 2 ms of every start.
  FAY_RETURN_IF_ERROR(
      mk(kMapTraced, BPF_MAP_TYPE_HASH, "fay_rec_traced", 4, 1, 65536, BPF_F_NO_PREALLOC));
  FAY_RETURN_IF_ERROR(
      mk(kMapSpec, BPF_MAP_TYPE_ARRAY, "fay_rec_spec", 4, sizeof(SyscallSpec), kMaxNr));
  FAY_RETURN_IF_ERROR(
      mk(kMapScratch, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_rec_scratch", 4, kScratchSize, 1));
  FAY_RETURN_IF_ERROR(mk(kMapStates, BPF_MAP_TYPE_ARRAY, "fay_rec_states", 4,
                         static_cast<uint32_t>(StatesBytes(pid_limit_)), 1));
  FAY_RETURN_IF_ERROR(mk(kMapSlots, BPF_MAP_TYPE_ARRAY, "fay_rec_slots", 4,
                         static_cast<uint32_t>(kSlots * sizeof(CallSlot)), 1));
  FAY_RETURN_IF_ERROR(
      mk(kMapWake, BPF_MAP_TYPE_ARRAY, "fay_rec_wake", 4, 8, kWakeSlots, BPF_F_MMAPABLE));
  void* wake = mmap(nullptr, static_cast<size_t>(sysconf(_SC_PAGESIZE)), PROT_READ | PROT_WRITE,
                    MAP_SHARED, maps_[kMapWake]->fd(), 0);
  if (wake == MAP_FAILED) return ErrnoError("cannot map the recorder's wakeup flag");
  asleep_.reset(static_cast<uint64_t*>(wake));
  {
    // One bpf() call for the table rather than one per syscall (a millisecond of start-up).
    std::vector<uint32_t> keys(kMaxNr);
    std::vector<SyscallSpec> specs(kMaxNr);
    for (int nr = 0; nr < kMaxNr; ++nr) {
      keys[nr] = static_cast<uint32_t>(nr);
      specs[nr] = BuildSyscallSpec(nr);
      specs[nr].record = filter_.Contains(nr) ? 1 : 0;
    }
    FAY_RETURN_IF_ERROR(maps_[kMapSpec]->UpdateBatch(keys.data(), specs.data(), kMaxNr));
  }
  Expected<ProbeSet> generated = GenerateProbes(po_);
  helper.Wait();
  for (uint32_t i = 0; i < rings.size(); ++i) {
    if (!rings[i].ok()) return rings[i].status();
    maps_[RingSlot(i)] = std::move(rings[i]).value();
  }
  if (!generated.ok()) return generated.status();
  set_ = std::move(generated).value();
  for (auto& m : maps_) fds_.push_back(m ? m->fd() : -1);
  return Status::Ok();
}

Status EbpfRecorder::LoadProbes() {
  auto load_into = [this](int index, const bpf::ProgramSpec& spec) -> Status {
    FAY_ASSIGN_OR_RETURN(bpf::Program p, bpf::Program::Load(spec, fds_));
    progs_[index] = std::move(p);
    return Status::Ok();
  };
  // The verifier takes most of start-up, a program at a time: each syscall probe is checked on
  // a thread of its own, with two of the four small programs after it. (On a third thread
  // they made the verifier's two slower: start-up took 1.5 ms longer.)
  auto load_set = [&](const ProbeSet& set) -> Status {
    Status enter_side;
    WorkerThread helper;
    helper.Submit([&] {
      enter_side = load_into(kProgEnter, set.sys_enter);
      if (enter_side.ok()) enter_side = load_into(kProgFork, set.fork);
      if (enter_side.ok()) enter_side = load_into(kProgExec, set.exec);
    });
    Status exit_side = load_into(kProgExit, set.sys_exit);
    if (exit_side.ok()) exit_side = load_into(kProgProcExit, set.exit);
    if (exit_side.ok()) exit_side = load_into(kProgSwitch, set.sched_switch);
    if (exit_side.ok()) exit_side = load_into(kProgSignal, set.signal_deliver);
    if (exit_side.ok()) exit_side = load_into(kProgSignalIgnored, set.signal_generate);
    helper.Wait();
    return exit_side.ok() ? enter_side : exit_side;
  };
  Status typed = load_set(set_);
  if (typed.ok() || po_.sys_enter_btf_id == 0) return typed;
  // A kernel that refuses BTF-typed tracepoints still takes the untyped ones, which cost one
  // helper call more per syscall.
  ProbeOptions untyped = po_;
  untyped.sys_enter_btf_id = untyped.sys_exit_btf_id = 0;
  FAY_ASSIGN_OR_RETURN(ProbeSet set, GenerateProbes(untyped));
  return load_set(set);
}

Status EbpfRecorder::AttachProcessProbes() {
  // Process tracking first, so no fork between two attachments is missed.
  FAY_ASSIGN_OR_RETURN(bpf::Link fork,
                       bpf::AttachRawTracepoint(*progs_[kProgFork], "sched_process_fork"));
  links_.push_back(std::move(fork));
  // Raw tracepoints throughout: a perf-event tracepoint takes tens of milliseconds to detach.
  FAY_ASSIGN_OR_RETURN(bpf::Link exec,
                       bpf::AttachRawTracepoint(*progs_[kProgExec], "sched_process_exec"));
  links_.push_back(std::move(exec));
  FAY_ASSIGN_OR_RETURN(bpf::Link exit,
                       bpf::AttachRawTracepoint(*progs_[kProgProcExit], "sched_process_exit"));
  links_.push_back(std::move(exit));
  // Before the syscall probes stage anything: a thread's staged calls leave with it.
  FAY_ASSIGN_OR_RETURN(bpf::Link sw,
                       bpf::AttachRawTracepoint(*progs_[kProgSwitch], "sched_switch"));
  links_.push_back(std::move(sw));
  FAY_ASSIGN_OR_RETURN(bpf::Link sig,
                       bpf::AttachRawTracepoint(*progs_[kProgSignal], "signal_deliver"));
  links_.push_back(std::move(sig));
  FAY_ASSIGN_OR_RETURN(bpf::Link ign,
                       bpf::AttachRawTracepoint(*progs_[kProgSignalIgnored], "signal_generate"));
  links_.push_back(std::move(ign));
  return Status::Ok();
}

Status EbpfRecorder::AttachSyscallProbes() {
  auto syscall_probe = [](const bpf::Program& p, const char* tp) {
    return p.type() == BPF_PROG_TYPE_TRACING ? bpf::AttachTypedTracepoint(p)
                                             : bpf::AttachRawTracepoint(p, tp);
  };
  FAY_ASSIGN_OR_RETURN(bpf::Link sx, syscall_probe(*progs_[kProgExit], "sys_exit"));
  links_.push_back(std::move(sx));
  FAY_ASSIGN_OR_RETURN(bpf::Link se, syscall_probe(*progs_[kProgEnter], "sys_enter"));
  links_.push_back(std::move(se));
  return Status::Ok();
}

void EbpfRecorder::OnRecord(Lane& l, const void* data, size_t size) {
  l.assembler.Feed(data, size, &l.out);
  // Hand events over in small groups, so the writer's queue sees them in order and soon.
  if (l.out.syscalls.size() + l.out.processes.size() >= 256) Deliver(l);
}

// Calls the exit probe staged (see WireBatch) and nothing wrote out before the detach: the last
// calls of threads still running, read from each CPU's scratch after the ring is drained.
void EbpfRecorder::DrainStaged() {
  uint32_t zero = 0;
  auto per_cpu = maps_[kMapScratch]->LookupPerCpu(&zero);
  if (!per_cpu.ok()) return;
  for (const std::vector<uint8_t>& v : *per_cpu) {
    if (v.size() < static_cast<size_t>(kScratchSize)) continue;
    uint32_t bytes;
    std::memcpy(&bytes, v.data() + kStagedBytesOffset, sizeof bytes);
    if (bytes == 0 || bytes > kStageBytes) continue;
    std::vector<uint8_t> rec(v.begin() + kStageOffset,
                             v.begin() + kStageOffset + sizeof(WireBatch) + bytes);
    WireBatch b{kRecBatch, bytes};
    std::memcpy(rec.data(), &b, sizeof b);
    // To the lane of the ring they were staged for: their thread's.
    uint32_t ring = 0;
    std::memcpy(&ring, v.data() + kStagedRingOffset, sizeof ring);
    OnRecord(*lanes_[rings_ > 1 && ring < rings_ ? ring : 0], rec.data(), rec.size());
  }
  for (auto& l : lanes_) {
    Deliver(*l);
    // Attempts whose thread made no call after them before the probes were detached.
    l->restarts.Flush(&l->out.syscalls);
    l->signals.Flush(&l->out.processes);
    Deliver(*l);
  }
}

void EbpfRecorder::Deliver(Lane& l) {
  for (auto& pe : l.out.processes) {
    if (pe.kind == ProcessEventKind::kFork) {
      if (pe.is_thread)
        ++l.threads;
      else
        ++l.processes, ++l.threads;
    }
  }
  auto& sc = l.out.syscalls;
  auto& pr = l.out.processes;
  l.restarts.Apply(&sc, pr);
  l.signals.Apply(sc, &pr);
  for (SyscallEvent& ev : sc) {
    // An in-kernel copy's data is read here, after the call, from the file the calls before it
    // name, at the offset they leave (the observer follows both; they are fed in order, so it
    // has seen those calls and not yet this one). Without an observer (--no-end-state) none
    // is captured: the descriptor may name another file by now.
    if (int src = CopySourceArg(ev.nr); src >= 0 && ev.ret > 0) {
      CopySource known;
      bool have = opt_.observer && opt_.observer->FileOf(ev.pid, static_cast<int>(ev.args[src]),
                                                         &known.path, &known.offset);
      if (have) CaptureCopiedData(ev, ev.tid, &known, false, opt_.max_buffer);
    }
    if (opt_.observer && opt_.observer->Wants(ev.nr)) opt_.observer->Observe(ev);
  }
  size_t calls = sc.size();
  bool handed;
  if (pr.empty()) {
    handed = writer_->AppendSyscalls(&sc, l.index);
  } else {
    // Process events first within a group would reorder them against calls; merge by time: a
    // call's place is where it returned, as in the ptrace backend's trace and the reader's merge
    // (a thread that ends while another's exec waits for it ends before that exec returns).
    size_t i = 0, j = 0;
    while (i < sc.size() || j < pr.size()) {
      bool take_proc = j < pr.size() && (i == sc.size() || pr[j].time_ns <= sc[i].LastNs());
      if (take_proc)
        l.batch.emplace_back(std::move(pr[j++]));
      else
        l.batch.emplace_back(std::move(sc[i++]));
    }
    sc.clear();
    pr.clear();
    handed = writer_->AppendBatch(&l.batch, l.index);
  }
  if (handed)
    l.syscalls += calls;
  else if (calls > 0)
    l.write_failed = true;
}

// The CPUs fay may run on, and the last of them alone (`split` when there are two or more).
struct CpuSets {
  cpu_set_t all, last;
  bool split = false;
};
CpuSets FayCpus() {
  CpuSets c;
  CPU_ZERO(&c.last);
  if (sched_getaffinity(0, sizeof c.all, &c.all) != 0 || CPU_COUNT(&c.all) < 2) return c;
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &c.all)) last = cpu;
  CPU_SET(last, &c.last);
  c.split = true;
  return c;
}

void EbpfRecorder::Consume(Lane& l) {
  auto feed = [this, &l](const void* d, size_t n) { OnRecord(l, d, n); };
  uint64_t* asleep = asleep_.get() + l.index;
  // The probes wake the consumer only when the ring fills, and only while it says it is asleep;
  // otherwise it looks every 2 ms while records come, less often (up to every 32 ms) while none
  // do. Small, frequent drains read the ring while it is still in the cache and leave less to
  // drain at the end: W3 took 171 ms against 178 with a look every 5 ms (medians of 25
  // interleaved runs).
  //
  // --loss=block: between megabytes the consumer freezes the program itself once its ring is
  // past the governor's mark. It is running while the ring fills, where the governor must be
  // woken, and a wakeup of even a real-time thread took 1 to 10 ms beside other kernel work
  // (this kernel does not preempt it): three full-speed writers lost events. The governor
  // still thaws.
  auto assist = [this, &l] {
    if (throttle_ && !throttle_->frozen() && l.ring->Pending() > FreezeMark()) throttle_->Freeze();
  };
  int wait_ms = kConsumerWaitMs;
  for (;;) {
    bool stopping = consumer_stop_.load(std::memory_order_acquire);
    uint64_t n = 0;
    for (uint64_t got = kAssistBytes; got >= kAssistBytes; n += got) {
      assist();
      got = l.ring->Drain(feed, kAssistBytes);
    }
    Deliver(l);
    if (n > 0) {
      wait_ms = kConsumerWaitMs;
      continue;
    }
    if (stopping) break;
    __atomic_store_n(asleep, 1, __ATOMIC_RELEASE);
    l.ring->Wait(wait_ms);
    __atomic_store_n(asleep, 0, __ATOMIC_RELEASE);
    wait_ms = std::min(2 * wait_ms, kConsumerIdleWaitMs);
    writer_->Tick(l.index);
  }
}

Status EbpfRecorder::GovernorEvents() {
  governor_ep_.reset(epoll_create1(EPOLL_CLOEXEC));
  governor_stop_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!governor_ep_ || !governor_stop_) return ErrnoError("cannot set up the governor's wakeups");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kMaxRings;
  if (epoll_ctl(governor_ep_.get(), EPOLL_CTL_ADD, governor_stop_.get(), &ev) != 0)
    return ErrnoError("cannot set up the governor's wakeups");
  for (uint32_t i = 0; i < rings_; ++i) {
    // Edge-triggered: a ring with records in it is the usual state, a wakeup is the event.
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u32 = i;
    if (epoll_ctl(governor_ep_.get(), EPOLL_CTL_ADD, maps_[RingSlot(i)]->fd(), &ev) != 0)
      return ErrnoError("cannot set up the governor's wakeups");
  }
  return Status::Ok();
}

// --loss=block: freeze the program while a ring is more than half full, thaw it once the
// consumers have brought every ring down to an eighth. Four threads reading cached files fill 8
// MiB in about a millisecond, so this thread must run on time even when the program's threads keep
// every CPU busy: it asks for a real-time priority (it sleeps nearly always). While the rings are
// calm it sleeps until the probes wake it: they look at the ring's fill every few calls and after
// every write straight to the ring, and force a wakeup past an eighth while it sleeps
// (kGovernorWakeSlot). It then looks every 100 µs until the rings are calm again.
//
// A thread that waits (a futex, a read) is woken to freeze, and its call returns ERESTARTSYS and
// is made again after the thaw. The trace shows the one call the program made (RestartMerger),
// but each freeze still costs such a thread a wakeup and a second entry into its call: freezing
// at a quarter paused W5 about 180 times, at half about 90. The room above half is two
// buffers of the largest size (kBufferShareOfRing), one for each CPU of the machines measured:
// more CPUs writing such buffers at the moment of a look could still fill a ring, and what the
// ring cannot take is counted as lost.
//
// Looking every millisecond instead, as it did before the probes could wake it, cost W3 6.6 ms
// of the program's own time (medians of 15 interleaved runs): each look preempts what runs
// where it wakes.
void EbpfRecorder::Govern(std::promise<void>& ready) {
  // While calm it wakes on one CPU only, the last fay may use: the program then mostly runs
  // elsewhere. Under pressure it may wake anywhere, so that a look lands on a CPU the frozen
  // program left idle. The consumer stays free: pinned beside this thread, W2 (whose consumer is
  // its bottleneck) took 20% longer.
  const CpuSets cpus = FayCpus();
  bool pinned = false;
  auto pin = [&](bool on) {
    if (!cpus.split || on == pinned) return;
    const cpu_set_t& set = on ? cpus.last : cpus.all;
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    pinned = on;
  };
  sched_param rt{};
  rt.sched_priority = 1;
  (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
  // Busy past the mark at which the probes wake this thread: one value, so that it never sleeps
  // on a ring the probes will not wake it for.
  const uint64_t high = FreezeMark(), low = ring_bytes_ / 8, busy = po_.wake_bytes;
  uint64_t* asleep = asleep_.get() + kGovernorWakeSlot;
  auto pending = [this] {
    uint64_t p = 0;
    for (const auto& l : lanes_) p = std::max(p, l->ring->Pending());
    return p;
  };
  bool fine_timeouts = true;
  bool told_ready = false;
  for (;;) {
    uint64_t now = pending();
    if (!throttle_->frozen() && now > high)
      throttle_->Freeze();
    else if (throttle_->frozen() && now < low)
      throttle_->Thaw();
    if (!told_ready) {
      ready.set_value();
      told_ready = true;
    }
    bool pressed = throttle_->frozen() || now > busy;
    pin(!pressed);
    timespec pause{0, 100'000};
    if (!pressed) {
      // Asleep from here: what the probes write from now on wakes this thread past an eighth,
      // and what they wrote before is looked at once more.
      __atomic_store_n(asleep, 1, __ATOMIC_SEQ_CST);
      if (pending() <= busy) pause = timespec{0, kGovernorCalmWaitMs * 1'000'000};
    }
    epoll_event ev[kMaxRings + 1];
    int n = -1;
    if (fine_timeouts) {
      n = epoll_pwait2(governor_ep_.get(), ev, kMaxRings + 1, &pause, nullptr);
      // Before 5.11, or under a seccomp profile that refuses it: millisecond timeouts.
      if (n < 0 && (errno == ENOSYS || errno == EPERM)) fine_timeouts = false;
    }
    if (!fine_timeouts) {
      long ms = std::max<long>(1, pause.tv_sec * 1000 + pause.tv_nsec / 1'000'000);
      n = epoll_wait(governor_ep_.get(), ev, kMaxRings + 1, static_cast<int>(ms));
    }
    __atomic_store_n(asleep, 0, __ATOMIC_RELEASE);
    if (governor_stopping_.load(std::memory_order_acquire)) break;
  }
  throttle_->Thaw();
}

Expected<RecordResult> EbpfRecorder::Run() {
  // -p: the process itself, held from here, whatever takes its pid once it is gone. It may end
  // while the probes load; its exit then comes before they see it (below).
  UniqueFd target;
  if (opt_.pid) {
    target.reset(static_cast<int>(syscall(SYS_pidfd_open, opt_.pid, 0)));
    if (!target && errno == ESRCH)
      return Error(Code::kNotFound, fmt::format("no process with pid {}", opt_.pid));
  }
  FAY_RETURN_IF_ERROR(Configure());
  RecordingInfo info = BaseRecordingInfo(opt_, "ebpf");
  info.max_buffer = max_buffer_;  // the ring bounds every buffer, even without --max-buffer
  result_.path = opt_.output.empty() ? DefaultOutputName(opt_) : opt_.output;

  // Threads (loader, writer, consumer) must not take the stop signals: blocked while they are
  // created.
  StopSignals signals;
  // Loading (allocating the ring, then the verifier) is most of start-up, and the command is
  // spawned and held meanwhile. Every return below must join the loader first: it fills maps_
  // and progs_.
  Status loaded = Error(Code::kInternal, "not loaded");
  std::thread loader([this, &loaded] {
    NameThisThread("fay-loader");
    loaded = Prepare();
    if (loaded.ok()) loaded = LoadProbes();
  });
  struct JoinLoader {
    std::thread& t;
    ~JoinLoader() {
      if (t.joinable()) t.join();
    }
  } join_loader{loader};
  std::optional<HeldChild> child;
  pid_t root = opt_.pid;
  if (block_) {
    auto throttle = Throttle::Create();
    if (!throttle.ok())
      // --loss=drop is a way out only for a user the kernel lets load programs at all.
      return Error(
          Code::kUnsupported,
          throttle.status().message() +
              (geteuid() == 0 ? "; hint: --loss=drop records without throttling, counting what it "
                                "loses"
                              : "; the eBPF backend needs root"));
    throttle_ = std::move(throttle).value();
    FAY_RETURN_IF_ERROR(throttle_->StartWatchdog());
  }
  if (!opt_.pid) {
    FAY_ASSIGN_OR_RETURN(std::string exe, ResolveCommand(opt_.argv[0]));
    // As with ptrace's EXITKILL, the command does not outlive a fay killed with SIGKILL: it
    // could be left frozen (--loss=block), and would run on unrecorded.
    HeldChild::SpawnOptions so;
    so.exe = exe;
    so.die_with_parent = true;
    so.cgroup_fd = throttle_ ? throttle_->cgroup_fd() : -1;
    auto spawned = HeldChild::Spawn(opt_.argv, so);
    if (!spawned.ok()) return spawned.status();
    child = std::move(spawned).value();
    root = child->pid();
    if (throttle_) FAY_RETURN_IF_ERROR(throttle_->Adopt(root));
  }
  info.root_pid = root;
  info.anchor_monotonic_ns = Now(CLOCK_MONOTONIC);
  info.anchor_realtime_ns = Now(CLOCK_REALTIME);
  trace::WriterOptions wo;
  wo.encode_on_caller = true;  // the consumer thread encodes (see WriterOptions)
  // The consumer must keep up with a program making millions of calls a second; zstd's fastest
  // level costs half as much per event for a trace a few percent larger.
  wo.zstd_level = 1;
  wo.lanes = rings_;
  wo.flight = opt_.flight;
  // Made while the loader works: this thread would otherwise only wait for it.
  auto writer = trace::Writer::Create(result_.path, info, wo);
  if (!writer.ok()) {
    return writer.status();  // the held child is killed and reaped by its destructor
  }
  writer_ = std::move(writer).value();
  const OutputFile made = IdentifyOutput(result_.path);
  // Nothing was recorded: no file is left behind.
  auto abandon = [this, &made](Status st) {
    links_.clear();
    writer_->Close();
    RemoveOutput(result_.path, made);
    return st;
  };
  loader.join();
  if (!loaded.ok()) return abandon(loaded);
  uint32_t key = static_cast<uint32_t>(root);
  uint8_t alive = 1;
  if (Status st = maps_[kMapTraced]->Update(&key, &alive); !st.ok()) return abandon(st);
  {
    std::vector<uint64_t> states(StatesBytes(pid_limit_) / 8);
    uint64_t pid = key & (pid_limit_ - 1);
    // A command is held before its exec: only the exec is recorded until it runs.
    uint64_t state = opt_.pid ? kActive : kPendingExec;
    states[pid >> 5] |= state << ((pid & 31) * 2);
    uint32_t zero = 0;
    if (Status st = maps_[kMapStates]->Update(&zero, states.data()); !st.ok()) return abandon(st);
  }
  for (uint32_t i = 0; i < rings_; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->index = i;
    // A consumer thread is its lane's encoding thread: it may store blobs directly. Not for a
    // flight recorder: a blob stored ahead of its call could land in an older group of the ring
    // than the call (trace/flight.h), and be evicted from under it.
    if (!opt_.flight)
      lane->assembler.set_blob_store(
          [this, i](const uint8_t* data, size_t n) { return writer_->StoreBlobNow(data, n, i); });
    auto ring = bpf::RingConsumer::Create(maps_[RingSlot(i)]->fd(), ring_bytes_);
    if (!ring.ok()) return abandon(ring.status());
    lane->ring = std::move(ring).value();
    lanes_.push_back(std::move(lane));
  }
  // Before anything is attached: a failure past that point would leave threads to join.
  if (throttle_) {
    if (Status st = GovernorEvents(); !st.ok()) return abandon(st);
  }
  if (Status st = AttachProcessProbes(); !st.ok()) return abandon(st);
  if (Status st = AttachSyscallProbes(); !st.ok()) return abandon(st);
  std::vector<std::thread> consumers;
  for (auto& l : lanes_)
    consumers.emplace_back([this, lp = l.get()] {
      NameThisThread("fay-consumer");
      // --loss=block: a consumer that competes as an equal with the program's threads (and
      // whatever else the machine runs) can be kept from draining and from freezing (assist)
      // for 10 ms, and three writers fill the half above the mark in 6. Ahead of them, losses
      // under a busy machine went from 4 in 240 runs to none in 240. Root only, as block is.
      if (block_) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kConsumerNice);
      Consume(*lp);
    });
  // The command runs only once the governor looks at the rings: a governor thread the
  // scheduler started late (a busy machine) let the ring fill and lose thousands of events.
  std::promise<void> governor_ready;
  std::thread governor;
  if (throttle_) {
    governor = std::thread([this, &governor_ready] {
      NameThisThread("fay-governor");
      Govern(governor_ready);
    });
    governor_ready.get_future().wait();
  }

  signals.Handle(OnStopSignal);
  if (opt_.pid) {
    pollfd gone{target.get(), POLLIN, 0};
    uint64_t threads = CountThreads(opt_.pid);
    // Gone while the probes loaded: nothing was attached to; the run ends at once (below).
    if (target ? poll(&gone, 1, 0) != 1 : threads != 0) SayAttached(opt_, result_.path, threads);
  }

  uint64_t t0 = Now(CLOCK_MONOTONIC);
  Status released = child ? child->Release() : Status::Ok();
  int status = 0;
  bool exited = false;
  if (released.ok()) {
    result_.processes = 1;
    result_.threads = 1;
    int pidfd = target ? target.get() : static_cast<int>(syscall(SYS_pidfd_open, root, 0));
    while (!exited && !g_stop_signal) {
      pollfd p{pidfd, POLLIN, 0};
      if (pidfd >= 0)
        poll(&p, 1, 100);
      else
        usleep(1000);
      // A -p process is not fay's child: its end is when its pidfd turns readable.
      exited = child ? child->TryWait(&status) : (pidfd < 0 || (p.revents & POLLIN));
    }
    if (pidfd >= 0 && !target) close(pidfd);
    // A -p process that ended before the probes were attached is still in the traced set (no
    // exit probe saw it go), and the wait below would last until another process took its pid,
    // then record that one. Its pidfd turns readable only after its exit tracepoint has run, so
    // an exit the probes did see has already removed it. (Its bit in the states array stays
    // set: a process that took the pid in the tens of milliseconds before the links go would
    // have its first calls recorded. Clearing it here would race with the programs' updates.)
    if (exited && target) {
      uint32_t gone = static_cast<uint32_t>(root);
      (void)maps_[kMapTraced]->Delete(&gone);
    }
    // Descendants that outlive the command are recorded until they end too.
    while (exited && !g_stop_signal && !maps_[kMapTraced]->Keys().empty()) usleep(2000);
  }
  result_.detached = !exited;
  // Detach every probe, the syscall probes first: until they are gone, a thread that moves
  // to another CPU must still find its staged calls written out by sched_switch.
  while (!links_.empty()) links_.pop_back();
  consumer_stop_.store(true, std::memory_order_release);
  for (auto& l : lanes_) l->ring->Wake();
  for (std::thread& t : consumers) t.join();
  DrainStaged();
  for (const auto& l : lanes_) {
    result_.restarts_folded += l->restarts.folded();
    result_.syscalls += l->syscalls;
    result_.processes += l->processes;
    result_.threads += l->threads;
  }
  if (governor.joinable()) {
    governor_stopping_.store(true, std::memory_order_release);
    uint64_t one = 1;
    (void)!write(governor_stop_.get(), &one, sizeof one);
    governor.join();
  }
  if (throttle_) result_.pauses = throttle_->freezes();
  throttle_.reset();  // thawed; a detached command runs on where it was

  // Losses: records the ring had no room for, per CPU.
  uint32_t zero = 0;
  if (auto per_cpu = maps_[kMapScratch]->LookupPerCpu(&zero); per_cpu.ok()) {
    uint64_t now = Now(CLOCK_MONOTONIC);
    for (size_t cpu = 0; cpu < per_cpu->size(); ++cpu) {
      uint64_t v[kStatCount];
      if ((*per_cpu)[cpu].size() < kStatsOffset + sizeof v) continue;
      std::memcpy(v, (*per_cpu)[cpu].data() + kStatsOffset, sizeof v);
      uint64_t lost = v[kStatLostRecords] + v[kStatLostFragments];
      if (!lost) continue;
      result_.lost_events += lost;
      writer_->AppendLoss(now, lost, static_cast<int32_t>(cpu));
      if (!opt_.quiet)
        fmt::print(stderr,
                   "fay: the ring buffer was full: {} events and {} buffer fragments lost on "
                   "CPU {}\n",
                   v[kStatLostRecords], v[kStatLostFragments], cpu);
    }
    // --loss=block promised nothing would be lost: said even under -q.
    if (result_.lost_events && block_ && opt_.quiet)
      fmt::print(stderr,
                 "fay: warning: {} events lost although --loss=block froze the program (fay "
                 "was kept from running); fay info shows them per CPU\n",
                 result_.lost_events);
    if (result_.lost_events && !opt_.quiet)
      fmt::print(stderr, "fay: hint: --ring-size {} (now {}){}\n", RingSizeText(ring_bytes_ * 4),
                 RingSizeText(ring_bytes_), block_ ? "" : " or --loss=block");
  }
  Status closed = writer_->Close();
  if (!closed.ok() && result_.error.empty()) result_.error = closed.message();
  bool write_failed = false;
  for (const auto& l : lanes_) write_failed |= l->write_failed;
  if (write_failed && result_.error.empty())
    result_.error = "the trace could not be written (disk full or I/O error)";
  trace::WriterStats st = writer_->stats();
  // After a failed write, what the file holds, as the writer counts it. Not the smaller of that
  // and what was handed over: a batch refused part-way had its first calls written already.
  if (!closed.ok()) result_.syscalls = st.syscall_events;
  result_.bytes_captured = st.bytes_captured;
  result_.file_bytes = st.file_bytes;
  result_.seconds = (Now(CLOCK_MONOTONIC) - t0) / 1e9;
  signals.Restore();
  if (!released.ok()) {
    RemoveOutput(result_.path, made);
    return released;
  }
  if (!exited && child) {
    // Stopped by a signal: the command runs on; its status is still ours to report.
    while (!child->TryWait(&status)) usleep(1000);
  }
  result_.exit_code = status;
  if (!result_.error.empty()) result_.exit_code = 1;
  return result_;
}

}  // namespace

Expected<RecordResult> RecordWithEbpf(const RecordOptions& options) {
  EbpfRecorder r(options);
  return r.Run();
}

Status CheckEbpfRecording() {
  RecordOptions options;
  options.argv = {"/bin/true"};
  EbpfRecorder r(options);
  return r.LoadOnly();
}

}  // namespace fay::record
