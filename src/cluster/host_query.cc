#include "cluster/host_query.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>

#include "common/strings.h"
#include "query/ast.h"
#include "query/diagnostics.h"
#include "query/parser.h"

namespace fay::cluster {
namespace {

bool UsesHost(const Expr& e) {
  if (e.kind == ExprKind::kField && e.name == "host") return true;
  return std::any_of(e.kids.begin(), e.kids.end(), [](const auto& k) { return UsesHost(*k); });
}

const Expr* FirstHost(const Expr& e) {
  if (e.kind == ExprKind::kField && e.name == "host") return &e;
  for (const auto& k : e.kids)
    if (const Expr* h = FirstHost(*k)) return h;
  return nullptr;
}

// Offsets of a one-line range in `text`: [begin, end).
std::pair<size_t, size_t> Offsets(const std::string& text, SourceRange r) {
  size_t at = 0;
  for (int line = 1; line < r.line && at != std::string::npos; ++line) {
    at = text.find('\n', at);
    if (at != std::string::npos) ++at;
  }
  if (at == std::string::npos) return {text.size(), text.size()};
  return {std::min(text.size(), at + r.col_begin - 1), std::min(text.size(), at + r.col_end)};
}

// A condition over host and literals alone; evaluated with the host's name.
Expected<bool> Eval(const std::string& src, const Expr& e, const std::string& name);

Expected<std::string> StringOf(const std::string& src, const Expr& e, const std::string& name) {
  if (e.kind == ExprKind::kString) return e.str_value;
  if (e.kind == ExprKind::kField && e.name == "host") return name;
  return QueryError(src, e.range, "a host condition compares host with strings only",
                    "where host == \"db*\" or host in (\"a\", \"b\")");
}

bool Match(const std::string& pattern, const std::string& s) {
  return pattern.find_first_of("*?") != std::string::npos ? GlobMatch(pattern, s) : pattern == s;
}

Expected<bool> Eval(const std::string& src, const Expr& e, const std::string& name) {
  if (e.kind == ExprKind::kUnary && e.op == "!") {
    FAY_ASSIGN_OR_RETURN(bool v, Eval(src, *e.kids[0], name));
    return !v;
  }
  if (e.kind == ExprKind::kBinary && (e.op == "&&" || e.op == "||")) {
    FAY_ASSIGN_OR_RETURN(bool a, Eval(src, *e.kids[0], name));
    FAY_ASSIGN_OR_RETURN(bool b, Eval(src, *e.kids[1], name));
    return e.op == "&&" ? a && b : a || b;
  }
  if (e.kind == ExprKind::kBinary && (e.op == "==" || e.op == "!=")) {
    FAY_ASSIGN_OR_RETURN(std::string a, StringOf(src, *e.kids[0], name));
    FAY_ASSIGN_OR_RETURN(std::string b, StringOf(src, *e.kids[1], name));
    // The literal is the pattern, on either side.
    bool eq = e.kids[0]->kind == ExprKind::kString ? Match(a, b) : Match(b, a);
    return e.op == "==" ? eq : !eq;
  }
  if (e.kind == ExprKind::kIn) {
    FAY_ASSIGN_OR_RETURN(std::string v, StringOf(src, *e.kids[0], name));
    for (size_t i = 1; i < e.kids.size(); ++i) {
      FAY_ASSIGN_OR_RETURN(std::string p, StringOf(src, *e.kids[i], name));
      if (Match(p, v)) return true;
    }
    return false;
  }
  return QueryError(src, e.range, "a host condition may use ==, !=, in, &&, || and ! only",
                    "where host == \"db*\" or host in (\"a\", \"b\")");
}

Status Refuse(const std::string& src, const Expr& at, const std::string& why) {
  return QueryError(src, at.range, why,
                    "host is a key of its own (count() by host, comm) or a `where` stage of its "
                    "own (| where host == \"db*\")");
}

// `host` among an aggregate's keys: where it is, and the text to cut (with its `by`, comma or
// alias) so the local engine never sees it.
Status CutHostKey(const std::string& text, const AggregateStage& a, HostKey* out,
                  std::vector<std::pair<size_t, size_t>>* cuts) {
  for (const AggItem& item : a.aggs)
    if (item.arg && UsesHost(*item.arg))
      return Refuse(text, *FirstHost(*item.arg), "an aggregate cannot read host");
  for (size_t i = 0; i < a.keys.size(); ++i) {
    const Expr& k = *a.keys[i].expr;
    if (!UsesHost(k)) continue;
    if (k.kind != ExprKind::kField)
      return Refuse(text, *FirstHost(k), "host can only be a key by itself");
    out->index = static_cast<int>(i);
    out->name = a.keys[i].name;
    auto [b, e] = Offsets(text, k.range);
    // `as NAME` after it goes too (`as host` included).
    size_t after = text.find_first_not_of(" \t\n", e);
    if (after != std::string::npos && text.compare(after, 2, "as") == 0 &&
        after + 2 < text.size() && std::isspace(static_cast<unsigned char>(text[after + 2]))) {
      size_t alias = text.find(out->name, after + 2);
      if (alias != std::string::npos) e = alias + out->name.size();
    }
    if (a.keys.size() == 1) {
      size_t by = text.rfind("by", b);
      if (by == std::string::npos) return Refuse(text, k, "cannot cut `by host`");
      cuts->push_back({by, e});
    } else if (i + 1 < a.keys.size()) {
      size_t comma = text.find(',', e);
      size_t next = text.find_first_not_of(" \t\n", comma + 1);
      cuts->push_back({b, next});
    } else {
      size_t comma = text.rfind(',', b);
      cuts->push_back({comma, e});
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<HostQuery> SplitHostQuery(const std::string& text) {
  FAY_ASSIGN_OR_RETURN(auto q, ParseQuery(text));
  HostQuery out;
  // Cuts, applied from the end so earlier offsets stay right.
  std::vector<std::pair<size_t, size_t>> cuts;
  for (const StageNode& node : q->stages) {
    if (const auto* w = std::get_if<WhereStage>(&node.stage)) {
      if (!UsesHost(*w->cond)) continue;
      // Checked now, with a caret, rather than on every host later.
      FAY_RETURN_IF_ERROR(Eval(text, *w->cond, "").status());
      auto [b, e] = Offsets(text, node.range);
      size_t bar = text.rfind('|', b);
      if (bar == std::string::npos || text.find_first_not_of(" \t\n", bar + 1) != b)
        return Refuse(text, *w->cond, "this host condition cannot be cut from the query");
      auto [cb, ce] = Offsets(text, w->cond->range);
      out.host_filters.push_back(text.substr(cb, ce - cb));
      cuts.push_back({bar, e});
    } else if (const auto* a = std::get_if<AggregateStage>(&node.stage)) {
      HostKey k;
      FAY_RETURN_IF_ERROR(CutHostKey(text, *a, &k, &cuts));
      out.host_key = k.index;
      out.key_name = k.name;
    } else if (const auto* t = std::get_if<TablesStage>(&node.stage)) {
      for (size_t i = 0; i < t->tables.size(); ++i) {
        HostKey k;
        FAY_RETURN_IF_ERROR(CutHostKey(text, t->tables[i].agg, &k, &cuts));
        if (i == 0) {
          out.host_key = k.index;
          out.key_name = k.name;
        } else {
          out.tables.push_back(k);
        }
      }
    } else if (std::holds_alternative<WhenStage>(node.stage) ||
               std::holds_alternative<ClusterStage>(node.stage)) {
      // Stages on the merged rows: the root applies them (ApplyOutputStages), not the agents,
      // whose keys lack host.
      auto [b, e] = Offsets(text, node.range);
      size_t bar = text.rfind('|', b);
      if (bar == std::string::npos) return Error(Code::kInternal, "a stage without its '|'");
      cuts.push_back({bar, e});
    } else if (const auto* s = std::get_if<SelectStage>(&node.stage)) {
      for (const KeyItem& item : s->items)
        if (UsesHost(*item.expr))
          return Refuse(text, *FirstHost(*item.expr),
                        "select across hosts is not supported yet; aggregate instead");
    }
  }
  out.local = text;
  std::sort(cuts.begin(), cuts.end());
  for (auto it = cuts.rbegin(); it != cuts.rend(); ++it)
    out.local.replace(it->first, it->second - it->first, std::string(it->second - it->first, ' '));
  return out;
}

Status ApplyOutputStages(const Query& q, Plan* plan) {
  for (const StageNode& node : q.stages) {
    if (const auto* w = std::get_if<WhenStage>(&node.stage)) {
      // Names only: the merged rows' columns, host included.
      Status bad;
      auto check = [&](const Expr& e, auto&& self) -> void {
        if (!bad.ok()) return;
        if (e.kind == ExprKind::kField) {
          bool found = false;
          for (const Slot& k : plan->keys) found = found || k.name == e.name;
          for (const AggSlot& a : plan->aggs) found = found || a.item->name == e.name;
          if (!found)
            bad = QueryError(q.text, e.range, fmt::format("'{}' is not an output column", e.name),
                             "when reads the columns the aggregate prints");
        } else if (e.kind != ExprKind::kInt && e.kind != ExprKind::kString &&
                   e.kind != ExprKind::kUnary && e.kind != ExprKind::kBinary) {
          bad = QueryError(q.text, e.range,
                           "'when' reads output columns, literals and operators only");
        }
        for (const ExprPtr& k : e.kids) self(*k, self);
      };
      check(*w->cond, check);
      FAY_RETURN_IF_ERROR(bad);
      plan->when = w->cond.get();
    } else if (const auto* c = std::get_if<ClusterStage>(&node.stage)) {
      plan->cluster_k = c->k;
      plan->cluster_key = -1;
      for (size_t i = 0; i < plan->keys.size(); ++i)
        if (plan->keys[i].name == c->by) plan->cluster_key = static_cast<int>(i);
      if (plan->cluster_key < 0 || plan->keys.size() < 2)
        return QueryError(
            q.text, c->by_range,
            fmt::format("'cluster' needs '{}' and another key of the aggregate", c->by),
            "e.g. syscall:* | count() by host, probe | cluster 3 by host");
    }
  }
  return Status::Ok();
}

Expected<bool> HostSelected(const std::string& text, const std::string& name) {
  FAY_ASSIGN_OR_RETURN(auto q, ParseQuery(text));
  for (const StageNode& node : q->stages) {
    const auto* w = std::get_if<WhereStage>(&node.stage);
    if (!w || !UsesHost(*w->cond)) continue;
    FAY_ASSIGN_OR_RETURN(bool ok, Eval(text, *w->cond, name));
    if (!ok) return false;
  }
  return true;
}

}  // namespace fay::cluster
