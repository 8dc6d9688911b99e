#include "schema/syscall_set.h"

#include <regex>
#include <string>

#include "common/strings.h"
#include "schema/syscall_table.h"

namespace fay {
namespace {

Status UnknownName(std::string_view name) {
  std::vector<std::string> candidates;
  if (name.starts_with("%")) {
    for (std::string_view c : SyscallClassNames()) candidates.emplace_back(c);
  } else {
    for (const SyscallInfo& s : Syscalls()) candidates.emplace_back(s.name);
  }
  std::string msg = name.starts_with("%") ? "unknown syscall class '" + std::string(name) + "'"
                                          : "unknown syscall '" + std::string(name) + "'";
  std::vector<std::string> near = Nearest(candidates, name, 1);
  if (!near.empty()) msg += " (did you mean '" + near[0] + "'?)";
  return Error(Code::kInvalidArgument, msg);
}

Status AddItem(std::string_view item, SyscallSet* set) {
  bool optional = false;
  if (item.starts_with("?")) {
    optional = true;
    item.remove_prefix(1);
  }
  if (item.empty()) return Error(Code::kInvalidArgument, "empty syscall name in list");
  if (item == "all") {
    for (const SyscallInfo& s : Syscalls()) set->Add(s.nr);
    return Status::Ok();
  }
  if (item == "none") return Status::Ok();
  if (item.starts_with("/")) {
    std::regex re;
    try {
      re = std::regex(std::string(item.substr(1)), std::regex::extended | std::regex::nosubs);
    } catch (const std::regex_error& e) {
      return Error(Code::kInvalidArgument,
                   "invalid syscall regex '" + std::string(item.substr(1)) + "': " + e.what());
    }
    bool any = false;
    for (const SyscallInfo& s : Syscalls()) {
      if (std::regex_search(s.name.begin(), s.name.end(), re)) {
        set->Add(s.nr);
        any = true;
      }
    }
    if (!any && !optional)
      return Error(Code::kInvalidArgument,
                   "syscall regex '" + std::string(item.substr(1)) + "' matches no syscall");
    return Status::Ok();
  }
  if (const SyscallInfo* s = FindSyscall(item)) {
    set->Add(s->nr);
    return Status::Ok();
  }
  if (uint32_t bits = SyscallClassByName(item)) {
    for (const SyscallInfo& s : Syscalls())
      if (s.classes & bits) set->Add(s.nr);
    return Status::Ok();
  }
  if (optional) return Status::Ok();
  return UnknownName(item);
}

}  // namespace

SyscallSet SyscallSet::All() {
  SyscallSet set;
  for (const SyscallInfo& s : Syscalls()) set.Add(s.nr);
  return set;
}

std::vector<int> SyscallSet::Numbers() const {
  std::vector<int> out;
  for (int i = 0; i < kMaxNr; ++i)
    if (bits_.test(i)) out.push_back(i);
  return out;
}

bool SyscallSet::IsAll() const {
  for (const SyscallInfo& s : Syscalls())
    if (!Contains(s.nr)) return false;
  return true;
}

Expected<SyscallSet> ParseSyscallSet(std::string_view spec) {
  spec = Trim(spec);
  if (spec.starts_with("trace=")) spec.remove_prefix(6);
  bool negate = false;
  if (spec.starts_with("!")) {
    negate = true;
    spec.remove_prefix(1);
  }
  if (spec.empty()) return Error(Code::kInvalidArgument, "empty syscall set");
  SyscallSet set;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    FAY_RETURN_IF_ERROR(AddItem(Trim(spec.substr(pos, comma - pos)), &set));
    pos = comma + 1;
  }
  if (!negate) return set;
  SyscallSet inverted;
  for (const SyscallInfo& s : Syscalls())
    if (!set.Contains(s.nr)) inverted.Add(s.nr);
  return inverted;
}

}  // namespace fay
