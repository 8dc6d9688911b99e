#include "query/passes/type_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>

#include "common/strings.h"
#include "query/diagnostics.h"
#include "query/parser.h"
#include "query/row_format.h"

namespace fay {
namespace {

bool IsArithmetic(const std::string& op) {
  return op == "+" || op == "-" || op == "*" || op == "/" || op == "%" || op == "&" || op == "|" ||
         op == "^" || op == "<<" || op == ">>";
}
bool IsOrder(const std::string& op) {
  return op == "<" || op == "<=" || op == ">" || op == ">=";
}
bool IsLiteral(const Expr& e) {
  return e.kind == ExprKind::kInt || e.kind == ExprKind::kString;
}

std::vector<std::string> FieldNames(const ProbeInfo& p) {
  std::vector<std::string> names;
  for (const Field& f : p.fields) names.push_back(f.name);
  return names;
}

class TypeChecker {
 public:
  TypeChecker(const std::string& src, const std::vector<ProbeInfo>& probes,
              const std::vector<std::shared_ptr<Query>>& states)
      : src_(src), probes_(probes), states_(states) {}

  Status Run(Query& q) {
    const bool state_pipeline =
        !q.stages.empty() && std::holds_alternative<RememberStage>(q.stages.back().stage);
    in_state_pipeline_ = state_pipeline;
    const SelectStage* select = nullptr;
    for (StageNode& node : q.stages) {
      if (auto* r = std::get_if<RememberStage>(&node.stage)) {
        FAY_RETURN_IF_ERROR(CheckRemember(*r));
        continue;
      }
      if (auto* w = std::get_if<WhereStage>(&node.stage)) {
        FAY_RETURN_IF_ERROR(Check(*w->cond));
        FAY_RETURN_IF_ERROR(ExpectInt(*w->cond,
                                      "a where condition is an int (non-zero keeps the event); "
                                      "compare strings with ==, e.g. comm == \"bash\""));
        if (state_pipeline) FAY_RETURN_IF_ERROR(NoExitField(*w->cond));
      } else if (auto* a = std::get_if<AggregateStage>(&node.stage)) {
        for (AggItem& item : a->aggs) FAY_RETURN_IF_ERROR(CheckAgg(item));
        for (KeyItem& k : a->keys) FAY_RETURN_IF_ERROR(CheckColumn(*k.expr));
      } else if (auto* t = std::get_if<TablesStage>(&node.stage)) {
        for (TableItem& table : t->tables) {
          for (AggItem& item : table.agg.aggs) FAY_RETURN_IF_ERROR(CheckAgg(item));
          for (KeyItem& k : table.agg.keys) FAY_RETURN_IF_ERROR(CheckColumn(*k.expr));
        }
      } else if (auto* s = std::get_if<SelectStage>(&node.stage)) {
        for (KeyItem& k : s->items) FAY_RETURN_IF_ERROR(CheckColumn(*k.expr));
        select = s;
      } else if (auto* f = std::get_if<FormatStage>(&node.stage); f && select) {
        std::vector<Type> types;
        std::vector<std::string> names;
        for (const KeyItem& k : select->items) {
          types.push_back(k.expr->type);
          names.push_back(k.name);
        }
        if (auto rf = RowFormat::Parse(f->fmt, types, names); !rf.ok())
          return QueryError(src_, f->range, "Bad format: " + rf.status().message(),
                            "each conversion takes the next selected column: %d %u %x %s "
                            "(widths as printf: %-16s %6d), %T the wall-clock time");
      }
    }
    // A value nobody reads would only fill its map. A `snapshot` reads its trigger.
    std::set<std::string> snapshots;
    for (const StageNode& node : q.stages)
      if (const auto* s = std::get_if<SnapshotStage>(&node.stage)) snapshots.insert(s->name);
    for (size_t i = 0; i < states_.size(); ++i) {
      if (read_states_.count(static_cast<int>(i))) continue;
      const auto& r = std::get<RememberStage>(states_[i]->stages.back().stage);
      if (r.trigger && snapshots.count(r.name)) continue;
      return QueryError(src_, r.name_range,
                        fmt::format("'{}' is remembered but never read", r.name),
                        fmt::format("read it in the query after the last ';', e.g. {}[{}]", r.name,
                                    r.keys.empty() ? "tid" : r.keys[0]->text));
    }
    return Status::Ok();
  }

 private:
  Status Mismatch(const Expr& e, const std::string& expected, const std::string& hint) const {
    return QueryError(
        src_, e.range,
        fmt::format("Type mismatch: found {}, expected {}", TypeName(e.type), expected), hint);
  }

  // The hint for a user pointer where a value was wanted says how to read the string.
  std::string PointerHint(const Expr& e, const std::string& fallback) const {
    if (e.type.user_ptr)
      return fmt::format("'{}' is a user pointer; read the string with str({})", e.text, e.text);
    return fallback;
  }

  Status ExpectInt(const Expr& e, const std::string& hint) const {
    if (e.type.kind == TypeKind::kInt) return Status::Ok();
    return Mismatch(e, "int", hint);
  }

  Status CheckAgg(AggItem& item) {
    const char* func = AggFuncName(item.func);
    if (!item.arg) return Status::Ok();
    FAY_RETURN_IF_ERROR(Check(*item.arg));
    if (item.func == AggFunc::kDistinct) {
      if (item.arg->type.kind == TypeKind::kStack)
        return Mismatch(*item.arg, "int or string", "distinct() counts distinct ints or strings");
    } else {
      FAY_RETURN_IF_ERROR(ExpectInt(*item.arg, fmt::format("{}() takes an int", func)));
    }
    if (item.func == AggFunc::kLhist) {
      const char* usage = "e.g. lhist(latency, 0, 1ms, 100us)";
      if (item.step <= 0)
        return QueryError(src_, item.range, "lhist() step must be positive", usage);
      if (item.lo >= item.hi)
        return QueryError(src_, item.range, "lhist() lo must be below hi", usage);
      __int128 width = static_cast<__int128>(item.hi) - item.lo;
      if (width % item.step != 0)
        return QueryError(src_, item.range, "lhist() range hi - lo must be a whole number of steps",
                          usage);
      if (width / item.step > 1000)
        return QueryError(src_, item.range,
                          fmt::format("lhist() has {} buckets; at most 1000 are allowed",
                                      static_cast<int64_t>(width / item.step)),
                          "use a larger step, or hist() for log2 buckets");
    }
    if (item.func == AggFunc::kQuantile && !(item.q > 0 && item.q <= 1))
      return QueryError(src_, item.range, "quantile() q must be in (0, 1]",
                        "e.g. quantile(latency, 0.99)");
    return Status::Ok();
  }

  // The remembered value and its keys are ints or strings, read where the event happens: a
  // system call's result, errno or latency is not known at its entry, where the state pipeline
  // runs.
  Status CheckRemember(RememberStage& r) {
    const char* hint =
        "remember keeps an int or a string under int or string keys, e.g. remember time as t0 "
        "by tid";
    // probe and func name a probe of the pipeline's own list, which the query's are not.
    auto own_names = [&](const Expr& e) -> Status {
      if (e.kind == ExprKind::kField && (e.name == "probe" || e.name == "func"))
        return QueryError(src_, e.range,
                          fmt::format("'{}' cannot be remembered or be a remembered key", e.name),
                          "it names the state pipeline's own probes; aggregate by it in the "
                          "query instead");
      return Status::Ok();
    };
    FAY_RETURN_IF_ERROR(Check(*r.value));
    FAY_RETURN_IF_ERROR(own_names(*r.value));
    if (r.value->type.kind != TypeKind::kString)
      FAY_RETURN_IF_ERROR(ExpectInt(*r.value, PointerHint(*r.value, hint)));
    FAY_RETURN_IF_ERROR(NoExitField(*r.value));
    for (ExprPtr& k : r.keys) {
      FAY_RETURN_IF_ERROR(Check(*k));
      FAY_RETURN_IF_ERROR(own_names(*k));
      if (k->type.kind != TypeKind::kString)
        FAY_RETURN_IF_ERROR(ExpectInt(*k, PointerHint(*k, hint)));
      FAY_RETURN_IF_ERROR(NoExitField(*k));
    }
    return Status::Ok();
  }

  Status NoExitField(const Expr& e) const {
    if (e.kind == ExprKind::kField) {
      for (size_t p = 0; p < probes_.size() && p < e.field_index.size(); ++p) {
        FieldSource s = probes_[p].fields[static_cast<size_t>(e.field_index[p])].source;
        // A system call's ret and errno are read where it returns, where such a pipeline then
        // runs (planner.cc); its latency would need the entry too.
        if ((s == FieldSource::kRet || s == FieldSource::kErrno) &&
            probes_[p].kind == ProbeKind::kSyscall)
          continue;
        if (s == FieldSource::kRet || s == FieldSource::kErrno || s == FieldSource::kLatency)
          return QueryError(
              src_, e.range,
              fmt::format("A state pipeline cannot read '{}' of {}", e.name, probes_[p].name),
              "a state pipeline runs once, where its event happens: latency needs a call's "
              "entry and exit paired");
        if (s == FieldSource::kUprobeArg && probes_[p].kind == ProbeKind::kUretprobe)
          return QueryError(
              src_, e.range,
              fmt::format("A state pipeline cannot read '{}' of {}", e.name, probes_[p].name),
              "the arguments are gone at the return: remember them at the uprobe");
      }
    }
    for (const ExprPtr& k : e.kids) FAY_RETURN_IF_ERROR(NoExitField(*k));
    return Status::Ok();
  }

  static bool ReadsState(const Expr& e) {
    if (e.kind == ExprKind::kState) return true;
    for (const ExprPtr& k : e.kids)
      if (ReadsState(*k)) return true;
    return false;
  }

  // name[key, ...]: a value a state pipeline before ';' remembers, under as many int keys.
  Status CheckState(Expr& e) {
    if (in_state_pipeline_)
      return QueryError(src_, e.range, "A state pipeline cannot read a state",
                        "only the query after the last ';' reads what is remembered");
    std::vector<std::string> names;
    for (size_t i = 0; i < states_.size(); ++i) {
      const auto& r = std::get<RememberStage>(states_[i]->stages.back().stage);
      names.push_back(r.name);
      if (r.name != e.name) continue;
      size_t want = r.keys.empty() ? 1 : r.keys.size();
      if (e.kids.size() != want)
        return QueryError(src_, e.range,
                          fmt::format("'{}' is remembered under {} key{}, found {}", e.name, want,
                                      want == 1 ? "" : "s", e.kids.size()),
                          r.keys.empty() ? fmt::format("it is kept by thread: {}[tid]", e.name)
                                         : fmt::format("write {}[{}]", e.name, [&] {
                                             std::vector<std::string> ks;
                                             for (const ExprPtr& k : r.keys) ks.push_back(k->text);
                                             return Join(ks);
                                           }()));
      for (size_t i = 0; i < e.kids.size(); ++i) {
        ExprPtr& k = e.kids[i];
        FAY_RETURN_IF_ERROR(Check(*k));
        // Each key of the kind it was remembered under (by thread: the tid, an int).
        const bool str = !r.keys.empty() && r.keys[i]->type.kind == TypeKind::kString;
        if (str && k->type.kind != TypeKind::kString)
          return Mismatch(*k, "string",
                          PointerHint(*k, fmt::format("'{}' is remembered by {}, a string", e.name,
                                                      r.keys[i]->text)));
        if (!str)
          FAY_RETURN_IF_ERROR(ExpectInt(
              *k,
              PointerHint(*k, r.keys.empty() ? std::string("kept by thread: read it with the tid")
                                             : fmt::format("'{}' is remembered by {}, an int",
                                                           e.name, r.keys[i]->text))));
        if (ReadsState(*k))
          return QueryError(src_, k->range, "A state read's key cannot read a state",
                            "every read happens before the where, all at once");
      }
      e.state = static_cast<int>(i);
      read_states_.insert(e.state);
      e.type = r.value->type.kind == TypeKind::kString ? r.value->type
                                                       : Type::Int(r.value->type.is_signed);
      return Status::Ok();
    }
    std::string hint = names.empty()
                           ? "a pipeline before ';' remembers values, e.g. uprobe:./app:start | "
                             "remember time as t0; uprobe:./app:stop | hist(time - t0[tid])"
                           : "remembered: " + Join(names);
    std::vector<std::string> near = Nearest(names, e.name, 1);
    if (!near.empty()) hint = fmt::format("did you mean '{}'? {}", near[0], hint);
    return QueryError(src_, e.range, fmt::format("Nothing is remembered as '{}'", e.name), hint);
  }

  Status Check(Expr& e) {
    switch (e.kind) {
      case ExprKind::kState:
        return CheckState(e);
      case ExprKind::kInt:
        e.type = Type::Int(true);
        return Status::Ok();
      case ExprKind::kString:
        e.type = Type::Str(static_cast<int>(e.str_value.size()) + 1);
        return Status::Ok();
      case ExprKind::kField:
        return CheckField(e);
      case ExprKind::kCall:
        return CheckCall(e);
      case ExprKind::kUnary:
        return CheckUnary(e);
      case ExprKind::kBinary:
        return CheckBinary(e);
      case ExprKind::kIn:
        return CheckIn(e);
    }
    return Status(Code::kInternal, "unknown expression kind");
  }

  static int FieldIndex(const ProbeInfo& p, const std::string& name) {
    for (size_t i = 0; i < p.fields.size(); ++i)
      if (p.fields[i].name == name) return static_cast<int>(i);
    return -1;
  }

  Status CheckField(Expr& e) {
    e.field_index.clear();
    for (const ProbeInfo& p : probes_) {
      int index = FieldIndex(p, e.name);
      if (index < 0) return UnknownField(e, p);
      e.field_index.push_back(index);
    }
    return MergeFieldTypes(e);
  }

  // A field resolves per probe (Expr::field_index): the same name may sit at another place, or
  // have another width, on each. Its type is the one every probe's value fits.
  Status MergeFieldTypes(Expr& e) {
    const ProbeInfo* first_probe = nullptr;
    for (size_t n = 0; n < probes_.size(); ++n) {
      const ProbeInfo& p = probes_[n];
      const Type& t = p.fields[static_cast<size_t>(e.field_index[n])].type;
      if (!first_probe) {
        e.type = t;
        first_probe = &p;
      } else if (t.kind != e.type.kind) {
        return QueryError(src_, e.range,
                          fmt::format("Field '{}' is {} on {} but {} on {}", e.name,
                                      TypeName(e.type), first_probe->name, TypeName(t), p.name),
                          "query these probes separately");
      } else if (t.kind == TypeKind::kInt) {
        // `int fd` on one syscall and `unsigned int fd` on another: compute as signed, and
        // only a pointer on every probe can be read with str().
        e.type.is_signed = e.type.is_signed || t.is_signed;
        e.type.user_ptr = e.type.user_ptr && t.user_ptr;
        if (e.type.user_ptr) e.type.is_signed = false;
      } else if (t.kind == TypeKind::kString) {
        e.type.str_len = std::max(e.type.str_len, t.str_len);
      }
    }
    return Status::Ok();
  }

  // coalesce(a, b, ...): on each probe, the first of the named fields that probe has. It lets
  // one source read what its probes name differently (args.filename on openat, args.pathname
  // on mkdir). It becomes a plain field that resolves per probe, so every layer that reads
  // fields (the probe, the interpreter, the trace reader) handles it with no code of its own.
  Status CheckCoalesce(Expr& e) {
    const char* usage = "e.g. coalesce(args.filename, args.pathname)";
    if (e.kids.size() < 2)
      return QueryError(src_, e.range,
                        fmt::format("coalesce() takes 2 or more fields, found {}", e.kids.size()),
                        usage);
    for (const auto& k : e.kids)
      if (k->kind != ExprKind::kField)
        return QueryError(src_, k->range, "coalesce() takes field names", usage);
    e.field_index.clear();
    std::string name;
    for (const ProbeInfo& p : probes_) {
      int index = -1;
      for (const auto& k : e.kids) {
        index = FieldIndex(p, k->name);
        if (index >= 0) {
          if (name.empty()) name = k->name;
          break;
        }
      }
      if (index < 0) {
        std::vector<std::string> names;
        for (const auto& k : e.kids) names.push_back(k->name);
        return QueryError(src_, e.range,
                          fmt::format("None of the fields {} exists on {}", Join(names), p.name),
                          fmt::format("fields of {}: {}", p.name, Join(FieldNames(p))));
      }
      e.field_index.push_back(index);
    }
    e.kind = ExprKind::kField;
    e.name = name;
    e.kids.clear();
    return MergeFieldTypes(e);
  }

  // The one field of `p` that could be what the user pointer `e` names elsewhere: p's only
  // user pointer, e.g. mkdir's args.pathname for openat's args.filename.
  std::string SameRoleField(const Expr& e, const ProbeInfo& p) const {
    const Field* elsewhere = nullptr;
    for (const ProbeInfo& q : probes_)
      if (const Field* f = q.FindField(e.name)) elsewhere = f;
    if (!elsewhere || elsewhere->source != FieldSource::kCtx || !elsewhere->type.user_ptr)
      return "";
    std::string found;
    for (const Field& f : p.fields) {
      if (f.source != FieldSource::kCtx || f.type != elsewhere->type) continue;
      if (!found.empty()) return "";
      found = f.name;
    }
    return found;
  }

  Status UnknownField(const Expr& e, const ProbeInfo& p) const {
    std::vector<std::string> names = FieldNames(p);
    std::string guess;
    if (e.name.find('.') == std::string::npos && p.FindField("args." + e.name)) {
      guess = "args." + e.name;
    } else {
      // Compare without the "args." prefix, so `filenme` finds args.filename, and demand a close
      // match: a wrong guess is worse than the plain list.
      auto bare = [](std::string_view s) { return s.substr(0, 5) == "args." ? s.substr(5) : s; };
      size_t best = SIZE_MAX;
      for (const std::string& n : names) {
        std::string_view a = bare(e.name), b = bare(n);
        size_t d = EditDistance(a, b);
        if (d * 3 <= std::max(a.size(), b.size()) && d < best) {
          best = d;
          guess = n;
        }
      }
    }
    for (const auto& st : states_)
      if (std::get<RememberStage>(st->stages.back().stage).name == e.name)
        return QueryError(src_, e.range,
                          fmt::format("'{}' is remembered by a state pipeline: read it with its "
                                      "keys",
                                      e.name),
                          fmt::format("e.g. {}[tid]", e.name));
    std::string hint;
    std::string other = probes_.size() > 1 && guess.empty() ? SameRoleField(e, p) : "";
    if (!other.empty()) {
      hint = fmt::format(
          "{} calls it '{}'; to read whichever each probe has, write coalesce({}, {}). ", p.name,
          other, e.name, other);
    } else if (!guess.empty()) {
      hint = fmt::format("did you mean '{}'? ", guess);
    }
    hint += fmt::format("fields of {}: {}", p.name, Join(names));
    if (probes_.size() > 1 && other.empty())
      hint += " (a field must exist on every probe of the query, or use coalesce(a, b))";
    return QueryError(src_, e.range, fmt::format("Unknown field '{}' on {}", e.name, p.name), hint);
  }

  // str() on a field every probe marks as a user pointer, or on a uprobe argument/return
  // value, whose C type fay cannot know.
  bool Readable(const Expr& p) const {
    if (p.type.kind != TypeKind::kInt) return false;
    if (p.type.user_ptr) return true;
    if (p.kind != ExprKind::kField || p.field_index.size() != probes_.size()) return false;
    for (size_t i = 0; i < probes_.size(); ++i) {
      FieldSource src = probes_[i].fields[static_cast<size_t>(p.field_index[i])].source;
      if (src != FieldSource::kUprobeArg && src != FieldSource::kUprobeRet) return false;
    }
    return true;
  }

  // join(argv): the strings of a NULL-terminated array of user pointers, space-separated.
  Status CheckJoin(Expr& e) {
    const char* usage =
        "join(args.argv) reads up to 16 strings in 128 bytes, join(args.argv, N) in N (2..256)";
    if (e.kids.empty() || e.kids.size() > 2)
      return QueryError(src_, e.range,
                        fmt::format("join() takes 1 or 2 arguments, found {}", e.kids.size()),
                        usage);
    int len = 128;
    if (e.kids.size() == 2) {
      Expr& n = *e.kids[1];
      FAY_RETURN_IF_ERROR(Check(n));
      if (n.kind != ExprKind::kInt || n.int_value < 2 || n.int_value > 256)
        return QueryError(src_, n.range, "join() length must be an integer literal 2..256", usage);
      len = static_cast<int>(n.int_value);
    }
    Expr& p = *e.kids[0];
    FAY_RETURN_IF_ERROR(Check(p));
    if (!StringArray(p))
      return Mismatch(p, "array of string pointers",
                      "join() reads a NULL-terminated char ** such as execve's args.argv");
    e.type = Type::Str(len);
    return Status::Ok();
  }

  // A char ** (or char *const *) on every probe, or a uprobe argument, whose C type fay
  // cannot know.
  bool StringArray(const Expr& p) const {
    if (p.kind != ExprKind::kField || p.field_index.size() != probes_.size()) return false;
    for (size_t i = 0; i < probes_.size(); ++i) {
      const Field& f = probes_[i].fields[static_cast<size_t>(p.field_index[i])];
      if (f.source == FieldSource::kUprobeArg) continue;
      std::string c;
      for (char ch : f.c_type)
        if (ch != ' ') c += ch;
      auto ends = [&](std::string_view s) {
        return c.size() >= s.size() && c.compare(c.size() - s.size(), s.size(), s) == 0;
      };
      if (f.source != FieldSource::kCtx || !(ends("char**") || ends("char*const*"))) return false;
    }
    return true;
  }

  // A key or selected column: the one place ksym()/usym() may stand, as the whole of it.
  Status CheckColumn(Expr& e) {
    column_ = &e;
    Status st = Check(e);
    column_ = nullptr;
    return st;
  }

  // ksym(addr), usym(addr): the address, named when the row is printed (a kernel symbol from
  // kallsyms; a function of the process the event ran in).
  Status CheckSymbol(Expr& e) {
    const std::string usage =
        fmt::format("{}(addr) names a code address, e.g. count() by {}({})", e.name, e.name,
                    e.name == "ksym" ? "args.function" : "arg0");
    if (e.kids.size() != 1)
      return QueryError(src_, e.range,
                        fmt::format("{}() takes 1 argument, found {}", e.name, e.kids.size()),
                        usage);
    FAY_RETURN_IF_ERROR(Check(*e.kids[0]));
    FAY_RETURN_IF_ERROR(ExpectInt(*e.kids[0], usage));
    if (&e != column_)
      return QueryError(src_, e.range,
                        fmt::format("{}() is named only when the row is printed", e.name),
                        "use it as a whole key or select column: ... by " + e.text);
    e.type = Type::Str(16);  // the address (and, for usym, its process) in the probe
    return Status::Ok();
  }

  Status CheckCall(Expr& e) {
    if (e.name == "coalesce") return CheckCoalesce(e);
    if (e.name == "join") return CheckJoin(e);
    if (e.name == "ksym" || e.name == "usym") return CheckSymbol(e);
    if (e.name != "str") {
      std::string hint =
          "functions: str(ptr), str(ptr, N), join(argv), ksym(addr), usym(addr), "
          "coalesce(field, field, ...)";
      if (EditDistance(e.name, "str") <= 2) hint = "did you mean 'str'? " + hint;
      return QueryError(src_, e.range, fmt::format("Unknown function '{}'", e.name), hint);
    }
    const char* usage = "str(ptr) reads up to 64 bytes, str(ptr, N) up to N (1..256)";
    if (e.kids.empty() || e.kids.size() > 2)
      return QueryError(src_, e.range,
                        fmt::format("str() takes 1 or 2 arguments, found {}", e.kids.size()),
                        usage);
    Expr& p = *e.kids[0];
    FAY_RETURN_IF_ERROR(Check(p));
    if (!Readable(p)) {
      std::string hint =
          p.type.kind == TypeKind::kString
              ? fmt::format("'{}' is already a string; use it without str()", p.text)
              : "str() reads a NUL-terminated string at a user-space address, such as "
                "args.filename";
      return Mismatch(p, "user pointer", hint);
    }
    int len = 64;
    if (e.kids.size() == 2) {
      Expr& n = *e.kids[1];
      FAY_RETURN_IF_ERROR(Check(n));
      if (n.kind != ExprKind::kInt || n.int_value < 1 || n.int_value > 256)
        return QueryError(src_, n.range, "str() length must be an integer literal 1..256", usage);
      len = static_cast<int>(n.int_value);
    }
    e.type = Type::Str(len);
    return Status::Ok();
  }

  Status CheckUnary(Expr& e) {
    Expr& x = *e.kids[0];
    FAY_RETURN_IF_ERROR(Check(x));
    FAY_RETURN_IF_ERROR(ExpectInt(x, PointerHint(x, fmt::format("'{}' takes an int", e.op))));
    e.type = Type::Int(e.op == "~" ? x.type.is_signed : true);
    return Status::Ok();
  }

  Status CheckBinary(Expr& e) {
    Expr& l = *e.kids[0];
    Expr& r = *e.kids[1];
    FAY_RETURN_IF_ERROR(Check(l));
    FAY_RETURN_IF_ERROR(Check(r));
    const std::string& op = e.op;
    if (op == "&&" || op == "||" || IsArithmetic(op) || IsOrder(op)) {
      std::string hint = fmt::format("'{}' takes ints", op);
      if (IsOrder(op) && l.type.kind == TypeKind::kString && r.type.kind == TypeKind::kString)
        return QueryError(src_, e.range, fmt::format("Strings cannot be compared with '{}'", op),
                          "strings take only == and != (with * and ? globs)");
      FAY_RETURN_IF_ERROR(ExpectInt(l, PointerHint(l, hint)));
      FAY_RETURN_IF_ERROR(ExpectInt(r, PointerHint(r, hint)));
      if (IsArithmetic(op)) {
        // An int literal takes the other side's signedness, as a C constant would.
        bool is_signed = l.type.is_signed && r.type.is_signed;
        if (l.kind == ExprKind::kInt) is_signed = r.type.is_signed;
        if (r.kind == ExprKind::kInt) is_signed = l.type.is_signed;
        if (l.kind == ExprKind::kInt && r.kind == ExprKind::kInt) is_signed = true;
        e.type = Type::Int(is_signed);
      } else {
        e.type = Type::Int(true);
      }
      return Status::Ok();
    }
    // == and !=: two ints or two strings. The side that is not a literal sets the expectation.
    bool literal_left = IsLiteral(l) && !IsLiteral(r);
    Expr& expected = literal_left ? r : l;
    Expr& found = literal_left ? l : r;
    if (expected.type.kind == TypeKind::kStack || found.type.kind == TypeKind::kStack)
      return Mismatch(expected.type.kind == TypeKind::kStack ? expected : found, "int or string",
                      "stacks can only be aggregation keys");
    if (l.type.kind != r.type.kind) {
      std::string hint = fmt::format("'{}' compares two ints or two strings; '{}' is {}", op,
                                     expected.text, TypeName(expected.type));
      if (expected.type.user_ptr) hint = PointerHint(expected, hint);
      return Mismatch(found, TypeName(expected.type), hint);
    }
    if (l.type.kind == TypeKind::kString) {
      FAY_RETURN_IF_ERROR(CheckProbeGlob(l, r));
      FAY_RETURN_IF_ERROR(CheckProbeGlob(r, l));
      FAY_RETURN_IF_ERROR(CheckLiteralFits(l, r));
      FAY_RETURN_IF_ERROR(CheckLiteralFits(r, l));
      e.is_glob = (l.kind == ExprKind::kString && HasGlob(l.str_value)) ||
                  (r.kind == ExprKind::kString && HasGlob(r.str_value));
    }
    e.type = Type::Int(true);
    return Status::Ok();
  }

  // The probe matches a string against a pattern in one unrolled pass, so '*' may only end the
  // pattern. `probe` and `func` are exempt: their values are known per probe, and the pattern is
  // matched when the program is generated.
  Status CheckProbeGlob(const Expr& subject, const Expr& pattern) const {
    if (pattern.kind != ExprKind::kString || !HasGlob(pattern.str_value)) return Status::Ok();
    if (subject.kind == ExprKind::kField && (subject.name == "probe" || subject.name == "func"))
      return Status::Ok();
    std::string_view body = pattern.str_value;
    if (!body.empty() && body.back() == '*') body.remove_suffix(1);
    if (body.find('*') == std::string_view::npos) return Status::Ok();
    return QueryError(src_, pattern.range,
                      fmt::format("Glob {} cannot be matched inside the probe", pattern.text),
                      "a glob may use '?' anywhere but '*' only at the end, e.g. \"post*\"");
  }

  // A literal that the compared string cannot hold never matches it: `comm` keeps 15
  // characters, `str(p)` 63. That is a mistake in the query, not a question with the answer
  // "never", so it is refused with the way to ask what was meant.
  Status CheckLiteralFits(const Expr& subject, const Expr& lit) const {
    if (lit.kind != ExprKind::kString || subject.kind == ExprKind::kString) return Status::Ok();
    if (subject.kind == ExprKind::kField && (subject.name == "probe" || subject.name == "func"))
      return Status::Ok();
    if (subject.type.kind != TypeKind::kString || subject.type.str_len <= 0) return Status::Ok();
    const std::string& v = lit.str_value;
    size_t need = HasGlob(v) ? v.size() - std::count(v.begin(), v.end(), '*') : v.size();
    size_t room = static_cast<size_t>(subject.type.str_len - 1);
    if (need <= room) return Status::Ok();
    std::string hint;
    if (subject.kind == ExprKind::kCall && subject.name == "str")
      hint = fmt::format("read more of it: str({}, N) reads up to N - 1 characters (N <= 256)",
                         subject.kids[0]->text);
    else if (subject.kind == ExprKind::kField && subject.name == "comm")
      hint =
          "the kernel keeps the first 15 characters of a command name: compare those, or "
          "end the pattern with '*'";
    else
      hint = fmt::format("compare its first {} characters, or end the pattern with '*'", room);
    return QueryError(src_, lit.range,
                      fmt::format("{} needs {} characters but {} holds at most {}: it can never "
                                  "match",
                                  lit.text, need, subject.text, room),
                      hint);
  }

  Status CheckIn(Expr& e) {
    Expr& x = *e.kids[0];
    FAY_RETURN_IF_ERROR(Check(x));
    // Int lists compile to a balanced search, string lists to one match per item; both are
    // bounded by what one verified program may hold.
    const size_t max_items = x.type.kind == TypeKind::kString ? 256 : 65536;
    if (e.kids.size() - 1 > max_items)
      return QueryError(
          src_, e.kids[max_items + 1]->range,
          fmt::format("An 'in' list of {} {} is too long: at most {}", e.kids.size() - 1,
                      x.type.kind == TypeKind::kString ? "strings" : "ints", max_items),
          "split it across where stages joined by ||, or narrow it with a range "
          "test such as (pid >= 1000 && pid < 2000)");
    if (x.type.kind == TypeKind::kStack)
      return Mismatch(x, "int or string", "stacks can only be aggregation keys");
    for (size_t i = 1; i < e.kids.size(); ++i) {
      Expr& item = *e.kids[i];
      FAY_RETURN_IF_ERROR(Check(item));
      if (item.type.kind != x.type.kind) {
        std::string hint =
            fmt::format("'{}' is {}, so the list holds {} literals", x.text, TypeName(x.type),
                        x.type.kind == TypeKind::kString ? "string" : "int");
        if (x.type.user_ptr) hint = PointerHint(x, hint);
        return Mismatch(item, x.type.kind == TypeKind::kString ? "string" : TypeName(x.type), hint);
      }
      FAY_RETURN_IF_ERROR(CheckProbeGlob(x, item));
      FAY_RETURN_IF_ERROR(CheckLiteralFits(x, item));
      if (item.kind == ExprKind::kString && HasGlob(item.str_value)) e.is_glob = true;
    }
    e.type = Type::Int(true);
    return Status::Ok();
  }

  const std::string& src_;
  const std::vector<ProbeInfo>& probes_;
  const std::vector<std::shared_ptr<Query>>& states_;
  bool in_state_pipeline_ = false;
  const Expr* column_ = nullptr;  // the key or select column being checked (CheckColumn)
  std::set<int> read_states_;     // the states the query reads
};

}  // namespace

Status TypeCheck(Query& q, const std::vector<ProbeInfo>& probes) {
  return TypeChecker(q.text, probes, q.states).Run(q);
}

}  // namespace fay
