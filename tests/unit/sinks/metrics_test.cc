// Standing queries' metrics: names under Prometheus's rules, counters and histograms that add
// windows up, gauges that take the last one, the series cap, and both exposition formats.
#include "sinks/metrics.h"

#include <gtest/gtest.h>

#include "probes/catalog.h"
#include "query/compile.h"

namespace fay::sinks {
namespace {

TEST(MetricNames, FollowPrometheusRules) {
  EXPECT_EQ(MetricName("fay_calls_count"), "fay_calls_count");
  EXPECT_EQ(MetricName("fay_a-b.c:d"), "fay_a_b_c:d");
  EXPECT_EQ(MetricName("9x"), "_9x");
  EXPECT_EQ(LabelName("args.filename"), "args_filename");
  EXPECT_EQ(LabelName("a:b"), "a_b");
  EXPECT_EQ(LabelName("__x"), "_x");  // __ is Prometheus's own
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

class Registry : public ::testing::Test {
 protected:
  void SetUp() override {
    auto plan = CompileQuery(
        "syscall:read | count() as n, sum(args.count) as bytes, max(args.count) as big, "
        "hist(args.count) as h, quantile(args.count, 0.5) as med by comm | every 1s",
        catalog_, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    plan_ = std::move(plan).value();
  }
  // A row for comm with `values` read() counts.
  Row MakeRow(const std::string& comm, std::initializer_list<int64_t> values) {
    Row r;
    r.keys.push_back(Value{comm});
    for (const AggSlot& a : plan_.aggs) {
      AggState s(SpecOf(*a.item));
      for (int64_t v : values) s.Update(v);
      r.aggs.push_back(s);
    }
    return r;
  }
  SystemCatalog catalog_;
  Plan plan_;
};

TEST_F(Registry, CountersAndHistogramsAddUpGaugesTakeTheLastWindow) {
  MetricsRegistry reg;
  reg.AddQuery("reads", "the query text", plan_);
  ResultSet w1, w2;
  w1.rows.push_back(MakeRow("cat", {1, 2, 3}));
  w2.rows.push_back(MakeRow("cat", {4}));
  reg.Update("reads", w1);
  reg.Update("reads", w2);
  const std::string text = reg.Render(false);
  EXPECT_NE(text.find("# TYPE fay_reads_n_total counter\nfay_reads_n_total{comm=\"cat\"} 4\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fay_reads_bytes_total{comm=\"cat\"} 10\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE fay_reads_big gauge\nfay_reads_big{comm=\"cat\"} 4\n"),
            std::string::npos);
  // Values 1, 2, 3, 4: [1,2) [2,4) [4,8) cumulative, le = hi - 1 exactly.
  EXPECT_NE(text.find("fay_reads_h_bucket{comm=\"cat\",le=\"1\"} 1\n"
                      "fay_reads_h_bucket{comm=\"cat\",le=\"3\"} 3\n"
                      "fay_reads_h_bucket{comm=\"cat\",le=\"7\"} 4\n"
                      "fay_reads_h_bucket{comm=\"cat\",le=\"+Inf\"} 4\n"
                      "fay_reads_h_count{comm=\"cat\"} 4\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("# TYPE fay_reads_med summary\nfay_reads_med{comm=\"cat\",quantile=\"0.5\"} "),
      std::string::npos);
  EXPECT_NE(text.find("fay_standing_windows_total{query=\"reads\"} 2\n"), std::string::npos);
  EXPECT_EQ(text.find("# EOF"), std::string::npos);
  // A window without cat: its gauge goes, its counters stay.
  reg.Update("reads", ResultSet{});
  const std::string later = reg.Render(false);
  EXPECT_EQ(later.find("fay_reads_big{"), std::string::npos);
  EXPECT_NE(later.find("fay_reads_n_total{comm=\"cat\"} 4\n"), std::string::npos);
}

TEST_F(Registry, OpenMetricsNamesCounterFamiliesWithoutTotalAndEndsWithEof) {
  MetricsRegistry reg;
  reg.AddQuery("reads", "q", plan_);
  ResultSet w;
  w.rows.push_back(MakeRow("cat", {5}));
  reg.Update("reads", w);
  const std::string om = reg.Render(true);
  EXPECT_NE(om.find("# TYPE fay_reads_n counter\nfay_reads_n_total{comm=\"cat\"} 1\n"),
            std::string::npos)
      << om;
  EXPECT_EQ(om.substr(om.size() - 6), "# EOF\n");
}

TEST_F(Registry, ASeriesCapDropsNewLabelSetsAndCountsThem) {
  MetricsRegistry reg(2);
  reg.AddQuery("reads", "q", plan_);
  ResultSet w;
  for (const char* c : {"a", "b", "c", "d"}) w.rows.push_back(MakeRow(c, {1}));
  reg.Update("reads", w);
  const std::string text = reg.Render(false);
  EXPECT_NE(text.find("fay_standing_series{query=\"reads\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fay_standing_series_dropped_total{query=\"reads\"} 2\n"), std::string::npos);
  EXPECT_EQ(text.find("comm=\"c\""), std::string::npos);
}

}  // namespace
}  // namespace fay::sinks
