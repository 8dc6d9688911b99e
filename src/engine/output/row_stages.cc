#include "engine/output/row_stages.h"

#include <algorithm>
#include <map>
#include <optional>
#include <variant>

#include "engine/aggregate.h"
#include "engine/output/format.h"

namespace fay {
namespace {

// A column's value as `when` compares it: avg keeps its fraction (it prints two decimals).
using OutValue = std::variant<int64_t, double, std::string>;

// A key as the output prints it: strings (names of probes, comms) as text, numbers as numbers.
OutValue KeyValue(const Plan& plan, size_t k, const Value& v) {
  const auto* i = std::get_if<int64_t>(&v);
  if (i && plan.keys[k].type.kind != TypeKind::kString) return *i;
  return FormatSlotValue(plan, plan.keys[k], v);
}

OutValue AggValue(const AggSlot& slot, const AggState& state) {
  if (slot.item->func == AggFunc::kAvg) return state.Average();
  return state.Scalar();
}

bool IsNumber(const OutValue& v) {
  return !std::holds_alternative<std::string>(v);
}

double AsDouble(const OutValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return 0;
}

int64_t AsInt(const OutValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  return 0;
}

// -1, 0, 1; nullopt when a string meets a number, which no comparison admits.
std::optional<int> Compare(const OutValue& l, const OutValue& r) {
  if (IsNumber(l) != IsNumber(r)) return std::nullopt;
  if (!IsNumber(l)) {
    int c = std::get<std::string>(l).compare(std::get<std::string>(r));
    return (c > 0) - (c < 0);
  }
  if (std::holds_alternative<int64_t>(l) && std::holds_alternative<int64_t>(r)) {
    int64_t a = std::get<int64_t>(l), b = std::get<int64_t>(r);
    return (a > b) - (a < b);
  }
  double a = AsDouble(l), b = AsDouble(r);
  return (a > b) - (a < b);
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
        if (plan.aggs[a].item->name == e.name) return AggValue(plan.aggs[a], row.aggs[a]);
      return int64_t{0};
    case ExprKind::kUnary: {
      OutValue v = Eval(plan, row, *e.kids[0]);
      if (e.op == "-")
        return std::holds_alternative<double>(v) ? OutValue(-AsDouble(v)) : OutValue(-AsInt(v));
      if (e.op == "~") return ~AsInt(v);
      return int64_t{AsDouble(v) == 0};
    }
    case ExprKind::kBinary: {
      if (e.op == "&&")
        return int64_t{AsDouble(Eval(plan, row, *e.kids[0])) != 0 &&
                       AsDouble(Eval(plan, row, *e.kids[1])) != 0};
      if (e.op == "||")
        return int64_t{AsDouble(Eval(plan, row, *e.kids[0])) != 0 ||
                       AsDouble(Eval(plan, row, *e.kids[1])) != 0};
      OutValue l = Eval(plan, row, *e.kids[0]), r = Eval(plan, row, *e.kids[1]);
      std::optional<int> c = Compare(l, r);
      if (e.op == "==") return int64_t{c == 0};
      if (e.op == "!=") return int64_t{c != 0};
      if (e.op == "<") return int64_t{c && *c < 0};
      if (e.op == "<=") return int64_t{c && *c <= 0};
      if (e.op == ">") return int64_t{c && *c > 0};
      if (e.op == ">=") return int64_t{c && *c >= 0};
      if (std::holds_alternative<double>(l) || std::holds_alternative<double>(r)) {
        double a = AsDouble(l), b = AsDouble(r);
        if (e.op == "+") return a + b;
        if (e.op == "-") return a - b;
        if (e.op == "*") return a * b;
        if (e.op == "/") return b != 0 ? a / b : 0.0;
      }
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
    if (AsDouble(Eval(plan, row, *plan.when)) != 0) out.rows.push_back(row);
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
