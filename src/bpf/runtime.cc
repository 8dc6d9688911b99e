#include "bpf/runtime.h"

#include <dirent.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "bpf/btf_offsets.h"
#include "bpf/stack_map.h"
#include "probes/tracefs.h"

namespace fay::bpf {
namespace {

// A raw syscalls program's filter: the number of each of the plan's system calls -> its probe
// index + 1.
Status FillSysFilter(const Plan& plan, Map& filter) {
  for (size_t i = 0; i < plan.probes.size(); ++i) {
    const ProbeInfo& p = plan.probes[i];
    if (p.kind != ProbeKind::kSyscall || p.syscall_nr < 0 || p.syscall_nr >= kMaxSyscalls) continue;
    uint32_t key = p.syscall_nr, val = static_cast<uint32_t>(i) + 1;
    FAY_RETURN_IF_ERROR(filter.Update(&key, &val));
  }
  return Status::Ok();
}

// A kstack key: its frames are the kernel's, named from kallsyms.
bool IsKernelStack(const Slot& s) {
  return s.expr && s.expr->kind == ExprKind::kField && s.expr->name == "kstack";
}

Expected<int> TracepointId(const std::string& category, const std::string& name) {
  FAY_ASSIGN_OR_RETURN(std::string root, TracefsRoot());
  std::ifstream in(root + "/events/" + category + "/" + name + "/id");
  int id = -1;
  if (!(in >> id))
    return Error(Code::kNotFound,
                 fmt::format("tracepoint {}:{} not found under {}/events", category, name, root));
  return id;
}

// The tasks (thread ids) of process `pid`, from /proc/PID/task.
std::vector<pid_t> TasksOf(pid_t pid) {
  std::vector<pid_t> out;
  std::string dir = fmt::format("/proc/{}/task", pid);
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* ent = readdir(d))
    if (ent->d_name[0] != '.') out.push_back(static_cast<pid_t>(atoi(ent->d_name)));
  closedir(d);
  return out;
}

// Children of `pid`, from /proc/PID/task/*/children.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  for (pid_t tid : TasksOf(pid)) {
    std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, tid));
    pid_t c;
    while (in >> c) out.push_back(c);
  }
  return out;
}

// The record offset of a tracepoint's field, read from its tracefs format.
int FieldOffset(const std::string& category, const std::string& name, const std::string& field,
                int fallback) {
  auto root = TracefsRoot();
  if (!root.ok()) return fallback;
  auto format = ReadEventFormat(*root, category, name);
  if (!format.ok()) return fallback;
  for (const auto& f : format->fields)
    if (f.name == field && f.size == 4) return f.offset;
  return fallback;
}

}  // namespace

Expected<std::unique_ptr<LiveQuery>> LiveQuery::Load(const Plan& plan,
                                                     const CodegenOptions& options) {
  std::unique_ptr<LiveQuery> q(new LiveQuery(plan));
  CodegenOptions opts = options;
  if (opts.task_comm_offset < 0) {
    auto off = TaskStructOffsets();
    if (off.ok()) {
      opts.task_comm_offset = off->comm;
      opts.task_pid_offset = off->pid;
      opts.task_tgid_offset = off->tgid;
    }
  }
  // Scope tracking through the tracepoints reads their pid fields' offsets from tracefs.
  auto scope_offsets = [&] {
    if (!opts.scoped || RawScope(opts)) return;
    opts.fork_child_off =
        FieldOffset("sched", "sched_process_fork", "child_pid", opts.fork_child_off);
    opts.free_pid_off = FieldOffset("sched", "sched_process_free", "pid", opts.free_pid_off);
  };
  scope_offsets();
  auto loaded = q->LoadWith(opts);
  if (!loaded.ok() && opts.task_comm_offset >= 0) {
    // A kernel that will not let tracepoint programs follow BTF pointers still has the helpers.
    q.reset(new LiveQuery(plan));
    opts.task_comm_offset = opts.task_pid_offset = opts.task_tgid_offset = -1;
    scope_offsets();
    loaded = q->LoadWith(opts);
  }
  FAY_RETURN_IF_ERROR(loaded);
  return q;
}

Status LiveQuery::LoadWith(const CodegenOptions& options) {
  LiveQuery* q = this;
  FAY_ASSIGN_OR_RETURN(q->gen_, Generate(plan_, options));
  std::vector<int> fds(kMapCount, -1);
  for (int i = 0; i < kMapCount; ++i) {
    const MapDesc& d = q->gen_.maps[i];
    if (!d.used) continue;
    Expected<Map> m =
        d.type == BPF_MAP_TYPE_STACK_TRACE
            ? CreateStackMap(d.name, d.max_entries)
            : Map::Create(d.type, d.name, d.key_size, d.value_size, d.max_entries, d.flags);
    if (!m.ok()) return m.status();
    fds[i] = m->fd();
    q->maps_[i] = std::move(m).value();
  }
  const Plan& plan = plan_;
  if (plan.use_raw_syscalls) FAY_RETURN_IF_ERROR(FillSysFilter(plan, *q->maps_[kMapSysFilter]));
  for (size_t s = 0; s < plan.states.size(); ++s)
    if (plan.states[s]->use_raw_syscalls)
      FAY_RETURN_IF_ERROR(FillSysFilter(*plan.states[s], *q->maps_[kMapStateSysFilter0 + s]));
  for (const auto& gp : q->gen_.programs) {
    ProgramSpec spec{gp.type, gp.name, gp.insns, gp.relocs};
    spec.expected_attach_type = static_cast<bpf_attach_type>(gp.expected_attach_type);
    FAY_ASSIGN_OR_RETURN(Program prog, Program::Load(spec, fds));
    q->programs_.push_back(std::move(prog));
  }
  return Status::Ok();
}

Status LiveQuery::AddScopePid(pid_t pid, bool pending_exec) {
  if (!maps_[kMapScope]) return Status::Ok();
  uint32_t key = static_cast<uint32_t>(pid);
  uint8_t state = pending_exec ? kScopePendingExec : kScopeActive;
  FAY_RETURN_IF_ERROR(maps_[kMapScope]->Update(&key, &state));
  // Its threads by their own ids too: the tracepoints that name another task (a wakeup's
  // wakee) look a thread up by its id. A thread gone since is harmless: ids are not reused
  // before the task is freed, and then the free program would drop it.
  for (pid_t tid : TasksOf(pid)) {
    uint32_t k = static_cast<uint32_t>(tid);
    if (tid != pid) FAY_RETURN_IF_ERROR(maps_[kMapScope]->Update(&k, &state));
  }
  for (pid_t c : ChildrenOf(pid)) FAY_RETURN_IF_ERROR(AddScopePid(c));
  return Status::Ok();
}

Status LiveQuery::Attach(const std::function<bool()>& interrupted) {
  FAY_RETURN_IF_ERROR(EnsureTracefs());
  // Before any probe: a process that starts after it has its mappings recorded. Without the
  // records, frames are named from /proc while their process runs, as before.
  if (HasUserAddresses(plan_) && !mmap_events_) {
    auto ev = MmapEvents::Open();
    // Without them (no perf events), frames are named from /proc as before: not worth a
    // warning, which would also stand for the reason a query attached nothing.
    if (ev.ok()) mmap_events_ = std::move(ev).value();
  }
  // The kernel runs the programs of one tracepoint in the order they were attached, and the
  // order matters where a scope program shares a tracepoint with the query's:
  //  - fork tracking and the held command's start go first, so no fork slips between attaching
  //    the probes and tracking it, and the command's first execve is already its own when the
  //    query's sys_enter program sees it;
  //  - dropping a freed task goes last, so the query's sched_process_free program still sees
  //    the task in scope.
  //  - where one probe both reads a state (the query) and remembers it (a state pipeline),
  //    the read runs first and sees the value from before this event. A tracepoint runs its
  //    programs first attached first, but a function's uprobes run last attached first.
  std::vector<size_t> order;
  auto add = [&](ProgRole role, int uprobes) {
    for (size_t i = 0; i < gen_.programs.size(); ++i) {
      const Attachment& a = gen_.programs[i].attach;
      const bool uprobe = a.kind == AttachKind::kUprobe || a.kind == AttachKind::kUprobeMulti;
      if (a.role == role && (uprobes < 0 || uprobe == (uprobes == 1))) order.push_back(i);
    }
  };
  add(ProgRole::kScopeFork, -1);
  add(ProgRole::kScopeStart, -1);
  add(ProgRole::kEntry, -1);
  add(ProgRole::kRemember, 1);
  add(ProgRole::kMain, -1);
  add(ProgRole::kRemember, 0);
  add(ProgRole::kScopeFree, -1);

  // One probe of many that the kernel refuses (an instruction a uprobe cannot replace, an
  // event that admits no program) is skipped with a warning; only a query left with nothing to
  // attach fails. Its entry or exit half goes with it.
  std::vector<bool> skipped(plan_.probes.size(), false);
  size_t attached_probes = 0, done = 0;
  for (size_t i : order) {
    const Attachment& a = gen_.programs[i].attach;
    const Program& prog = programs_[i];
    if (interrupted && interrupted())
      return Status(Code::kIo, fmt::format("interrupted while attaching ({} of {} programs "
                                           "attached); nothing was traced",
                                           done, order.size()));
    ++done;
    if (a.role == ProgRole::kRemember) {
      // A state pipeline's probes are all needed: none is skipped.
      const Plan& sp = *plan_.states[static_cast<size_t>(a.state)];
      auto link = AttachPoint(prog, a, sp);
      if (!link.ok())
        return Status(link.status().code(),
                      fmt::format("{} (remember {}): {}",
                                  a.probe_index >= 0 ? sp.probes[a.probe_index].name : a.name,
                                  sp.remember_name, link.status().message()));
      links_.push_back(std::move(link).value());
      continue;
    }
    if (a.probe_index >= 0 && skipped[a.probe_index]) continue;
    auto elsewhere = [this](int probe) {
      return probe >= 0 && static_cast<size_t>(probe) < elsewhere_.size() && elsewhere_[probe];
    };
    if (elsewhere(a.probe_index)) continue;
    Attachment kept;
    if (a.kind == AttachKind::kUprobeMulti && !elsewhere_.empty()) {
      kept = a;
      kept.probes.clear();
      for (int p : a.probes)
        if (!elsewhere(p)) kept.probes.push_back(p);
      if (kept.probes.empty()) continue;
    }
    // An unknown tracepoint fails the query; only the kernel's refusal to attach is skipped.
    if (a.kind == AttachKind::kTracepoint)
      if (auto id = TracepointId(a.category, a.name); !id.ok()) return id.status();
    Expected<Link> link =
        a.kind == AttachKind::kUprobeMulti
            ? AttachUprobeGroup(prog, a, elsewhere_.empty() ? a.probes : kept.probes)
            : AttachPoint(prog, a, plan_);
    if (!link.ok()) {
      bool skippable = a.probe_index >= 0 && plan_.probes.size() > 1 &&
                       (a.kind == AttachKind::kTracepoint || a.kind == AttachKind::kUprobe);
      if (!skippable) {
        if (a.kind != AttachKind::kUprobe) return link.status();
        return Status(link.status().code(),
                      plan_.probes[a.probe_index].name + ": " + link.status().message());
      }
      std::string msg = link.status().message();
      warnings_.push_back(fmt::format("skipped {}: {}", plan_.probes[a.probe_index].name,
                                      msg.substr(0, msg.find('\n'))));
      skipped[a.probe_index] = true;
      continue;
    }
    if (a.role == ProgRole::kMain) ++attached_probes;
    if (a.role == ProgRole::kScopeStart)
      start_link_ = std::move(link).value();
    else
      links_.push_back(std::move(link).value());
  }
  if (std::count(skipped.begin(), skipped.end(), true) > 0 && attached_probes == 0)
    return Status(Code::kPermission, fmt::format("the kernel refused every probe of the query: {}",
                                                 warnings_.empty() ? "" : warnings_.front()));
  return Status::Ok();
}

// One program at its point; a uprobe_multi program at every function of Attachment::probes.
// `owner` is the plan whose probes the attachment's indices name.
Expected<Link> LiveQuery::AttachPoint(const Program& prog, const Attachment& a, const Plan& owner) {
  switch (a.kind) {
    case AttachKind::kTracepoint: {
      FAY_ASSIGN_OR_RETURN(int id, TracepointId(a.category, a.name));
      return AttachTracepoint(prog, id, "tracepoint " + a.category + ":" + a.name);
    }
    case AttachKind::kRawSyscalls:
      return AttachRawTracepoint(prog, a.name);
    case AttachKind::kUprobeMulti: {
      std::vector<uint64_t> offsets, cookies;
      for (int p : a.probes) {
        offsets.push_back(owner.probes[static_cast<size_t>(p)].file_offset);
        cookies.push_back(static_cast<uint64_t>(p));
      }
      return AttachUprobeMulti(prog, a.name, offsets, cookies, a.is_exit);
    }
    case AttachKind::kUprobe: {
      const ProbeInfo& p = owner.probes[static_cast<size_t>(a.probe_index)];
      return AttachUprobe(prog, p.path, p.file_offset, a.is_exit);
    }
    case AttachKind::kPerfSoftware: {
      const ProbeInfo& p = owner.probes[static_cast<size_t>(a.probe_index)];
      if (p.kind == ProbeKind::kProfile)
        return AttachPerfSoftware(prog, PERF_COUNT_SW_CPU_CLOCK, p.hz, 0);
      if (p.kind == ProbeKind::kSoftware)
        return AttachPerfSoftware(prog, p.perf_config, 0, p.period_events);
      return AttachPerfSoftware(prog, PERF_COUNT_SW_CPU_CLOCK, 0, p.period_ns, 0);
    }
  }
  return Status(Code::kInternal, "unknown attach kind");
}

// One uprobe_multi link for `probes`. The kernel attaches all or none, so when it refuses, the
// group is split in halves until the functions it refuses are alone; those are skipped with a
// warning naming them, and every other function still shares a few links.
Expected<Link> LiveQuery::AttachUprobeGroup(const Program& prog, const Attachment& a,
                                            const std::vector<int>& probes) {
  Attachment part = a;
  part.probes = probes;
  auto link = AttachPoint(prog, part, plan_);
  if (link.ok() || probes.size() == 1) {
    if (!link.ok() && plan_.probes.size() > 1) {
      std::string msg = link.status().message();
      warnings_.push_back(fmt::format("skipped {}: {}", plan_.probes[probes[0]].name,
                                      msg.substr(0, msg.find('\n'))));
      return Link();
    }
    if (!link.ok())
      return Status(link.status().code(),
                    plan_.probes[probes[0]].name + ": " + link.status().message());
    return link;
  }
  if (link.status().code() != Code::kUnsupported) return link.status();
  size_t half = probes.size() / 2;
  std::vector<int> left(probes.begin(), probes.begin() + half),
      right(probes.begin() + half, probes.end());
  Link both;
  for (const auto* part : {&left, &right}) {
    auto l = AttachUprobeGroup(prog, a, *part);
    if (!l.ok()) return l.status();
    both.Merge(std::move(l).value());
  }
  return both;
}

void LiveQuery::CommandStarted() {
  // The command has exec'd, so the start program has done its one job; every other process's
  // system calls should not keep paying for it. Closed on a thread of its own (start_closer_).
  if (start_link_.size() == 0 || start_closer_.joinable()) return;
  start_closer_ = std::thread([l = std::move(start_link_)]() mutable { Link gone = std::move(l); });
}

LiveQuery::~LiveQuery() {
  if (start_closer_.joinable()) start_closer_.join();
}

void LiveQuery::Detach() {
  // Each tracepoint detach waits out an RCU grace period (tens of ms here); closing the links
  // from parallel threads lets those waits overlap instead of adding up.
  std::vector<std::thread> closers;
  for (auto& link : links_)
    closers.emplace_back([l = std::move(link)]() mutable { Link gone = std::move(l); });
  for (auto& t : closers) t.join();
  links_.clear();
  CommandStarted();
  if (start_closer_.joinable()) start_closer_.join();
}

Expected<std::vector<Value>> LiveQuery::DecodeSlots(const Plan& shape, const uint8_t* data) const {
  std::vector<Value> out;
  for (const Slot& s : shape.keys) {
    const uint8_t* p = data + s.offset;
    int64_t v;
    std::memcpy(&v, p, 8);
    bool name_field =
        s.expr->kind == ExprKind::kField && (s.expr->name == "probe" || s.expr->name == "func");
    if (name_field) {
      if (v < 0 || v >= static_cast<int64_t>(plan_.probes.size()))
        return Error(Code::kInternal, "probe index out of range in a kernel record");
      const ProbeInfo& pi = plan_.probes[v];
      out.emplace_back(s.expr->name == "func" ? pi.symbol : pi.name);
    } else if (s.expr && s.expr->kind == ExprKind::kCall &&
               (s.expr->name == "ksym" || s.expr->name == "usym")) {
      // ksym()/usym(): the address the probe kept, named as the row is printed.
      const auto addr = static_cast<uint64_t>(v);
      int64_t tgid = 0;
      std::memcpy(&tgid, p + 8, 8);
      std::string name = s.expr->name == "ksym"
                             ? kernel_symbols_->Name(addr)
                             : symbolizer_->FrameName(static_cast<int32_t>(tgid), addr);
      out.emplace_back(name.empty() ? HexAddress(addr) : name);
    } else if (s.type.kind == TypeKind::kString) {
      out.emplace_back(std::string(reinterpret_cast<const char*>(p),
                                   strnlen(reinterpret_cast<const char*>(p), s.size)));
    } else if (s.type.kind == TypeKind::kStack && IsKernelStack(s)) {
      Stack st;
      st.tgid = kKernelStackTgid;
      if (v >= 0 && maps_[kMapStacks]) {
        auto frames = ReadStack(*maps_[kMapStacks], static_cast<uint32_t>(v));
        if (frames.ok()) {
          st.frames = std::move(frames).value();
          st.names = kernel_symbols_->StackNames(st.frames);
          // A raw tracepoint's stack starts in fay's own program: those frames say nothing.
          const auto skip = static_cast<std::ptrdiff_t>(KernelSymbols::TracingFrames(st.names));
          st.frames.erase(st.frames.begin(), st.frames.begin() + skip);
          st.names.erase(st.names.begin(), st.names.begin() + skip);
        }
      }
      out.emplace_back(std::move(st));
    } else if (s.type.kind == TypeKind::kStack) {
      Stack st;
      // (tgid << 32) | stack id; see field_gen.cc. A negative value: no stack.
      if (v >= 0 && maps_[kMapStacks]) {
        auto frames = ReadStack(*maps_[kMapStacks], static_cast<uint32_t>(v & 0xffffffff));
        if (frames.ok()) {
          st.frames = std::move(frames).value();
          DropNonUserTail(&st.frames);  // probes/symbolizer.h
          st.tgid = static_cast<int32_t>(v >> 32);
          // While the process runs its maps are read here (first sight, or a frame outside
          // the last snapshot); after it exits, the snapshot RememberStackProcesses took.
          st.names = symbolizer_->StackNames(st.tgid, st.frames);
        }
      }
      out.emplace_back(std::move(st));
    } else {
      out.emplace_back(v);
    }
  }
  return out;
}

void LiveQuery::StackTgidsOf(const Plan& shape, const uint8_t* key,
                             std::vector<int32_t>* tgids) const {
  for (const Slot& s : shape.keys) {
    if (s.type.kind != TypeKind::kStack || IsKernelStack(s)) continue;
    int64_t v;
    std::memcpy(&v, key + s.offset, 8);
    if (v >= 0) tgids->push_back(static_cast<int32_t>(v >> 32));
  }
}

void LiveQuery::RememberStackProcesses() {
  // The records are drained often, so that a busy machine's rings never fill.
  DrainMappings();
  if (!HasStackKeys(plan_) || plan_.mode != PlanMode::kAggregate) return;
  std::vector<int32_t> tgids;
  for (size_t t = 0; t <= plan_.tables.size(); ++t) {
    const Plan& shape = t == 0 ? plan_ : *plan_.tables[t - 1];
    const int table = static_cast<int>(t);
    for (int base : {kMapAggA, kMapAggB}) {
      const auto& m = maps_[TableMap(base, table)];
      if (!m) continue;
      for (const auto& key : m->Keys())
        if (key.size() >= static_cast<size_t>(shape.key_size))
          StackTgidsOf(shape, key.data(), &tgids);
    }
    for (int base : {kMapCacheA, kMapCacheB}) {
      const auto& m = maps_[TableMap(base, table)];
      if (!m) continue;
      auto entries = m->Dump();
      if (!entries.ok()) continue;
      const size_t stride = (m->value_size() + 7) & ~size_t{7};
      for (const auto& ent : *entries) {
        for (size_t off = 0; off + stride <= ent.value.size(); off += stride) {
          const uint8_t* slot = ent.value.data() + off;
          uint64_t used;
          std::memcpy(&used, slot, 8);
          if (used) StackTgidsOf(shape, slot + 8, &tgids);
        }
      }
    }
  }
  std::sort(tgids.begin(), tgids.end());
  tgids.erase(std::unique(tgids.begin(), tgids.end()), tgids.end());
  // Known processes are read again now and then: they may have loaded libraries since.
  for (int32_t tgid : tgids) symbolizer_->Remember(tgid, std::chrono::seconds(1));
}

namespace {

// Two stack ids may be one stack as it prints: the frames fay drops differ (the tracing frames
// above a raw tracepoint gain __traceiter_ while another program is attached to it; a user
// stack's tail past the program). Their rows are one row, as the query means.
void MergeEqualRows(std::vector<Row>* rows) {
  std::map<std::vector<Value>, size_t> seen;
  std::vector<Row> merged;
  for (Row& r : *rows) {
    auto [it, fresh] = seen.try_emplace(r.keys, merged.size());
    if (fresh) {
      merged.push_back(std::move(r));
      continue;
    }
    std::vector<AggState>& into = merged[it->second].aggs;
    for (size_t a = 0; a < into.size() && a < r.aggs.size(); ++a) into[a].Merge(r.aggs[a]);
  }
  *rows = std::move(merged);
}

}  // namespace

Expected<ResultSet> LiveQuery::ReadMap(const Plan& shape, const Map& map, const Map* cache,
                                       bool clear, uint64_t window_end_ns) {
  std::vector<AggSpec> specs;
  for (const auto& a : shape.aggs) specs.push_back(SpecOf(*a.item));
  // Rows are grouped by the raw key bytes: a key may sit in the cache on one CPU and in the
  // hash map on another.
  std::map<std::vector<uint8_t>, std::vector<AggState>> groups;
  auto fold = [&](const std::vector<uint8_t>& key, const uint8_t* value) {
    auto [it, fresh] = groups.try_emplace(key);
    if (fresh)
      for (const auto& spec : specs) it->second.emplace_back(spec);
    for (size_t a = 0; a < shape.aggs.size(); ++a) {
      const AggSlot& slot = shape.aggs[a];
      it->second[a].Merge(AggState::FromBytes(specs[a], value + slot.offset, slot.size));
    }
  };
  for (const auto& key : map.Keys()) {
    auto slices = map.LookupPerCpu(key.data());
    if (!slices.ok()) continue;  // deleted since listing
    for (const auto& cpu : *slices) fold(key, cpu.data());
    if (clear) (void)const_cast<Map&>(map).Delete(key.data());
  }
  if (source_ && &shape == &plan_) {
    source_->Fold(&map == &*maps_[kMapAggA] ? kMapAggA : kMapAggB, clear,
                  [&](const uint8_t* key, const uint8_t* value) {
                    fold(std::vector<uint8_t>(key, key + shape.key_size), value);
                  });
  }
  if (cache) {
    FAY_ASSIGN_OR_RETURN(auto entries, cache->Dump());
    const size_t stride = (cache->value_size() + 7) & ~size_t{7};
    const size_t ks = shape.key_size;
    for (const auto& ent : entries) {
      for (size_t off = 0; off + stride <= ent.value.size(); off += stride) {
        const uint8_t* slot = ent.value.data() + off;
        uint64_t used;
        std::memcpy(&used, slot, 8);
        if (!used) continue;
        fold(std::vector<uint8_t>(slot + 8, slot + 8 + ks), slot + 8 + ks);
      }
    }
    if (clear) FAY_RETURN_IF_ERROR(const_cast<Map*>(cache)->Clear());
  }
  ResultSet rs;
  rs.window_end_ns = window_end_ns;
  for (auto& [key, aggs] : groups) {
    Row row;
    if (!shape.keys.empty()) {
      FAY_ASSIGN_OR_RETURN(row.keys, DecodeSlots(shape, key.data()));
    }
    row.aggs = std::move(aggs);
    rs.rows.push_back(std::move(row));
  }
  if (HasStackKeys(shape)) MergeEqualRows(&rs.rows);
  // Without keys there is always one row, even when nothing matched (as in the interpreter).
  if (shape.keys.empty() && rs.rows.empty()) {
    Row row;
    for (const auto& spec : specs) row.aggs.emplace_back(spec);
    rs.rows.push_back(std::move(row));
  }
  return rs;
}

Expected<ResultSet> LiveQuery::ReadWindow(uint64_t window_end_ns) {
  FAY_ASSIGN_OR_RETURN(std::vector<ResultSet> tables, ReadWindows(window_end_ns));
  return std::move(tables.front());
}

Expected<std::vector<ResultSet>> LiveQuery::ReadWindows(uint64_t window_end_ns) {
  if (!maps_[kMapAggA]) return Error(Code::kInternal, "not an aggregate query");
  bool idle_a = false;
  if (plan_.every_ns) {
    // Flip the live window, let in-flight probe runs finish, then drain the idle one.
    uint32_t zero = 0;
    uint64_t next = ++window_;
    FAY_RETURN_IF_ERROR(maps_[kMapControl]->Update(&zero, &next));
    if (source_) source_->SetWindow(next);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    idle_a = next & 1;
  }
  // After the flip and its wait: every process a row of this window names has its records in.
  DrainMappings();
  std::vector<ResultSet> out;
  for (size_t t = 0; t <= plan_.tables.size(); ++t) {
    const Plan& shape = t == 0 ? plan_ : *plan_.tables[t - 1];
    const int table = static_cast<int>(t);
    auto map = [&](int base) -> const Map* {
      const auto& m = maps_[TableMap(base, table)];
      return m ? &*m : nullptr;
    };
    const bool use_a = !plan_.every_ns || idle_a;
    const Map* agg = map(use_a ? kMapAggA : kMapAggB);
    if (!agg) return Error(Code::kInternal, "a table's map is missing");
    FAY_ASSIGN_OR_RETURN(ResultSet rs, ReadMap(shape, *agg, map(use_a ? kMapCacheA : kMapCacheB),
                                               plan_.every_ns != 0, window_end_ns));
    out.push_back(std::move(rs));
  }
  return out;
}

Expected<uint64_t> LiveQuery::TriggerTime(int state) const {
  if (state < 0 || static_cast<size_t>(state) >= plan_.states.size() || !maps_[kMapState0 + state])
    return Error(Code::kInternal, "no such state pipeline");
  const auto& m = maps_[kMapState0 + state];
  // A trigger's key is the one int 0; its value {1, the time it fired}.
  const uint64_t key = 0;
  uint64_t value[2] = {0, 0};
  Status st = m->Lookup(&key, value);
  if (st.code() == Code::kNotFound) return uint64_t{0};
  if (!st.ok()) return st;
  return value[1];
}

Expected<int> LiveQuery::PollEvents(int timeout_ms, const RowCallback& cb) {
  if (!maps_[kMapRing]) return Error(Code::kInternal, "not a select query");
  if (!ring_) {
    auto r = RingBufferReader::Create(maps_[kMapRing]->fd(), [this](const void* data, size_t size) {
      if (size < kSelectHeader + static_cast<size_t>(plan_.key_size)) return 0;
      const auto* p = static_cast<const uint8_t*>(data);
      int64_t probe;
      uint64_t time_ns;
      std::memcpy(&probe, p, 8);
      std::memcpy(&time_ns, p + 8, 8);
      // The mappings of a process that started since the last look, before its row is named.
      DrainMappings();
      auto row = DecodeSlots(plan_, p + kSelectHeader);
      if (row.ok() && row_cb_) (*row_cb_)(std::move(row).value(), static_cast<int>(probe), time_ns);
      return 0;
    });
    if (!r.ok()) return r.status();
    ring_ = std::move(r).value();
  }
  row_cb_ = &cb;
  DrainMappings();
  auto n = timeout_ms < 0 ? ring_->Consume() : ring_->Poll(timeout_ms);
  row_cb_ = nullptr;
  return n;
}

void AddStatCounters(const uint64_t* c, RunStats* st) {
  st->events_seen += c[kStatSeen];
  st->events_matched += c[kStatMatched];
  st->dropped += c[kStatDropped];
  st->map_full += c[kStatMapFull];
  st->read_errors += c[kStatReadErrors];
  st->map_busy += c[kStatMapBusy];
  st->map_errors += c[kStatMapErrors];
  st->no_entry += c[kStatNoEntry];
  st->state_full += c[kStatStateFull];
  st->no_state += c[kStatNoState];
}

RunStats LiveQuery::Stats() const {
  RunStats st;
  uint32_t zero = 0;
  auto slices =
      maps_[kMapStats]
          ? maps_[kMapStats]->LookupPerCpu(&zero)
          : Expected<std::vector<std::vector<uint8_t>>>(std::vector<std::vector<uint8_t>>{});
  if (!slices.ok()) slices = std::vector<std::vector<uint8_t>>{};
  for (const auto& s : *slices) {
    uint64_t c[kStatCount];
    std::memcpy(c, s.data(), sizeof(c));
    AddStatCounters(c, &st);
  }
  if (!gen_.counts_matched) st.events_matched = st.events_seen;
  if (source_) source_->AddStats(&st);
  return st;
}

}  // namespace fay::bpf
