#include "engine/interpreter.h"

#include <gtest/gtest.h>

#include "plan_builder.h"
#include "query/agg_layout.h"

namespace fay {
namespace {

using testing::PlanBuilder;

std::string S(const Value& v) {
  return std::get<std::string>(v);
}

TEST(Interpreter, CountByCommWithPredicate) {
  PlanBuilder b;
  b.Where(b.Bin(">", b.Field("pid"), b.Int(100)));
  b.Key(b.Field("comm"));
  b.Agg(AggFunc::kCount, nullptr, "count");
  b.Agg(AggFunc::kSum, b.Field("args.count"), "bytes");
  Interpreter in(b.plan);
  in.Process(b.Ev(0, 200, "dd", 0, 4096));
  in.Process(b.Ev(0, 200, "dd", 0, 4096));
  in.Process(b.Ev(1, 300, "bash", 0, 10));
  in.Process(b.Ev(1, 50, "bash", 0, 10));  // filtered
  ResultSet rs = in.TakeWindow(777);
  EXPECT_EQ(rs.window_end_ns, 777u);
  ASSERT_EQ(rs.rows.size(), 2u);
  EXPECT_EQ(S(rs.rows[0].keys[0]), "bash");
  EXPECT_EQ(rs.rows[0].aggs[0].Scalar(), 1);
  EXPECT_EQ(rs.rows[0].aggs[1].Scalar(), 10);
  EXPECT_EQ(S(rs.rows[1].keys[0]), "dd");
  EXPECT_EQ(rs.rows[1].aggs[0].Scalar(), 2);
  EXPECT_EQ(rs.rows[1].aggs[1].Scalar(), 8192);
  EXPECT_EQ(in.stats().events_seen, 4u);
  EXPECT_EQ(in.stats().events_matched, 3u);
  EXPECT_TRUE(in.first_error().ok());

  // The window was reset.
  in.Process(b.Ev(0, 200, "dd", 0, 1));
  ResultSet next = in.TakeWindow(778);
  ASSERT_EQ(next.rows.size(), 1u);
  EXPECT_EQ(next.rows[0].aggs[0].Scalar(), 1);
  EXPECT_EQ(next.rows[0].aggs[1].Scalar(), 1);
}

TEST(Interpreter, NoKeysAlwaysGivesOneRow) {
  PlanBuilder b;
  b.Where(b.Bin("==", b.Field("comm"), b.Str("nomatch")));
  b.Agg(AggFunc::kCount, nullptr, "n");
  Interpreter in(b.plan);
  in.Process(b.Ev(0, 1, "bash"));
  ResultSet rs = in.TakeWindow(1);
  ASSERT_EQ(rs.rows.size(), 1u);
  EXPECT_TRUE(rs.rows[0].keys.empty());
  EXPECT_EQ(rs.rows[0].aggs[0].Scalar(), 0);
}

TEST(Interpreter, MultipleKeysAndHistogram) {
  PlanBuilder b;
  b.Key(b.Field("probe"));
  b.Key(b.Field("pid"));
  b.Agg(AggFunc::kHist, b.Field("ret"), "hist");
  Interpreter in(b.plan);
  for (int64_t r : {0, 1, 5, 6, 7}) in.Process(b.Ev(0, 9, "a", 0, 0, "", r));
  in.Process(b.Ev(1, 9, "a", 0, 0, "", -1));
  ResultSet rs = in.TakeWindow(0);
  ASSERT_EQ(rs.rows.size(), 2u);
  EXPECT_EQ(S(rs.rows[0].keys[0]), "syscall:read");
  EXPECT_EQ(std::get<int64_t>(rs.rows[0].keys[1]), 9);
  AggState want(SpecOf(*b.plan.aggs[0].item));
  for (int64_t r : {0, 1, 5, 6, 7}) want.Update(r);
  EXPECT_EQ(rs.rows[0].aggs[0], want);
  EXPECT_EQ(S(rs.rows[1].keys[0]), "syscall:write");
  EXPECT_EQ(rs.rows[1].aggs[0].Count(), 1u);
}

TEST(Interpreter, AggregatesOverStrings) {
  PlanBuilder b;
  b.Agg(AggFunc::kDistinct, b.Field("comm"), "comms");
  b.Agg(AggFunc::kDistinct, b.StrCall(b.Field("args.filename"), 32), "files");
  Interpreter in(b.plan);
  in.Process(b.Ev(0, 1, "bash", 0, 0, "/a"));
  in.Process(b.Ev(0, 1, "dd", 0, 0, "/b"));
  in.Process(b.Ev(0, 1, "bash", 0, 0, "/a"));
  ResultSet rs = in.TakeWindow(0);
  ASSERT_EQ(rs.rows.size(), 1u);
  EXPECT_EQ(rs.rows[0].aggs[0].DistinctEstimate(), 2u);
  AggState want(SpecOf(*b.plan.aggs[1].item));
  want.UpdateString("/a", 32);
  want.UpdateString("/b", 32);
  EXPECT_EQ(rs.rows[0].aggs[1], want);
}

TEST(Interpreter, DistinctOfProbeHashesItsId) {
  PlanBuilder b;
  b.Agg(AggFunc::kDistinct, b.Field("probe"), "probes");
  Interpreter in(b.plan);
  in.Process(b.Ev(1, 1, "a"));
  ResultSet rs = in.TakeWindow(0);
  AggState want(SpecOf(*b.plan.aggs[0].item));
  want.Update(1);
  EXPECT_EQ(rs.rows[0].aggs[0], want);
}

TEST(Interpreter, MinMaxAvgQuantile) {
  PlanBuilder b;
  b.Agg(AggFunc::kMin, b.Field("ret"), "min");
  b.Agg(AggFunc::kMax, b.Field("ret"), "max");
  b.Agg(AggFunc::kAvg, b.Field("ret"), "avg");
  AggItem* q = b.Agg(AggFunc::kQuantile, b.Field("ret"), "p50");
  q->q = 0.5;
  Interpreter in(b.plan);
  for (int64_t r : {4, -2, 9, 1}) in.Process(b.Ev(0, 1, "a", 0, 0, "", r));
  Row row = in.TakeWindow(0).rows.at(0);
  EXPECT_EQ(row.aggs[0].Scalar(), -2);
  EXPECT_EQ(row.aggs[1].Scalar(), 9);
  EXPECT_DOUBLE_EQ(row.aggs[2].Average(), 3.0);
  EXPECT_EQ(row.aggs[3].QuantileValue(), 1);  // sorted: -2(->0) 1 4 9; rank 2
}

TEST(Interpreter, SampleKeepsAboutTheFraction) {
  PlanBuilder b;
  b.plan.sample_num = 1;
  b.plan.sample_den = 4;
  b.Agg(AggFunc::kCount, nullptr, "count");
  Interpreter in(b.plan);
  Event e = b.Ev(0, 1, "a");
  for (int i = 0; i < 100000; ++i) in.Process(e);
  EXPECT_EQ(in.stats().events_seen, 100000u);
  // Binomial(100000, 1/4): sd ~ 137, allow 5 sd.
  EXPECT_NEAR(static_cast<double>(in.stats().events_matched), 25000, 700);
  EXPECT_EQ(in.TakeWindow(0).rows[0].aggs[0].Scalar(),
            static_cast<int64_t>(in.stats().events_matched));
  // A fixed seed makes runs repeatable.
  Interpreter again(b.plan);
  for (int i = 0; i < 100000; ++i) again.Process(e);
  EXPECT_EQ(again.stats().events_matched, in.stats().events_matched);
}

TEST(Interpreter, MapFullLikeTheProbe) {
  PlanBuilder b;
  b.plan.max_keys = 2;
  b.Key(b.Field("pid"));
  b.Agg(AggFunc::kCount, nullptr, "count");
  Interpreter in(b.plan);
  for (int64_t pid : {1, 2, 3, 1, 4}) in.Process(b.Ev(0, pid, "a"));
  EXPECT_EQ(in.stats().map_full, 2u);
  ResultSet rs = in.TakeWindow(0);
  ASSERT_EQ(rs.rows.size(), 2u);
  EXPECT_EQ(rs.rows[0].aggs[0].Scalar(), 2);
  EXPECT_EQ(rs.rows[1].aggs[0].Scalar(), 1);
}

TEST(Interpreter, SelectReturnsColumns) {
  PlanBuilder b;
  b.plan.mode = PlanMode::kSelect;
  b.Where(b.Bin("<", b.Field("ret"), b.Int(0)));
  b.Key(b.Field("pid"));
  b.Key(b.Field("comm"));
  b.Key(b.StrCall(b.Field("args.filename"), 64), "path");
  Interpreter in(b.plan);
  EXPECT_FALSE(in.Select(b.Ev(0, 5, "cat", 0, 0, "/ok", 3)).has_value());
  auto row = in.Select(b.Ev(0, 5, "cat", 0, 0, "/missing", -2));
  ASSERT_TRUE(row.has_value());
  ASSERT_EQ(row->size(), 3u);
  EXPECT_EQ(std::get<int64_t>((*row)[0]), 5);
  EXPECT_EQ(S((*row)[1]), "cat");
  EXPECT_EQ(S((*row)[2]), "/missing");
  EXPECT_EQ(in.stats().events_seen, 2u);
  EXPECT_EQ(in.stats().events_matched, 1u);
}

TEST(Interpreter, BadEventsAreDroppedWithAnError) {
  PlanBuilder b;
  b.Agg(AggFunc::kCount, nullptr, "count");
  Interpreter in(b.plan);
  Event e = b.Ev(0, 1, "a");
  e.probe_index = 7;
  in.Process(e);
  EXPECT_FALSE(in.first_error().ok());
  EXPECT_EQ(in.stats().events_seen, 1u);
  EXPECT_EQ(in.stats().events_matched, 0u);
  EXPECT_EQ(in.TakeWindow(0).rows[0].aggs[0].Scalar(), 0);
}

}  // namespace
}  // namespace fay
