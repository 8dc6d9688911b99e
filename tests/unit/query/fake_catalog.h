// A small, fixed probe catalog for the front-end tests: no tracefs, no ELF, exact field lists.
#pragma once

#include <string>
#include <vector>

#include "common/strings.h"
#include "schema/probe.h"
#include "schema/syscall_table.h"

namespace fay {
namespace {

Field F(const std::string& name, Type type, FieldSource source = FieldSource::kCtx) {
  Field f;
  f.name = name;
  f.type = type;
  f.source = source;
  return f;
}

ProbeInfo Probe(const std::string& name, ProbeKind kind, std::vector<Field> own) {
  ProbeInfo p;
  p.name = name;
  p.kind = kind;
  p.fields = CommonFields();
  if (kind == ProbeKind::kSyscall) {
    std::string sc = name.substr(name.find(':') + 1);
    p.tp_category = "syscalls";
    p.tp_name = "sys_enter_" + sc;
    p.exit_tp_name = "sys_exit_" + sc;
    p.syscall_nr = SyscallNumber(sc);
  } else if (kind == ProbeKind::kTracepoint) {
    size_t a = name.find(':'), b = name.find(':', a + 1);
    p.tp_category = name.substr(a + 1, b - a - 1);
    p.tp_name = name.substr(b + 1);
  }
  for (Field& f : own) p.fields.push_back(std::move(f));
  return p;
}

std::vector<Field> SyscallTail(std::vector<Field> args) {
  args.push_back(F("ret", Type::Int(true), FieldSource::kRet));
  args.push_back(F("errno", Type::Int(true), FieldSource::kErrno));
  args.push_back(F("latency", Type::Int(false), FieldSource::kLatency));
  return args;
}

class FakeCatalog : public ProbeCatalog {
 public:
  FakeCatalog() {
    probes_.push_back(
        Probe("syscall:openat", ProbeKind::kSyscall,
              SyscallTail({F("args.dfd", Type::Int(true)), F("args.filename", Type::UserPtr()),
                           F("args.flags", Type::Int(true)), F("args.mode", Type::Int(false))})));
    probes_.push_back(
        Probe("syscall:read", ProbeKind::kSyscall,
              SyscallTail({F("args.fd", Type::Int(false)), F("args.buf", Type::UserPtr()),
                           F("args.count", Type::Int(false))})));
    probes_.push_back(
        Probe("syscall:pread64", ProbeKind::kSyscall,
              SyscallTail({F("args.fd", Type::Int(false)), F("args.buf", Type::UserPtr()),
                           F("args.count", Type::Int(false)), F("args.pos", Type::Int(true))})));
    probes_.push_back(
        Probe("syscall:close", ProbeKind::kSyscall, SyscallTail({F("args.fd", Type::Int(true))})));
    probes_.push_back(Probe("tracepoint:sched:sched_switch", ProbeKind::kTracepoint,
                            {F("prev_comm", Type::Str(16)), F("prev_pid", Type::Int(true)),
                             F("prev_state", Type::Int(true)), F("next_comm", Type::Str(16)),
                             F("next_pid", Type::Int(true))}));
    probes_.push_back(Probe("tracepoint:fake:conflict", ProbeKind::kTracepoint,
                            {F("prev_comm", Type::Int(true))}));
    std::vector<Field> uargs;
    for (int i = 0; i < 6; ++i)
      uargs.push_back(F("arg" + std::to_string(i), Type::Int(false), FieldSource::kUprobeArg));
    uargs.push_back(F("func", Type::Str(64), FieldSource::kFunc));
    probes_.push_back(Probe("uprobe:/bin/bash:readline", ProbeKind::kUprobe, uargs));
    probes_.push_back(Probe("uprobe:/bin/bash:rl_getc", ProbeKind::kUprobe, uargs));
    for (ProbeInfo* p : {&probes_[probes_.size() - 2], &probes_.back()}) p->path = "/bin/bash";
    probes_.push_back(Probe("profile:99", ProbeKind::kProfile,
                            {F("ustack", Type::Stack(), FieldSource::kUserStack)}));
  }

  Expected<std::vector<ProbeInfo>> Resolve(const std::string& spec) override {
    if (spec.rfind("denied:", 0) == 0)
      return Error(Code::kPermission, "tracefs: Permission denied");
    if (spec == "interval:xyz") return Error(Code::kInvalidArgument, "bad duration 'xyz'");
    std::vector<ProbeInfo> out;
    for (const ProbeInfo& p : probes_)
      if (GlobMatch(spec, p.name)) out.push_back(p);
    if (out.empty()) return Error(Code::kNotFound, "Unknown probe '" + spec + "'");
    return out;
  }

  std::vector<std::string> Nearest(const std::string& spec, size_t n) override {
    std::vector<std::string> names;
    for (const ProbeInfo& p : probes_) names.push_back(p.name);
    return fay::Nearest(names, spec, n);
  }

 private:
  std::vector<ProbeInfo> probes_;
};

}  // namespace
}  // namespace fay
