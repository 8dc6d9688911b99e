#include "probes/tracepoint_provider.h"

#include "common/strings.h"

namespace fay {
namespace {

// The ftrace category holds the tracer's own record formats, which BPF cannot attach to.
bool Attachable(const std::string& category) {
  return category != "ftrace";
}

bool IsCharType(std::string_view t) {
  return t == "char" || t == "const char";
}

Status BadSpec(std::string_view pattern) {
  return Error(Code::kInvalidArgument, "'tracepoint:" + std::string(pattern) +
                                           "' should be tracepoint:SUBSYS:NAME, e.g. "
                                           "tracepoint:sched:sched_switch");
}

}  // namespace

std::vector<Field> TracepointFields(const EventFormat& format) {
  std::vector<Field> fields = CommonFields();
  for (const auto& f : format.fields) {
    if (f.is_common()) continue;
    Field field;
    field.name = f.name;
    field.offset = f.offset;
    field.size = f.size;
    field.c_type = f.c_type;
    if (f.is_data_loc) {
      if (f.c_type.find("char") == std::string::npos) continue;
      field.type = Type::Str(64);
      field.source = FieldSource::kDataLoc;
    } else if (f.array_len >= 0) {
      if (!IsCharType(f.c_type) || f.size <= 0) continue;
      field.type = Type::Str(f.size);
      field.source = FieldSource::kCtx;
      field.c_type = f.c_type + "[" + std::to_string(f.size) + "]";
    } else if (f.c_type.rfind("__rel_loc", 0) == 0) {
      continue;
    } else if (f.size == 1 || f.size == 2 || f.size == 4 || f.size == 8) {
      field.type = Type::Int(f.is_signed);
      field.source = FieldSource::kCtx;
    } else {
      continue;
    }
    fields.push_back(std::move(field));
  }
  // Every record field is also `args.NAME`, as bpftrace spells it. It is the only way to reach
  // a record field that a common field shadows: sched_wakeup's `pid` and `comm` are the
  // wakee's, while the common `pid` and `comm` are the running task's (the waker's).
  const size_t n_common = CommonFields().size();
  const size_t n = fields.size();
  for (size_t i = n_common; i < n; ++i) {
    Field alias = fields[i];
    alias.name = "args." + alias.name;
    fields.push_back(std::move(alias));
  }
  for (Field& f : StackFields()) fields.push_back(std::move(f));
  return fields;
}

Status TracepointProvider::Init() {
  if (categories_) return Status::Ok();
  if (root_.empty()) {
    FAY_ASSIGN_OR_RETURN(root_, TracefsRoot());
  }
  FAY_ASSIGN_OR_RETURN(auto categories, ListEventCategories(root_));
  std::vector<std::string> kept;
  for (auto& c : categories)
    if (Attachable(c)) kept.push_back(std::move(c));
  categories_ = std::move(kept);
  return Status::Ok();
}

Expected<std::vector<std::pair<std::string, std::string>>> TracepointProvider::Match(
    std::string_view category, std::string_view name) {
  FAY_RETURN_IF_ERROR(Init());
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : *categories_) {
    if (!GlobMatch(category, c)) continue;
    auto it = events_.find(c);
    if (it == events_.end()) {
      FAY_ASSIGN_OR_RETURN(auto events, ListEvents(root_, c));
      it = events_.emplace(c, std::move(events)).first;
    }
    for (const auto& e : it->second)
      if (GlobMatch(name, e)) out.emplace_back(c, e);
  }
  return out;
}

Expected<std::vector<ProbeInfo>> TracepointProvider::Resolve(std::string_view pattern) {
  size_t colon = pattern.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == pattern.size()) {
    return BadSpec(pattern);
  }
  FAY_ASSIGN_OR_RETURN(auto matches, Match(pattern.substr(0, colon), pattern.substr(colon + 1)));
  if (matches.empty()) {
    std::string spec = "tracepoint:" + std::string(pattern);
    return Error(Code::kNotFound, HasGlob(pattern) ? "no probe matches '" + spec + "'"
                                                   : "unknown probe '" + spec + "'");
  }
  std::vector<ProbeInfo> out;
  out.reserve(matches.size());
  for (const auto& [category, event] : matches) {
    FAY_ASSIGN_OR_RETURN(EventFormat format, ReadEventFormat(root_, category, event));
    ProbeInfo p;
    p.name = "tracepoint:" + category + ":" + event;
    p.kind = ProbeKind::kTracepoint;
    p.tp_category = category;
    p.tp_name = event;
    p.tp_id = format.id;
    p.fields = TracepointFields(format);
    out.push_back(std::move(p));
  }
  return out;
}

Expected<std::vector<std::string>> TracepointProvider::List(std::string_view pattern) {
  if (pattern.empty()) pattern = "*:*";
  size_t colon = pattern.find(':');
  std::string_view category = pattern.substr(0, colon);
  std::string_view name = colon == std::string_view::npos ? "*" : pattern.substr(colon + 1);
  FAY_ASSIGN_OR_RETURN(auto matches, Match(category, name));
  std::vector<std::string> out;
  out.reserve(matches.size());
  for (const auto& [c, e] : matches) out.push_back("tracepoint:" + c + ":" + e);
  return out;
}

std::vector<std::string> TracepointProvider::Nearest(std::string_view pattern, size_t n) {
  auto all = Match("*", "*");
  if (!all.ok()) return {};
  std::vector<std::string> names;
  names.reserve(all->size());
  for (const auto& [c, e] : *all) names.push_back(c + ":" + e);
  std::vector<std::string> out = fay::Nearest(names, pattern, n);
  for (auto& s : out) s = "tracepoint:" + s;
  return out;
}

}  // namespace fay
