#include "engine/output/row_stages.h"

#include <algorithm>
#include <map>
#include <variant>

#include "engine/aggregate.h"
#include "engine/output/format.h"

namespace fay {
namespace {

using OutValue = std::variant<int64_t, std::string>;

// A key as the output prints it: strings (names of probes, comms) as text, numbers as numbers.
OutValue KeyValue(const Plan& plan, size_t k, const Value& v) {
  if (plan.keys[k].type.kind == TypeKind::kString) return FormatSlotValue(plan, plan.keys[k], v);
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return FormatSlotValue(plan, plan.keys[k], v);
}

int64_t AsInt(const OutValue& v) {
  const auto* i = std::get_if<int64_t>(&v);
  return i ? *i : 0;
}

// The checker (query/passes/stage_check.cc) let through only literals, output columns and
// operators, so every name here is a column.
OutValue Eval(const Plan& plan, const Row& row, const Expr& e) {
  switch (e.kind) {
    case ExprKind::kInt:
      return e.int_value;
    case ExprKind::kString:
      return e.str_value;
    case ExprKind::kField:
      for (size_t k = 0; k < plan.keys.size() && k < row.keys.size(); ++k)
        if (plan.keys[k].name == e.name) return KeyValue(plan, k, row.keys[k]);
      for (size_t a = 0; a < plan.aggs.size() && a < row.aggs.size(); ++a)
        if (plan.aggs[a].item->name == e.name) return row.aggs[a].Scalar();
      return int64_t{0};
    case ExprKind::kUnary: {
      int64_t v = AsInt(Eval(plan, row, *e.kids[0]));
      if (e.op == "-") return -v;
      if (e.op == "~") return ~v;
      return int64_t{v == 0};
    }
    case ExprKind::kBinary: {
      if (e.op == "&&")
        return int64_t{AsInt(Eval(plan, row, *e.kids[0])) != 0 &&
                       AsInt(Eval(plan, row, *e.kids[1])) != 0};
      if (e.op == "||")
        return int64_t{AsInt(Eval(plan, row, *e.kids[0])) != 0 ||
                       AsInt(Eval(plan, row, *e.kids[1])) != 0};
      OutValue l = Eval(plan, row, *e.kids[0]), r = Eval(plan, row, *e.kids[1]);
      if (e.op == "==") return int64_t{l == r};
      if (e.op == "!=") return int64_t{l != r};
      if (e.op == "<") return int64_t{l < r};
      if (e.op == "<=") return int64_t{l <= r};
      if (e.op == ">") return int64_t{l > r};
      if (e.op == ">=") return int64_t{l >= r};
      int64_t a = AsInt(l), b = AsInt(r);
      if (e.op == "+") return a + b;
      if (e.op == "-") return a - b;
      if (e.op == "*") return a * b;
      if (e.op == "/") return b ? a / b : int64_t{0};
      if (e.op == "%") return b ? a % b : int64_t{0};
      if (e.op == "&") return a & b;
      if (e.op == "|") return a | b;
      if (e.op == "^") return a ^ b;
      if (e.op == "<<") return b >= 0 && b < 64 ? a << b : int64_t{0};
      if (e.op == ">>") return b >= 0 && b < 64 ? a >> b : int64_t{0};
      return int64_t{0};
    }
    default:
      return int64_t{0};
  }
}

}  // namespace

ResultSet ApplyWhen(const Plan& plan, const ResultSet& rs) {
  if (!plan.when) return rs;
  ResultSet out;
  out.window_end_ns = rs.window_end_ns;
  out.coverage = rs.coverage;
  for (const Row& row : rs.rows)
    if (AsInt(Eval(plan, row, *plan.when)) != 0) out.rows.push_back(row);
  return out;
}

Expected<ClusterResult> ClusterWindow(const Plan& plan, const ResultSet& rs) {
  const size_t ck = static_cast<size_t>(plan.cluster_key);
  std::map<std::string, ClusterInput> entities;
  for (const Row& row : rs.rows) {
    if (row.aggs.empty() || ck >= row.keys.size()) continue;
    std::string name = FormatSlotValue(plan, plan.keys[ck], row.keys[ck]);
    std::string feature;
    for (size_t k = 0; k < row.keys.size() && k < plan.keys.size(); ++k) {
      if (k == ck) continue;
      if (!feature.empty()) feature += ' ';
      feature += FormatSlotValue(plan, plan.keys[k], row.keys[k]);
    }
    ClusterInput& in = entities[name];
    in.name = name;
    // A share needs a non-negative weight; a negative sum counts as none.
    in.features[feature] += static_cast<double>(std::max<int64_t>(0, row.aggs[0].Scalar()));
  }
  if (entities.empty()) return Error(Code::kNotFound, "cluster: the window has no rows to group");
  std::vector<ClusterInput> in;
  for (auto& [name, e] : entities) in.push_back(std::move(e));
  return KMeans(in, static_cast<size_t>(plan.cluster_k));
}

}  // namespace fay
