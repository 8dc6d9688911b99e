#include "sinks/metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/output/format.h"
#include "engine/output/hist_bars.h"

namespace fay::sinks {
namespace {

enum class Kind { kCounter, kGauge, kHistogram, kSummary };

Kind KindOf(AggFunc f) {
  switch (f) {
    case AggFunc::kCount:
    case AggFunc::kSum:
      return Kind::kCounter;
    case AggFunc::kHist:
    case AggFunc::kLhist:
      return Kind::kHistogram;
    case AggFunc::kQuantile:
      return Kind::kSummary;
    default:
      return Kind::kGauge;
  }
}

std::string Sanitize(std::string_view s, bool colon) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || (colon && c == ':');
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  return out;
}

// {a="x",b="y"} with `extra` (le or quantile) last; "" with no label at all.
std::string Labels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                   const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i)
    out +=
        fmt::format("{}{}=\"{}\"", out.empty() ? "" : ",", names[i], EscapeLabelValue(values[i]));
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? "" : "{" + out + "}";
}

// HELP text escaped: backslash and newline in both formats, and double quotes in OpenMetrics
// (and in every label value).
std::string HelpText(std::string_view s, bool om) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && om)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string MetricName(std::string_view s) {
  return Sanitize(s, true);
}

std::string LabelName(std::string_view s) {
  std::string out = Sanitize(s, false);
  while (out.size() >= 2 && out[0] == '_' && out[1] == '_') out.erase(0, 1);  // __ is reserved
  return out;
}

std::string EscapeLabelValue(std::string_view s) {
  return HelpText(s, /*om=*/true);  // label values escape what OpenMetrics' HELP does
}

void MetricsRegistry::AddQuery(const std::string& name, const std::string& text, const Plan& plan) {
  std::lock_guard lk(mu_);
  Query& q = queries_[name];
  q.name = name;
  q.text = text;
  q.plan = &plan;
  for (const Slot& k : plan.keys) {
    std::string l = LabelName(k.name);
    // Two keys that sanitize alike ("a.b" and "a_b") stay apart.
    while (std::find(q.labels.begin(), q.labels.end(), l) != q.labels.end()) l += "_";
    q.labels.push_back(l);
  }
  for (const AggSlot& a : plan.aggs)
    q.metrics.push_back(MetricName("fay_" + name + "_" + a.item->name));
}

void MetricsRegistry::Update(const std::string& name, const ResultSet& window) {
  std::lock_guard lk(mu_);
  auto it = queries_.find(name);
  if (it == queries_.end()) return;
  Query& q = it->second;
  const Plan& plan = *q.plan;
  ++q.windows;
  // Gauges say the last window only: what it did not have is empty now.
  for (auto& [labels, states] : q.series)
    for (size_t a = 0; a < plan.aggs.size(); ++a)
      if (KindOf(plan.aggs[a].item->func) == Kind::kGauge)
        states[a] = AggState(SpecOf(*plan.aggs[a].item));
  for (const Row& row : window.rows) {
    std::vector<std::string> labels;
    for (size_t k = 0; k < plan.keys.size() && k < row.keys.size(); ++k)
      labels.push_back(FormatSlotValue(plan, plan.keys[k], row.keys[k]));
    auto s = q.series.find(labels);
    if (s == q.series.end()) {
      if (q.series.size() >= max_series_) {
        ++q.dropped_series;
        continue;
      }
      std::vector<AggState> fresh;
      for (const AggSlot& a : plan.aggs) fresh.emplace_back(SpecOf(*a.item));
      s = q.series.emplace(std::move(labels), std::move(fresh)).first;
    }
    for (size_t a = 0; a < plan.aggs.size() && a < row.aggs.size(); ++a) {
      if (KindOf(plan.aggs[a].item->func) == Kind::kGauge)
        s->second[a] = row.aggs[a];
      else
        s->second[a].Merge(row.aggs[a]);
    }
  }
}

void MetricsRegistry::NoteError(const std::string& name, const std::string& error) {
  std::lock_guard lk(mu_);
  auto it = queries_.find(name);
  if (it == queries_.end()) return;
  ++it->second.errors;
  it->second.last_error = error;
}

void MetricsRegistry::RenderQuery(const Query& q, bool om, std::string* out) const {
  const Plan& plan = *q.plan;
  for (size_t a = 0; a < plan.aggs.size(); ++a) {
    const AggItem& item = *plan.aggs[a].item;
    const std::string& m = q.metrics[a];
    const Kind kind = KindOf(item.func);
    static constexpr const char* kType[] = {"counter", "gauge", "histogram", "summary"};
    // Prometheus's text format names a counter by its sample (NAME_total); OpenMetrics by its
    // family (NAME), whose sample is NAME_total.
    const std::string family = kind == Kind::kCounter && !om ? m + "_total" : m;
    *out += fmt::format("# HELP {} {} of standing query {}: {}\n", family, item.name, q.name,
                        HelpText(q.text, om));
    *out += fmt::format("# TYPE {} {}\n", family, kType[static_cast<int>(kind)]);
    for (const auto& [values, states] : q.series) {
      const AggState& st = states[a];
      switch (kind) {
        case Kind::kCounter:
          *out += fmt::format("{}_total{} {}\n", m, Labels(q.labels, values),
                              FormatAggScalar(item, st));
          break;
        case Kind::kGauge:
          if (st.Empty()) break;  // min/max/avg with no value this window
          *out += fmt::format("{}{} {}\n", m, Labels(q.labels, values),
                              item.func == AggFunc::kAvg ? fmt::format("{}", st.Average())
                                                         : FormatAggScalar(item, st));
          break;
        case Kind::kHistogram: {
          // [lo, hi) of integers is le = hi - 1, exactly; the open top bucket is +Inf's.
          uint64_t running = 0;
          for (const HistBucket& b : HistBuckets(st)) {
            if (!b.has_hi) continue;
            running += b.count;
            *out +=
                fmt::format("{}_bucket{} {}\n", m,
                            Labels(q.labels, values, fmt::format("le=\"{}\"", b.hi - 1)), running);
          }
          *out += fmt::format("{}_bucket{} {}\n", m, Labels(q.labels, values, "le=\"+Inf\""),
                              st.Count());
          *out += fmt::format("{}_count{} {}\n", m, Labels(q.labels, values), st.Count());
          break;
        }
        case Kind::kSummary:
          *out += fmt::format("{}{} {}\n", m,
                              Labels(q.labels, values, fmt::format("quantile=\"{}\"", item.q)),
                              st.Count() ? FormatAggScalar(item, st) : "NaN");
          *out += fmt::format("{}_count{} {}\n", m, Labels(q.labels, values), st.Count());
          break;
      }
    }
  }
}

std::string MetricsRegistry::Render(bool om) const {
  std::lock_guard lk(mu_);
  std::string out;
  for (const auto& [name, q] : queries_) RenderQuery(q, om, &out);
  // The queries' own health, one series each.
  auto own = [&](const char* metric, const char* type, const char* help, auto value) {
    const std::string family = std::string(type) == "counter" && !om
                                   ? std::string(metric) + "_total"
                                   : std::string(metric);
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", family, help, family, type);
    for (const auto& [name, q] : queries_)
      out += fmt::format("{}{}{{query=\"{}\"}} {}\n", metric,
                         std::string(type) == "counter" ? "_total" : "", EscapeLabelValue(name),
                         value(q));
  };
  own("fay_standing_windows", "counter", "windows the standing query has ended",
      [](const Query& q) { return q.windows; });
  own("fay_standing_series", "gauge", "label sets the standing query holds",
      [](const Query& q) { return q.series.size(); });
  own("fay_standing_series_dropped", "counter",
      "label sets past the cap (--metrics-max-series), not kept",
      [](const Query& q) { return q.dropped_series; });
  own("fay_standing_errors", "counter", "windows the standing query could not read",
      [](const Query& q) { return q.errors; });
  if (om) out += "# EOF\n";
  return out;
}

}  // namespace fay::sinks
