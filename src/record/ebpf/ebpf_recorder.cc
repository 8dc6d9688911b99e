#include "record/ebpf/ebpf_recorder.h"

#include "bpf/btf_offsets.h"

#include <bpf/btf.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "bpf/attach.h"
#include "bpf/map.h"
#include "bpf/program.h"
#include "bpf/ringbuf.h"
#include "common/child_process.h"
#include "probes/tracefs.h"
#include "record/ebpf/capture_spec.h"
#include "record/stop_signals.h"
#include "record/task_info.h"
#include "schema/syscall_set.h"
#include "schema/syscall_table.h"
#include "trace/writer.h"

extern char** environ;

namespace fay::record {
namespace ebpf {

bool Assembler::Feed(const void* data, size_t size, Out* out) {
  if (size < 4) return false;
  uint32_t type;
  std::memcpy(&type, data, 4);
  const auto* bytes = static_cast<const uint8_t*>(data);
  switch (type) {
    case kRecFrag: {
      if (size < sizeof(WireFragHeader)) return false;
      WireFragHeader h;
      std::memcpy(&h, data, sizeof h);
      if (sizeof h + h.len > size) return false;
      Pending& p = pending_[static_cast<int32_t>(h.tid)];
      if (p.seq != h.seq) {
        orphan_fragments_ += p.buffers.size();
        p.seq = h.seq;
        p.buffers.clear();
        p.explicit_flags.clear();
      }
      if (h.offset == 0) {
        CapturedBuffer b;
        b.arg = h.arg;
        b.sub = h.sub;
        b.dir = static_cast<BufferDir>(h.dir);
        b.addr = h.addr;
        b.length = h.total;
        p.buffers.push_back(std::move(b));
        p.explicit_flags.push_back(h.flags);
      } else if (p.buffers.empty() || p.buffers.back().arg != h.arg ||
                 p.buffers.back().dir != static_cast<BufferDir>(h.dir) ||
                 p.buffers.back().bytes.size() != h.offset) {
        ++orphan_fragments_;  // its predecessor was lost
        return true;
      }
      auto& v = p.buffers.back().bytes;
      v.insert(v.end(), bytes + sizeof h, bytes + sizeof h + h.len);
      return true;
    }
    case kRecSyscall: {
      if (size < sizeof(WireSyscall)) return false;
      WireSyscall w;
      std::memcpy(&w, data, sizeof w);
      SyscallEvent ev;
      ev.entry_ns = w.entry_ns;
      ev.exit_ns = w.exit_ns;
      ev.pid = static_cast<int32_t>(w.tgid);
      ev.tid = static_cast<int32_t>(w.tid);
      ev.ppid = static_cast<int32_t>(w.ppid);
      ev.uid = w.uid;
      std::memcpy(ev.comm.data(), w.comm, 16);
      ev.nr = static_cast<int32_t>(w.nr);
      for (int i = 0; i < 6; ++i) ev.args[i] = w.args[i];
      ev.ret = w.ret;
      ev.flags = w.flags;
      auto it = pending_.find(ev.tid);
      if (it != pending_.end()) {
        Pending& p = it->second;
        if (p.seq == w.entry_ns) {
          for (size_t i = 0; i < p.buffers.size(); ++i) {
            CapturedBuffer& b = p.buffers[i];
            uint32_t f = p.explicit_flags[i];
            if (f & kFragExplicit) {
              b.truncated = f & kFragTruncated;
              b.not_captured = f & kFragNotCaptured;
            } else if (b.bytes.empty() && b.length > 0) {
              b.not_captured = true;
            } else {
              b.truncated = b.bytes.size() < b.length;
            }
          }
          ev.buffers = std::move(p.buffers);
        } else {
          orphan_fragments_ += p.buffers.size();
        }
        pending_.erase(it);
      }
      out->syscalls.push_back(std::move(ev));
      return true;
    }
    case kRecFork:
    case kRecExec:
    case kRecExit: {
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
      pe.parent_pid = static_cast<int32_t>(w.parent);
      pe.is_thread = w.is_thread != 0;
      pe.exit_status = w.exit_code;
      if (type == kRecExec && size >= sizeof w)
        pe.path.assign(w.filename, strnlen(w.filename, sizeof w.filename));
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
  return Status::Ok();
}

class EbpfRecorder {
 public:
  explicit EbpfRecorder(const RecordOptions& options) : opt_(options) {}
  Expected<RecordResult> Run();

 private:
  Status Load();
  Status Attach();
  void Consume();
  int OnRecord(const void* data, size_t size);

  const RecordOptions& opt_;
  RecordResult result_;
  SyscallSet filter_ = SyscallSet::All();
  std::optional<bpf::Map> maps_[kMapCount];
  std::vector<bpf::Program> progs_;
  std::vector<bpf::Link> links_;
  int exec_tp_ = -1, exit_tp_ = -1;
  std::unique_ptr<trace::Writer> writer_;
  std::unique_ptr<bpf::RingBufferReader> ring_;
  std::atomic<bool> consumer_stop_{false};
  Assembler assembler_;
  Assembler::Out out_;
  bool write_failed_ = false;
};

Status EbpfRecorder::Load() {
  if (!opt_.syscall_filter.empty()) {
    FAY_ASSIGN_OR_RETURN(filter_, ParseSyscallSet(opt_.syscall_filter));
  }
  ProbeOptions po;
  po.max_buffer = opt_.max_buffer;
  FAY_RETURN_IF_ERROR(TaskOffsetsFromBtf(&po));
  FAY_RETURN_IF_ERROR(EnsureTracefs());
  FAY_ASSIGN_OR_RETURN(std::string root, TracefsRoot());
  FAY_ASSIGN_OR_RETURN(EventFormat exec_fmt, ReadEventFormat(root, "sched", "sched_process_exec"));
  FAY_ASSIGN_OR_RETURN(EventFormat exit_fmt, ReadEventFormat(root, "sched", "sched_process_exit"));
  exec_tp_ = exec_fmt.id;
  exit_tp_ = exit_fmt.id;
  for (const auto& f : exec_fmt.fields)
    if (f.name == "filename" && f.is_data_loc) po.exec_filename_off = f.offset;
  for (const auto& f : exit_fmt.fields)
    if (f.name == "group_dead") po.exit_group_dead_off = f.offset;

  auto mk = [&](int slot, bpf_map_type type, const char* name, uint32_t k, uint32_t v, uint32_t n,
                uint32_t flags = 0) -> Status {
    FAY_ASSIGN_OR_RETURN(bpf::Map m, bpf::Map::Create(type, name, k, v, n, flags));
    maps_[slot] = std::move(m);
    return Status::Ok();
  };
  FAY_RETURN_IF_ERROR(mk(kMapTraced, BPF_MAP_TYPE_HASH, "fay_rec_traced", 4, 1, 65536));
  FAY_RETURN_IF_ERROR(mk(kMapEntry, BPF_MAP_TYPE_HASH, "fay_rec_entry", 4, 64, 65536));
  FAY_RETURN_IF_ERROR(
      mk(kMapSpec, BPF_MAP_TYPE_ARRAY, "fay_rec_spec", 4, sizeof(SyscallSpec), kMaxNr));
  FAY_RETURN_IF_ERROR(
      mk(kMapScratch, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_rec_scratch", 4, kScratchSize, 1));
  FAY_RETURN_IF_ERROR(mk(kMapRing, BPF_MAP_TYPE_RINGBUF, "fay_rec_ring", 0, 0, 64u << 20));
  FAY_RETURN_IF_ERROR(mk(kMapStats, BPF_MAP_TYPE_PERCPU_ARRAY, "fay_rec_stats", 4, 16, 1));
  for (int nr = 0; nr < kMaxNr; ++nr) {
    SyscallSpec s = BuildSyscallSpec(nr);
    s.record = filter_.Contains(nr) ? 1 : 0;
    uint32_t key = static_cast<uint32_t>(nr);
    FAY_RETURN_IF_ERROR(maps_[kMapSpec]->Update(&key, &s));
  }
  FAY_ASSIGN_OR_RETURN(ProbeSet set, GenerateProbes(po));
  std::vector<int> fds;
  for (auto& m : maps_) fds.push_back(m->fd());
  for (const bpf::ProgramSpec* spec :
       {&set.sys_enter, &set.sys_exit, &set.fork, &set.exec, &set.exit}) {
    FAY_ASSIGN_OR_RETURN(bpf::Program p, bpf::Program::Load(*spec, fds));
    progs_.push_back(std::move(p));
  }
  return Status::Ok();
}

Status EbpfRecorder::Attach() {
  // Process tracking first, so no fork between two attachments is missed.
  FAY_ASSIGN_OR_RETURN(bpf::Link fork, bpf::AttachRawTracepoint(progs_[2], "sched_process_fork"));
  links_.push_back(std::move(fork));
  FAY_ASSIGN_OR_RETURN(bpf::Link exec, bpf::AttachTracepoint(progs_[3], exec_tp_));
  links_.push_back(std::move(exec));
  FAY_ASSIGN_OR_RETURN(bpf::Link exit, bpf::AttachTracepoint(progs_[4], exit_tp_));
  links_.push_back(std::move(exit));
  FAY_ASSIGN_OR_RETURN(bpf::Link sx, bpf::AttachRawTracepoint(progs_[1], "sys_exit"));
  links_.push_back(std::move(sx));
  FAY_ASSIGN_OR_RETURN(bpf::Link se, bpf::AttachRawTracepoint(progs_[0], "sys_enter"));
  links_.push_back(std::move(se));
  return Status::Ok();
}

int EbpfRecorder::OnRecord(const void* data, size_t size) {
  assembler_.Feed(data, size, &out_);
  for (auto& pe : out_.processes) {
    if (pe.kind == ProcessEventKind::kFork) {
      if (pe.is_thread)
        ++result_.threads;
      else
        ++result_.processes, ++result_.threads;
    }
    writer_->Append(std::move(pe));
  }
  for (auto& ev : out_.syscalls) {
    if (!writer_->Append(std::move(ev))) {
      write_failed_ = true;
      continue;
    }
    ++result_.syscalls;
  }
  out_.syscalls.clear();
  out_.processes.clear();
  return 0;
}

void EbpfRecorder::Consume() {
  while (!consumer_stop_.load(std::memory_order_acquire)) {
    auto n = ring_->Poll(50);
    if (!n.ok()) break;
  }
  (void)ring_->Consume();
}

Expected<RecordResult> EbpfRecorder::Run() {
  if (opt_.pid)
    return Error(Code::kUnsupported,
                 "fay record --backend ebpf -p is not available yet; use --backend ptrace");
  FAY_RETURN_IF_ERROR(Load());
  RecordingInfo info = BaseRecordingInfo(opt_, "ebpf");
  result_.path = opt_.output.empty() ? DefaultOutputName(opt_) : opt_.output;

  // Threads (writer, consumer) must not take the stop signals: blocked while they are created.
  StopSignals signals;
  auto child = HeldChild::Spawn(opt_.argv);
  if (!child.ok()) {
    return child.status();
  }
  info.root_pid = child->pid();
  uint32_t key = static_cast<uint32_t>(child->pid());
  uint8_t pending = kPendingExec;
  if (Status st = maps_[kMapTraced]->Update(&key, &pending); !st.ok()) {
    return st;
  }
  info.anchor_monotonic_ns = Now(CLOCK_MONOTONIC);
  info.anchor_realtime_ns = Now(CLOCK_REALTIME);
  auto writer = trace::Writer::Create(result_.path, info);
  if (!writer.ok()) {
    return writer.status();  // the held child is killed and reaped by its destructor
  }
  writer_ = std::move(writer).value();
  auto ring = bpf::RingBufferReader::Create(
      maps_[kMapRing]->fd(), [this](const void* d, size_t n) { return OnRecord(d, n); });
  if (!ring.ok()) {
    writer_->Close();
    unlink(result_.path.c_str());
    return ring.status();
  }
  ring_ = std::move(ring).value();
  if (Status st = Attach(); !st.ok()) {
    links_.clear();
    writer_->Close();
    unlink(result_.path.c_str());
    return st;
  }
  std::thread consumer([this] { Consume(); });

  signals.Handle(OnStopSignal);

  uint64_t t0 = Now(CLOCK_MONOTONIC);
  Status released = child->Release();
  int status = 0;
  bool exited = false;
  if (released.ok()) {
    result_.processes = 1;
    result_.threads = 1;
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child->pid(), 0));
    while (!exited && !g_stop_signal) {
      pollfd p{pidfd, POLLIN, 0};
      if (pidfd >= 0)
        poll(&p, 1, 100);
      else
        usleep(1000);
      exited = child->TryWait(&status);
    }
    if (pidfd >= 0) close(pidfd);
    // Descendants that outlive the command are recorded until they end too.
    while (exited && !g_stop_signal && !maps_[kMapTraced]->Keys().empty()) usleep(5000);
  }
  result_.detached = !exited;
  links_.clear();  // detach every probe
  consumer_stop_.store(true, std::memory_order_release);
  consumer.join();

  // Losses: records the ring had no room for, per CPU.
  uint32_t zero = 0;
  uint64_t lost_records = 0, lost_fragments = 0;
  if (auto per_cpu = maps_[kMapStats]->LookupPerCpu(&zero); per_cpu.ok()) {
    for (const auto& slice : *per_cpu) {
      uint64_t v[2];
      std::memcpy(v, slice.data(), 16);
      lost_records += v[0];
      lost_fragments += v[1];
    }
  }
  if (lost_records + lost_fragments) {
    writer_->AppendLoss(Now(CLOCK_MONOTONIC), lost_records + lost_fragments);
    if (!opt_.quiet)
      fmt::print(stderr, "fay: the ring buffer was full: {} events and {} buffer fragments lost\n",
                 lost_records, lost_fragments);
  }
  Status closed = writer_->Close();
  if (!closed.ok() && result_.error.empty()) result_.error = closed.message();
  if (write_failed_ && result_.error.empty())
    result_.error = "the trace could not be written (disk full or I/O error)";
  trace::WriterStats st = writer_->stats();
  result_.bytes_captured = st.bytes_captured;
  result_.file_bytes = st.file_bytes;
  result_.seconds = (Now(CLOCK_MONOTONIC) - t0) / 1e9;
  signals.Restore();
  if (!released.ok()) {
    unlink(result_.path.c_str());
    return released;
  }
  if (!exited) {
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

}  // namespace fay::record
