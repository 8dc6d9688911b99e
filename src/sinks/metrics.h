// Standing queries' values as Prometheus metrics (docs/SINKS.md): each window a query ends is
// folded into its metrics, and a scrape renders them in Prometheus's text format or in
// OpenMetrics.
//
//   count, sum        a counter, the total since the query started    fay_NAME_ALIAS_total
//   hist, lhist       a histogram, cumulative, exact `le` bounds       fay_NAME_ALIAS_bucket
//   quantile          a summary over everything since the start        fay_NAME_ALIAS{quantile=}
//   min, max, avg,    a gauge: the last window's value                 fay_NAME_ALIAS
//   distinct
//
// The query's keys are labels, named as in JSON output, under Prometheus's rules. A query keeps
// at most max_series label sets; past that, new ones are dropped and counted in
// fay_standing_series_dropped_total{query="NAME"}.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/value.h"
#include "query/plan.h"

namespace fay::sinks {

// Prometheus's rules: a metric name [a-zA-Z_:][a-zA-Z0-9_:]*, a label name
// [a-zA-Z_][a-zA-Z0-9_]* not starting with "__". Every other character becomes '_'; a leading
// digit gets a '_' before it.
std::string MetricName(std::string_view s);
std::string LabelName(std::string_view s);
// A label value or HELP text escaped: backslash, double quote (label values) and newline.
std::string EscapeLabelValue(std::string_view s);

class MetricsRegistry {
 public:
  explicit MetricsRegistry(uint32_t max_series = 10000) : max_series_(max_series) {}

  // A standing query, by its name in the file. The plan must outlive the registry.
  void AddQuery(const std::string& name, const std::string& text, const Plan& plan);
  // One window of the query: counters, histograms and summaries add it; gauges take it.
  void Update(const std::string& name, const ResultSet& window);
  // A window the query could not read: counted, with its message as a label-free info.
  void NoteError(const std::string& name, const std::string& error);

  // The exposition: Prometheus text format 0.0.4, or OpenMetrics 1.0.0 (which ends in # EOF).
  std::string Render(bool openmetrics) const;

 private:
  struct Query {
    std::string name, text;
    const Plan* plan = nullptr;
    std::vector<std::string> labels;   // sanitized key names
    std::vector<std::string> metrics;  // fay_NAME_ALIAS per aggregate
    std::map<std::vector<std::string>, std::vector<AggState>> series;  // by label values
    uint64_t windows = 0, errors = 0, dropped_series = 0;
    std::string last_error;
  };
  void RenderQuery(const Query& q, bool openmetrics, std::string* out) const;

  uint32_t max_series_;
  mutable std::mutex mu_;
  std::map<std::string, Query> queries_;
};

}  // namespace fay::sinks
