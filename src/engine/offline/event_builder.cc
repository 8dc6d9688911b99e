#include "engine/offline/event_builder.h"

#include <algorithm>
#include <cstring>

#include "engine/offline/fd_paths.h"
#include "engine/offline/trace_catalog.h"

namespace fay {
namespace {

bool IsLow32(const Field& f) {
  return f.c_type == "int" || f.c_type == "pid_t" || f.c_type == "unsigned int" ||
         f.c_type == "uid_t" || f.c_type == "gid_t" || f.c_type == "u32";
}

}  // namespace

int64_t ArgValue(const Field& f, uint64_t raw) {
  if (!IsLow32(f)) return static_cast<int64_t>(raw);
  uint32_t low = static_cast<uint32_t>(raw);
  return f.type.is_signed ? static_cast<int64_t>(static_cast<int32_t>(low))
                          : static_cast<int64_t>(low);
}

EventBuilder::EventBuilder(const Plan& plan)
    : at_exit_(plan.needs_exit || plan.remember_at_exit), time_at_exit_(plan.remember_at_exit) {
  probes_.resize(plan.probes.size());
  for (size_t p = 0; p < plan.probes.size(); ++p) {
    const ProbeInfo& probe = plan.probes[p];
    if (probe.kind == ProbeKind::kTracepoint && probe.name == TraceCatalog::kSignalDeliver) {
      signal_probe_ = static_cast<int>(p);
    } else {
      if (probe.kind != ProbeKind::kSyscall || probe.syscall_nr < 0) continue;
      if (static_cast<size_t>(probe.syscall_nr) >= probe_of_nr_.size())
        probe_of_nr_.resize(probe.syscall_nr + 1, -1);
      probe_of_nr_[probe.syscall_nr] = static_cast<int>(p);
    }

    PerProbe& pp = probes_[p];
    pp.event.probe_index = static_cast<int>(p);
    pp.event.values.resize(probe.fields.size(), Value(int64_t{0}));
    std::vector<bool> used(probe.fields.size()), str_used(probe.fields.size());
    VisitPlanExprs(plan, [&](const Expr& e) {
      if (e.kind == ExprKind::kField && p < e.field_index.size() && e.field_index[p] >= 0)
        used[e.field_index[p]] = true;
      if (e.kind == ExprKind::kCall && e.name == "str" && !e.kids.empty() &&
          e.kids[0]->kind == ExprKind::kField && p < e.kids[0]->field_index.size() &&
          e.kids[0]->field_index[p] >= 0)
        str_used[e.kids[0]->field_index[p]] = true;
    });
    for (size_t i = 0; i < probe.fields.size(); ++i) {
      const Field& f = probe.fields[i];
      if (f.type.kind == TypeKind::kString) pp.event.values[i] = Value(std::string());
      if (str_used[i]) pp.strings.emplace_back(static_cast<int>(i), f.index);
      // probe is the probe's name, which the evaluator knows without a value.
      if (!used[i] || f.source == FieldSource::kProbe) continue;
      pp.needs.push_back({static_cast<int>(i), f.source, f.index, IsLow32(f), f.type.is_signed});
      if (f.source == FieldSource::kPath) needs_paths_ = true;
    }
    if (!pp.strings.empty()) pp.event.user_strings.resize(probe.fields.size());
    if (!pp.strings.empty() || needs_paths_) needs_bytes_ = true;
  }
}

const Event& EventBuilder::Build(const SyscallEvent& ev, std::string_view path) {
  PerProbe& pp = probes_[probe_of_nr_[ev.nr]];
  Event& out = pp.event;
  const bool exited = !(ev.flags & kEventNoExit);
  out.time_ns = at_exit_ && exited ? ev.exit_ns : ev.entry_ns;
  for (const Need& n : pp.needs) {
    Value& v = out.values[n.index];
    switch (n.source) {
      case FieldSource::kTime:
        // A state pipeline run at the return reads the clock there, as its probe does.
        v = static_cast<int64_t>(time_at_exit_ && exited ? ev.exit_ns : ev.entry_ns);
        break;
      case FieldSource::kCpu:
        // The ptrace backend cannot tell the CPU (-1): reported as 0, as documented.
        v = int64_t{ev.cpu < 0 ? 0 : ev.cpu};
        break;
      case FieldSource::kPid:
        v = int64_t{ev.pid};
        break;
      case FieldSource::kTid:
        v = int64_t{ev.tid};
        break;
      case FieldSource::kUid:
        v = int64_t{ev.uid};
        break;
      case FieldSource::kComm:
        if (ev.comm != pp.comm || std::get<std::string>(v).empty()) {
          pp.comm = ev.comm;
          std::get<std::string>(v).assign(ev.comm.data(), strnlen(ev.comm.data(), ev.comm.size()));
        }
        break;
      case FieldSource::kCtx: {
        uint64_t raw = ev.args[n.arg % 6];
        if (n.low32) {
          uint32_t low = static_cast<uint32_t>(raw);
          v = n.is_signed ? int64_t{static_cast<int32_t>(low)} : int64_t{low};
        } else {
          v = static_cast<int64_t>(raw);
        }
        break;
      }
      case FieldSource::kRet:
        v = ev.ret;
        break;
      case FieldSource::kErrno:
        v = ev.ret < 0 && ev.ret >= -4095 ? -ev.ret : int64_t{0};
        break;
      case FieldSource::kLatency:
        v = exited && ev.exit_ns >= ev.entry_ns ? static_cast<int64_t>(ev.exit_ns - ev.entry_ns)
                                                : int64_t{0};
        break;
      case FieldSource::kBytes:
        v = static_cast<int64_t>(ev.CapturedBytes());
        break;
      case FieldSource::kPath:
        std::get<std::string>(v).assign(path.data(), path.size());
        break;
      default:
        break;
    }
  }
  for (const auto& [field, arg] : pp.strings)
    out.user_strings[field].assign(CapturedString(ev, arg));
  return out;
}

void EventBuilder::SetOrigin(std::string_view trace, std::string_view host) {
  for (PerProbe& pp : probes_)
    for (const Need& n : pp.needs) {
      if (n.source == FieldSource::kTrace) pp.event.values[n.index] = Value(std::string(trace));
      if (n.source == FieldSource::kHost) pp.event.values[n.index] = Value(std::string(host));
    }
}

const Event& EventBuilder::BuildSignal(const ProcessEvent& ev, uint32_t uid,
                                       std::string_view comm) {
  PerProbe& pp = probes_[signal_probe_];
  Event& out = pp.event;
  out.time_ns = ev.time_ns;
  // The tracepoint's (sig, errno, code), from the siginfo the recorder kept.
  int32_t ctx[3] = {ev.signo, 0, 0};
  if (ev.siginfo.size() >= 12) std::memcpy(&ctx[1], ev.siginfo.data() + 4, 8);
  for (const Need& n : pp.needs) {
    Value& v = out.values[n.index];
    switch (n.source) {
      case FieldSource::kTime:
        v = static_cast<int64_t>(ev.time_ns);
        break;
      case FieldSource::kPid:
        v = int64_t{ev.pid};
        break;
      case FieldSource::kTid:
        v = int64_t{ev.tid};
        break;
      case FieldSource::kUid:
        v = int64_t{uid};
        break;
      case FieldSource::kComm:
        std::get<std::string>(v).assign(comm.data(), comm.size());
        break;
      case FieldSource::kCtx:
        v = int64_t{ctx[std::clamp(n.arg, 0, 2)]};
        break;
      case FieldSource::kTrace:
      case FieldSource::kHost:
        break;  // set by SetOrigin
      default:  // cpu: unknown, reported as 0 as for the ptrace backend's calls
        v = int64_t{0};
        break;
    }
  }
  return out;
}

}  // namespace fay
