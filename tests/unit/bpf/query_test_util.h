// Shared helpers for tests that compile whole queries against this machine's probes: a catalog,
// compiling with a readable failure, and printing result sets for assertion messages.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/value.h"
#include "probes/catalog.h"
#include "query/compile.h"
#include "query/plan.h"

namespace fay::bpf::testing {

// One catalog per test binary: resolving syscall formats reads tracefs, which is slow-ish.
inline SystemCatalog& Catalog() {
  static SystemCatalog* catalog = new SystemCatalog();
  return *catalog;
}

// The plan lives on the heap because LiveQuery and Interpreter keep references to it.
inline std::unique_ptr<Plan> CompileOrDie(const std::string& text,
                                          const PlanOptions& options = {}) {
  auto plan = CompileQuery(text, Catalog(), options);
  EXPECT_TRUE(plan.ok()) << "query: " << text << "\n" << plan.status().message();
  if (!plan.ok()) return nullptr;
  return std::make_unique<Plan>(std::move(plan).value());
}

inline std::string ValueText(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
  const auto& st = std::get<Stack>(v);
  std::string out = fmt::format("tgid {} [", st.tgid);
  for (size_t i = 0; i < st.frames.size(); ++i) {
    out += fmt::format("{}{:#x}", i ? " " : "", st.frames[i]);
    if (i < st.names.size() && !st.names[i].empty()) out += " " + st.names[i];
  }
  return out + "]";
}

inline std::string AggText(const AggState& a) {
  switch (a.spec().func) {
    case AggFunc::kCount:
      return fmt::format("count={}", a.Count());
    case AggFunc::kSum:
      return fmt::format("sum={}", a.Scalar());
    case AggFunc::kMin:
      return a.Empty() ? "min=-" : fmt::format("min={}", a.Scalar());
    case AggFunc::kMax:
      return a.Empty() ? "max=-" : fmt::format("max={}", a.Scalar());
    case AggFunc::kAvg:
      return fmt::format("avg={}/{}", a.Scalar(), a.Count());
    case AggFunc::kHist:
      return fmt::format("hist(n={})", a.Count());
    case AggFunc::kLhist:
      return fmt::format("lhist(n={})", a.Count());
    case AggFunc::kQuantile:
      return fmt::format("quantile(n={}, v={})", a.Count(), a.QuantileValue());
    case AggFunc::kDistinct:
      return fmt::format("distinct~{}", a.DistinctEstimate());
  }
  return "?";
}

inline std::string RowsText(const ResultSet& rs) {
  std::string out;
  for (const Row& r : rs.rows) {
    out += "  (";
    for (size_t i = 0; i < r.keys.size(); ++i) out += (i ? ", " : "") + ValueText(r.keys[i]);
    out += ") ->";
    for (const AggState& a : r.aggs) out += " " + AggText(a);
    out += "\n";
  }
  return out;
}

// Rows ordered by key tuple, as the interpreter returns them.
inline void SortRows(ResultSet& rs) {
  std::sort(rs.rows.begin(), rs.rows.end(),
            [](const Row& a, const Row& b) { return a.keys < b.keys; });
}

// The row with exactly these keys, or null.
inline const Row* FindRow(const ResultSet& rs, const std::vector<Value>& keys) {
  for (const Row& r : rs.rows)
    if (r.keys == keys) return &r;
  return nullptr;
}

}  // namespace fay::bpf::testing
