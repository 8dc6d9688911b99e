#include "probes/syscall_provider.h"

#include <algorithm>

#include "common/strings.h"
#include "probes/tracefs.h"
#include "schema/syscall_table.h"

namespace fay {
namespace {

constexpr std::string_view kEnter = "sys_enter_";

std::string_view StripConst(std::string_view t) {
  t = Trim(t);
  if (t.rfind("const ", 0) == 0) t.remove_prefix(6);
  if (t.size() > 6 && t.substr(t.size() - 6) == " const") t.remove_suffix(6);
  return Trim(t);
}

}  // namespace

Type SyscallArgType(std::string_view c_type) {
  std::string_view t = Trim(c_type);
  if (t.find('*') != std::string_view::npos) {
    // Only a pointer to char is a NUL-terminated string the query may read with str().
    std::string_view pointee = StripConst(t.substr(0, t.find('*')));
    std::string_view rest = Trim(t.substr(t.find('*') + 1));
    if (pointee == "char" && (rest.empty() || rest == "const")) return Type::UserPtr();
    return Type::Int(false);
  }
  t = StripConst(t);
  static constexpr std::string_view kUnsigned[] = {"size_t",
                                                   "umode_t",
                                                   "uid_t",
                                                   "gid_t",
                                                   "qid_t",
                                                   "aio_context_t",
                                                   "cap_user_header_t",
                                                   "cap_user_data_t",
                                                   "dev_t",
                                                   "ino_t",
                                                   "mode_t",
                                                   "nfds_t",
                                                   "socklen_t",
                                                   "unsigned"};
  for (std::string_view u : kUnsigned)
    if (t == u) return Type::Int(false);
  if (t.rfind("unsigned ", 0) == 0) return Type::Int(false);
  if (t.rfind("u8", 0) == 0 || t.rfind("u16", 0) == 0 || t.rfind("u32", 0) == 0 ||
      t.rfind("u64", 0) == 0 || t.rfind("__u", 0) == 0) {
    return Type::Int(false);
  }
  // int, long, pid_t, off_t, loff_t, clockid_t, timer_t, key_t, mqd_t, rwf_t, __s32, enums.
  return Type::Int(true);
}

Expected<const std::vector<SyscallProvider::Entry>*> SyscallProvider::Entries() {
  if (entries_) return &*entries_;
  if (root_.empty()) {
    FAY_ASSIGN_OR_RETURN(root_, TracefsRoot());
  }
  FAY_ASSIGN_OR_RETURN(auto events, ListEvents(root_, "syscalls"));
  std::vector<Entry> entries;
  for (const auto& ev : events) {
    if (ev.rfind(kEnter, 0) != 0) continue;
    std::string stem = ev.substr(kEnter.size());
    const SyscallInfo* info = FindSyscallByEvent(stem);
    entries.push_back({info ? std::string(info->name) : stem, stem});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  entries_ = std::move(entries);
  return &*entries_;
}

Expected<std::vector<const SyscallProvider::Entry*>> SyscallProvider::Match(
    std::string_view pattern) {
  FAY_ASSIGN_OR_RETURN(const std::vector<Entry>* entries, Entries());
  std::vector<const Entry*> out;
  for (const auto& e : *entries) {
    // The tracefs spelling ("newstat") is accepted too, but globs match syscall names only.
    if (GlobMatch(pattern, e.name) || (!HasGlob(pattern) && pattern == e.event)) out.push_back(&e);
  }
  return out;
}

Expected<ProbeInfo> SyscallProvider::Build(const Entry& e) {
  ProbeInfo p;
  p.name = "syscall:" + e.name;
  p.kind = ProbeKind::kSyscall;
  p.tp_category = "syscalls";
  p.tp_name = "sys_enter_" + e.event;
  p.exit_tp_name = "sys_exit_" + e.event;
  p.syscall_nr = SyscallNumber(e.name);
  FAY_ASSIGN_OR_RETURN(EventFormat enter, ReadEventFormat(root_, p.tp_category, p.tp_name));
  FAY_ASSIGN_OR_RETURN(EventFormat exit, ReadEventFormat(root_, p.tp_category, p.exit_tp_name));
  p.tp_id = enter.id;
  p.exit_tp_id = exit.id;

  p.fields = CommonFields();
  int index = 0;
  for (const auto& f : enter.fields) {
    if (f.is_common() || f.name == "__syscall_nr") continue;
    Field field;
    field.name = "args." + f.name;
    field.type = SyscallArgType(f.c_type);
    field.source = FieldSource::kCtx;
    field.offset = f.offset;
    field.size = 8;
    field.index = index++;
    field.c_type = f.c_type;
    p.fields.push_back(std::move(field));
  }
  int ret_offset = 16;
  for (const auto& f : exit.fields)
    if (f.name == "ret") ret_offset = f.offset;
  p.fields.push_back({"ret", Type::Int(true), FieldSource::kRet, ret_offset, 8, 0, "long"});
  p.fields.push_back({"errno", Type::Int(true), FieldSource::kErrno, 0, 8, 0, "int"});
  p.fields.push_back({"latency", Type::Int(false), FieldSource::kLatency, 0, 8, 0, "u64 ns"});
  for (Field& f : StackFields()) p.fields.push_back(std::move(f));
  return p;
}

Expected<std::vector<ProbeInfo>> SyscallProvider::Resolve(std::string_view pattern) {
  if (pattern.empty()) return Error(Code::kInvalidArgument, "syscall: needs a syscall name");
  FAY_ASSIGN_OR_RETURN(auto matches, Match(pattern));
  if (matches.empty()) {
    std::string spec = "syscall:" + std::string(pattern);
    if (!HasGlob(pattern) && FindSyscall(pattern)) {
      return Error(Code::kNotFound, "unknown probe '" + spec +
                                        "': this kernel has no syscalls/sys_enter_" +
                                        std::string(pattern) + " tracepoint");
    }
    return Error(Code::kNotFound, HasGlob(pattern) ? "no probe matches '" + spec + "'"
                                                   : "unknown probe '" + spec + "'");
  }
  std::vector<ProbeInfo> out;
  out.reserve(matches.size());
  for (const Entry* e : matches) {
    FAY_ASSIGN_OR_RETURN(ProbeInfo p, Build(*e));
    out.push_back(std::move(p));
  }
  return out;
}

Expected<std::vector<std::string>> SyscallProvider::List(std::string_view pattern) {
  FAY_ASSIGN_OR_RETURN(auto matches, Match(pattern.empty() ? "*" : pattern));
  std::vector<std::string> out;
  for (const Entry* e : matches) out.push_back("syscall:" + e->name);
  return out;
}

std::vector<std::string> SyscallProvider::Nearest(std::string_view pattern, size_t n) {
  auto entries = Entries();
  if (!entries.ok()) return {};
  std::vector<std::string> names;
  for (const auto& e : **entries) names.push_back(e.name);
  std::vector<std::string> out = fay::Nearest(names, pattern, n);
  for (auto& s : out) s = "syscall:" + s;
  return out;
}

}  // namespace fay
