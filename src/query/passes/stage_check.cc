#include "query/passes/stage_check.h"

#include <fmt/format.h>

#include <set>

#include "query/diagnostics.h"
#include "query/parser.h"

namespace fay {
namespace {

const char* StageWord(const Stage& s) {
  switch (s.index()) {
    case 0:
      return "where";
    case 1:
      return "sample";
    case 2:
      return "aggregate";
    case 3:
      return "select";
    case 4:
      return "top";
    case 5:
      return "every";
    case 6:
      return "for";
    case 7:
      return "remember";
    case 8:
      return "format";
    case 9:
      return "tables";
    case 10:
      return "cluster";
    case 11:
      return "when";
    default:
      return "snapshot";
  }
}

// One output name; `aliased` says whether the user chose it.
struct OutName {
  std::string name;
  bool aliased;
  SourceRange range;
  std::string what;  // how to write the item, for the hint
};

Status CheckNames(const std::string& src, const std::vector<OutName>& names) {
  std::set<std::string> seen;
  for (const OutName& n : names) {
    if (n.name == "window")
      return QueryError(src, n.range, "Output name 'window' is reserved",
                        "every result row has a 'window' member holding the window's end time; "
                        "choose another name with 'as'");
    if (!seen.insert(n.name).second) {
      std::string hint = n.aliased
                             ? "choose a different name"
                             : fmt::format("name it with 'as', e.g. {} as {}2", n.what, n.name);
      return QueryError(src, n.range, fmt::format("Duplicate output name '{}'", n.name), hint);
    }
  }
  return Status::Ok();
}

// A state pipeline: where and sample stages, then its one remember stage.
Status CheckStatePipeline(const Query& q, std::set<std::string>* names) {
  for (const StageNode& node : q.stages) {
    const Stage& s = node.stage;
    if (std::holds_alternative<WhereStage>(s) || std::holds_alternative<SampleStage>(s)) continue;
    if (const auto* r = std::get_if<RememberStage>(&s)) {
      if (&node != &q.stages.back())
        return QueryError(q.text, node.range, "Only one remember stage is allowed per pipeline",
                          "remember one value per pipeline; start another before ';'");
      if (!names->insert(r->name).second)
        return QueryError(q.text, r->name_range,
                          fmt::format("'{}' is already remembered by another pipeline", r->name),
                          "choose a different name");
      continue;
    }
    return QueryError(q.text, node.range,
                      fmt::format("A state pipeline takes only where, sample and remember, not "
                                  "{}",
                                  StageWord(s)),
                      "the query after the last ';' aggregates or selects");
  }
  return Status::Ok();
}

std::vector<OutName> AggregateNames(const AggregateStage& agg) {
  std::vector<OutName> names;
  for (const KeyItem& k : agg.keys)
    names.push_back({k.name, k.name != k.expr->text, k.expr->range, k.expr->text});
  for (const AggItem& a : agg.aggs) {
    std::string func = AggFuncName(a.func);
    std::string what = a.arg ? fmt::format("{}({})", func, a.arg->text) : func + "()";
    if (a.func == AggFunc::kLhist || a.func == AggFunc::kQuantile) what = func + "(...)";
    names.push_back({a.name, a.name != func, a.range, what});
  }
  return names;
}

// `cluster K by KEY`: KEY names a key, another key gives the features, and the first aggregate
// is a number per row to make shares of.
Status CheckCluster(const std::string& src, const StageNode& node, const AggregateStage& agg,
                    const StageNode* top) {
  const auto& c = std::get<ClusterStage>(node.stage);
  if (top)
    return QueryError(src, top->range, "'top' and 'cluster' do not go together",
                      "cluster groups every row; drop top");
  bool found = false;
  for (const KeyItem& k : agg.keys) found = found || k.name == c.by;
  if (!found) {
    std::string keys;
    for (const KeyItem& k : agg.keys) keys += (keys.empty() ? "" : ", ") + k.name;
    return QueryError(src, c.by_range, fmt::format("'{}' is not a key of the aggregate", c.by),
                      keys.empty() ? "cluster groups the values of a key: count() by host, probe "
                                     "| cluster 3 by host"
                                   : fmt::format("its keys: {}", keys));
  }
  if (agg.keys.size() < 2)
    return QueryError(
        src, node.range,
        fmt::format("'cluster' needs a key besides {} to compare its values by", c.by),
        fmt::format("e.g. count() by {}, probe | cluster {} by {}", c.by, c.k, c.by));
  AggFunc f = agg.aggs.front().func;
  if (f == AggFunc::kHist || f == AggFunc::kLhist)
    return QueryError(src, agg.aggs.front().range,
                      "'cluster' compares a number per row: the first aggregate cannot be a "
                      "histogram",
                      "e.g. count() or sum(bytes)");
  return Status::Ok();
}

// `when COND`: COND reads the output columns by name, and compares numbers or strings.
Status CheckWhen(const std::string& src, const Expr& e, const AggregateStage& agg) {
  switch (e.kind) {
    case ExprKind::kInt:
    case ExprKind::kString:
      return Status::Ok();
    case ExprKind::kField: {
      for (const KeyItem& k : agg.keys)
        if (k.name == e.name) return Status::Ok();
      for (const AggItem& a : agg.aggs) {
        if (a.name != e.name) continue;
        if (a.func == AggFunc::kHist || a.func == AggFunc::kLhist)
          return QueryError(src, e.range,
                            fmt::format("'{}' is a histogram: when compares numbers", e.name),
                            "compare a count, sum, avg or quantile, e.g. when p99 > 10ms");
        return Status::Ok();
      }
      std::string cols;
      for (const KeyItem& k : agg.keys) cols += (cols.empty() ? "" : ", ") + k.name;
      for (const AggItem& a : agg.aggs) cols += (cols.empty() ? "" : ", ") + a.name;
      return QueryError(src, e.range, fmt::format("'{}' is not an output column", e.name),
                        fmt::format("when reads the columns the aggregate prints: {}", cols));
    }
    case ExprKind::kUnary:
    case ExprKind::kBinary:
      for (const ExprPtr& k : e.kids) FAY_RETURN_IF_ERROR(CheckWhen(src, *k, agg));
      return Status::Ok();
    default:
      return QueryError(src, e.range, "'when' reads output columns, literals and operators only",
                        "filter events before the aggregate with where; when filters its rows");
  }
}

// `after NAME` and `until NAME` read a trigger: a remembered value would be taken by the read,
// or live under other keys.
Status CheckAfter(const Query& q, const WhereStage& w) {
  const std::string& name = w.cond->kids[0]->name;
  const char* word = w.until ? "until" : "after";
  for (const auto& st : q.states) {
    const auto& r = std::get<RememberStage>(st->stages.back().stage);
    if (r.name != name || r.trigger) continue;
    return QueryError(q.text, w.cond->range,
                      fmt::format("'{}' is remembered, not a trigger: '{}' waits for a "
                                  "trigger",
                                  name, word),
                      fmt::format("end its pipeline with `trigger {}`, or read the value as "
                                  "{}[KEY]",
                                  name, name));
  }
  return Status::Ok();
}

}  // namespace

Status CheckStages(const Query& q) {
  const std::string& src = q.text;
  std::set<std::string> state_names;
  for (const auto& st : q.states) FAY_RETURN_IF_ERROR(CheckStatePipeline(*st, &state_names));
  const StageNode* main = nullptr;  // the aggregate or select stage
  const StageNode *sample = nullptr, *top = nullptr, *every = nullptr, *for_stage = nullptr,
                  *format = nullptr, *cluster = nullptr, *when = nullptr, *snapshot = nullptr;
  for (const StageNode& node : q.stages) {
    const Stage& s = node.stage;
    const auto* where = std::get_if<WhereStage>(&s);
    const char* word = !where         ? StageWord(s)
                       : where->after ? "after"
                       : where->until ? "until"
                                      : StageWord(s);
    if (where && (where->after || where->until)) FAY_RETURN_IF_ERROR(CheckAfter(q, *where));
    if (std::holds_alternative<WhereStage>(s) || std::holds_alternative<SampleStage>(s)) {
      if (main)
        return QueryError(
            src, node.range,
            fmt::format("'{}' must come before the {} stage", word, StageWord(main->stage)),
            "filter and sample first, e.g. syscall:read | where pid == 42 | "
            "count() by comm");
      if (std::holds_alternative<SampleStage>(s)) {
        if (sample) return QueryError(src, node.range, "Only one sample stage is allowed");
        sample = &node;
      }
    } else if (std::holds_alternative<AggregateStage>(s) ||
               std::holds_alternative<SelectStage>(s) || std::holds_alternative<TablesStage>(s)) {
      if (main)
        return QueryError(src, node.range, "Only one aggregate or select stage is allowed",
                          "compute several aggregates in one stage, e.g. count(), avg(latency) "
                          "by comm");
      main = &node;
    } else if (std::holds_alternative<TopStage>(s)) {
      if (top) return QueryError(src, node.range, "Only one top stage is allowed");
      top = &node;
      if (main && std::holds_alternative<TablesStage>(main->stage))
        return QueryError(src, node.range, "Each table takes its own top",
                          "e.g. (count() by probe | top 10), (count() by comm | top 5)");
      if (!main || !std::holds_alternative<AggregateStage>(main->stage))
        return QueryError(src, node.range, "'top' needs an aggregate stage before it",
                          "e.g. syscall:openat | count() by comm | top 10");
    } else if (std::holds_alternative<FormatStage>(s)) {
      if (format) return QueryError(src, node.range, "Only one format stage is allowed");
      format = &node;
      if (!main || !std::holds_alternative<SelectStage>(main->stage))
        return QueryError(src, node.range, "'format' needs a select stage before it",
                          "format lays out selected rows, e.g. syscall:kill | select pid, "
                          "args.sig | format \"%T %-6d %d\"");
    } else if (std::holds_alternative<ClusterStage>(s) || std::holds_alternative<WhenStage>(s)) {
      const StageNode*& seen = std::holds_alternative<ClusterStage>(s) ? cluster : when;
      if (seen)
        return QueryError(src, node.range, fmt::format("Only one {} stage is allowed", word));
      seen = &node;
      if (!main || !std::holds_alternative<AggregateStage>(main->stage))
        return QueryError(src, node.range,
                          fmt::format("'{}' needs an aggregate stage before it", word),
                          std::holds_alternative<ClusterStage>(s)
                              ? "e.g. syscall:* | count() by host, probe | cluster 3 by host"
                              : "e.g. syscall:read | count() by comm | when count > 1000");
    } else if (const auto* snap = std::get_if<SnapshotStage>(&s)) {
      if (snapshot) return QueryError(src, node.range, "Only one snapshot stage is allowed");
      snapshot = &node;
      const char* hint =
          "e.g. syscall:fsync | trigger synced; syscall:read | count() by comm | snapshot synced";
      if (!main || !std::holds_alternative<AggregateStage>(main->stage))
        return QueryError(src, node.range, "'snapshot' needs an aggregate stage before it", hint);
      bool trigger = false, remembered = false;
      for (const auto& st : q.states) {
        const auto& r = std::get<RememberStage>(st->stages.back().stage);
        if (r.name != snap->name) continue;
        (r.trigger ? trigger : remembered) = true;
      }
      if (remembered)
        return QueryError(src, snap->name_range,
                          fmt::format("'{}' is remembered, not a trigger: 'snapshot' prints when "
                                      "a trigger fires",
                                      snap->name),
                          fmt::format("end its pipeline with `trigger {}`", snap->name));
      if (!trigger)
        return QueryError(src, snap->name_range,
                          fmt::format("No trigger named '{}' before ';'", snap->name), hint);
    } else if (std::holds_alternative<RememberStage>(s)) {
      if (std::get<RememberStage>(s).trigger)
        return QueryError(src, node.range, "'trigger' ends a state pipeline before ';'",
                          "e.g. syscall:fsync | trigger synced; syscall:read | after synced | "
                          "count()");
      return QueryError(src, node.range, "'remember' ends a state pipeline before ';'",
                        "e.g. uprobe:./app:start | remember time as t0; uprobe:./app:stop | "
                        "hist(time - t0[tid])");
    } else if (std::holds_alternative<EveryStage>(s)) {
      if (every) return QueryError(src, node.range, "Only one every stage is allowed");
      every = &node;
      // Each window is read, printed and reset: below a millisecond that is all fay would do,
      // and over a recording it prints a window per nanosecond of it.
      if (std::get<EveryStage>(node.stage).ns < 1000000)
        return QueryError(src, node.range, "'every' windows must be at least 1ms long",
                          "e.g. every 100ms, every 1s");
    } else {
      if (for_stage) return QueryError(src, node.range, "Only one for stage is allowed");
      for_stage = &node;
    }
  }
  if (every && snapshot)
    return QueryError(src, snapshot->range,
                      "'snapshot' prints the whole aggregation so far, and 'every' resets it each "
                      "window: use one of them",
                      "snapshot NAME alone prints at each firing and at the end");
  if (every && (!main || std::holds_alternative<SelectStage>(main->stage)))
    return QueryError(src, every->range, "'every' needs an aggregate stage",
                      "every prints and resets the aggregates each window, e.g. "
                      "syscall:read | count() by comm | every 1s");
  if (!main) return Status::Ok();

  if (const auto* t = std::get_if<TablesStage>(&main->stage)) {
    for (const TableItem& table : t->tables) {
      std::vector<OutName> names = AggregateNames(table.agg);
      for (const OutName& n : names)
        if (n.name == "table")
          return QueryError(src, n.range, "Output name 'table' is reserved",
                            "with several tables every JSON row says its table in 'table'; "
                            "choose another name with 'as'");
      FAY_RETURN_IF_ERROR(CheckNames(src, names));
    }
    return Status::Ok();
  }
  std::vector<OutName> names;
  if (const auto* agg = std::get_if<AggregateStage>(&main->stage)) {
    names = AggregateNames(*agg);
    if (cluster) FAY_RETURN_IF_ERROR(CheckCluster(src, *cluster, *agg, top));
    if (when) FAY_RETURN_IF_ERROR(CheckWhen(src, *std::get<WhenStage>(when->stage).cond, *agg));
  } else {
    for (const KeyItem& k : std::get<SelectStage>(main->stage).items)
      names.push_back({k.name, k.name != k.expr->text, k.expr->range, k.expr->text});
  }
  // With snapshot, JSON rows say whether they are one.
  if (snapshot)
    for (const OutName& n : names)
      if (n.name == "snapshot")
        return QueryError(src, n.range, "Output name 'snapshot' is reserved with a snapshot stage",
                          "each JSON row says in 'snapshot' whether a trigger printed it; "
                          "choose another name with 'as'");
  return CheckNames(src, names);
}

}  // namespace fay
