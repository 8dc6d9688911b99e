#include "engine/offline/table_catalog.h"

#include <fmt/format.h>

#include "common/strings.h"
#include "schema/syscall_table.h"

namespace fay {
namespace {

constexpr std::string_view kPrefix = "syscall:";

// The C type the probe would see, as far as the table says: what matters is which arguments
// are int-sized (the probe keeps their low half) and which are strings str() may read.
Field ArgField(const ArgSpec& a, int index) {
  Field f;
  f.name = "args." + std::string(a.name);
  f.source = FieldSource::kCtx;
  f.index = index;
  switch (a.type) {
    case ArgType::kInt:
    case ArgType::kFd:
    case ArgType::kDirfd:
    case ArgType::kSignal:
      f.type = Type::Int(true);
      f.c_type = "int";
      break;
    case ArgType::kUint:
    case ArgType::kUid:
    case ArgType::kMode:
    case ArgType::kOpenMode:
    case ArgType::kOctalMode:
      f.type = Type::Int(false);
      f.c_type = "unsigned int";
      break;
    case ArgType::kLong:
      f.type = Type::Int(true);
      f.c_type = "long";
      break;
    case ArgType::kPath:
    case ArgType::kString:
      f.type = Type::UserPtr();
      f.c_type = "const char *";
      break;
    default:
      f.type = Type::Int(false);
      f.c_type = "unsigned long";
      break;
  }
  return f;
}

ProbeInfo Build(const SyscallInfo& s) {
  ProbeInfo p;
  p.name = std::string(kPrefix) + std::string(s.name);
  p.kind = ProbeKind::kSyscall;
  p.syscall_nr = s.nr;
  p.fields = CommonFields();
  const SyscallSignature& sig = Signature(s.nr);
  int nargs = sig.decoded ? sig.nargs : 6;
  for (int i = 0; i < nargs; ++i) {
    if (sig.decoded) {
      p.fields.push_back(ArgField(sig.args[i], i));
    } else {
      ArgSpec generic;
      std::string name = fmt::format("arg{}", i);
      generic.name = name;
      Field f = ArgField(generic, i);
      p.fields.push_back(std::move(f));
    }
  }
  p.fields.push_back({"ret", Type::Int(true), FieldSource::kRet, 0, 8, 0, "long"});
  p.fields.push_back({"errno", Type::Int(true), FieldSource::kErrno, 0, 8, 0, "int"});
  p.fields.push_back({"latency", Type::Int(false), FieldSource::kLatency, 0, 8, 0, "u64 ns"});
  return p;
}

}  // namespace

Expected<std::vector<ProbeInfo>> SyscallTableCatalog::Resolve(const std::string& spec) {
  std::string_view s = Trim(spec);
  if (s.rfind(kPrefix, 0) != 0) return Error(Code::kNotFound, fmt::format("unknown probe '{}'", s));
  std::string_view pattern = s.substr(kPrefix.size());
  std::vector<ProbeInfo> out;
  for (const SyscallInfo& info : Syscalls())
    if (GlobMatch(pattern, info.name)) out.push_back(Build(info));
  if (out.empty())
    return Error(Code::kNotFound, HasGlob(pattern) ? fmt::format("no probe matches '{}'", s)
                                                   : fmt::format("unknown probe '{}'", s));
  return out;
}

std::vector<std::string> SyscallTableCatalog::Nearest(const std::string& spec, size_t n) {
  std::vector<std::string> names;
  for (const SyscallInfo& info : Syscalls()) names.emplace_back(info.name);
  std::string_view s = Trim(spec);
  if (s.rfind(kPrefix, 0) == 0) s.remove_prefix(kPrefix.size());
  std::vector<std::string> out = fay::Nearest(names, s, n);
  for (std::string& name : out) name = std::string(kPrefix) + name;
  return out;
}

Expected<std::vector<ProbeInfo>> SyscallFallbackCatalog::Resolve(const std::string& spec) {
  const bool syscall = Trim(spec).rfind("syscall:", 0) == 0;
  if (!syscall || fallback_reason_.empty()) {
    auto probes = live_.Resolve(spec);
    // Not found and bad specs are answers; anything else (no permission, no tracefs) is tracefs
    // failing, which the table makes up for.
    if (probes.ok() || !syscall || probes.status().code() == Code::kNotFound ||
        probes.status().code() == Code::kInvalidArgument)
      return probes;
    fallback_reason_ = probes.status().message();
  }
  return table_.Resolve(spec);
}

std::vector<std::string> SyscallFallbackCatalog::Nearest(const std::string& spec, size_t n) {
  // Once tracefs has failed, the names a hint can offer are the table's.
  if (!fallback_reason_.empty()) return table_.Nearest(spec, n);
  return live_.Nearest(spec, n);
}

}  // namespace fay
