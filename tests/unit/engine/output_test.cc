#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "engine/output/hist_bars.h"
#include "engine/output/sink.h"
#include "plan_builder.h"

namespace fay {
namespace {

using testing::PlanBuilder;

// Collects what a sink writes to its FILE*.
class Capture {
 public:
  Capture() : f_(open_memstream(&buf_, &len_)) {}
  ~Capture() {
    if (f_) fclose(f_);
    free(buf_);
  }
  FILE* file() { return f_; }
  std::string Text() {
    fflush(f_);
    return std::string(buf_, len_);
  }

 private:
  char* buf_ = nullptr;
  size_t len_ = 0;
  FILE* f_;
};

Row MakeRow(const Plan& plan, std::vector<Value> keys, const std::vector<std::vector<int64_t>>& v) {
  Row r;
  r.keys = std::move(keys);
  for (size_t i = 0; i < plan.aggs.size(); ++i) {
    AggState s(SpecOf(*plan.aggs[i].item));
    for (int64_t x : v[i]) s.Update(x);
    r.aggs.push_back(std::move(s));
  }
  return r;
}

std::vector<int64_t> Repeat(int64_t v, int n) {
  return std::vector<int64_t>(n, v);
}

class OutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};

TEST_F(OutputTest, TextTableSortedByFirstAggregate) {
  PlanBuilder b;
  b.Key(b.Field("comm"));
  b.Agg(AggFunc::kCount, nullptr, "count");
  b.Agg(AggFunc::kSum, b.Field("ret"), "sum");
  ResultSet rs;
  rs.rows.push_back(MakeRow(b.plan, {std::string("cat")}, {Repeat(0, 5), {-20}}));
  rs.rows.push_back(MakeRow(b.plan, {std::string("dd")}, {Repeat(0, 150), {1 << 20}}));
  rs.rows.push_back(MakeRow(b.plan, {std::string("bash")}, {Repeat(0, 5), {3}}));
  Capture out;
  MakeTextSink(out.file())->Window(b.plan, rs);
  EXPECT_EQ(out.Text(),
            "comm  count      sum\n"
            "dd      150  1048576\n"
            "bash      5        3\n"
            "cat       5      -20\n");

  b.plan.top_n = 1;
  Capture top;
  MakeTextSink(top.file())->Window(b.plan, rs);
  EXPECT_EQ(top.Text(),
            "comm  count      sum\n"
            "dd      150  1048576\n");
}

TEST_F(OutputTest, TextTableUnsignedProbeAndWindowHeader) {
  PlanBuilder b;
  b.plan.every_ns = 1000000000;
  b.Key(b.Field("probe"));
  b.Key(b.Field("uid"));
  b.Agg(AggFunc::kMax, b.Field("args.count"), "max");
  b.Agg(AggFunc::kAvg, b.Field("ret"), "avg");
  ResultSet rs;
  rs.window_end_ns = 3723ull * 1000000000 + 5;  // 01:02:03 UTC
  // The kernel reader hands the probe key over as its id.
  rs.rows.push_back(MakeRow(b.plan, {int64_t{1}, int64_t{-1}}, {{-1}, {1, 2}}));
  rs.rows.push_back(MakeRow(b.plan, {std::string("syscall:read"), int64_t{0}}, {{7}, {}}));
  Capture out;
  MakeTextSink(out.file())->Window(b.plan, rs);
  EXPECT_EQ(out.Text(),
            "01:02:03\n"
            "probe                           uid                   max   avg\n"
            "syscall:write  18446744073709551615  18446744073709551615  1.50\n"
            "syscall:read                      0                     7     -\n");
}

TEST_F(OutputTest, HistogramBars) {
  PlanBuilder b;
  b.Key(b.Field("comm"));
  b.Agg(AggFunc::kHist, b.Field("ret"), "hist");
  std::vector<int64_t> v = Repeat(1, 12);
  for (int i = 0; i < 150; ++i) v.push_back(2 + i % 2);
  for (int i = 0; i < 3; ++i) v.push_back(4096);
  ResultSet rs;
  rs.rows.push_back(MakeRow(b.plan, {std::string("dd")}, {v}));
  rs.rows.push_back(MakeRow(b.plan, {std::string("sh")}, {{-5, 0}}));
  Capture out;
  MakeTextSink(out.file())->Window(b.plan, rs);
  EXPECT_EQ(out.Text(),
            "comm = dd\n"
            "[1]                    12 |@@@@                                                |\n"
            "[2, 4)                150 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "[4, 8)                  0 |                                                    |\n"
            "[8, 16)                 0 |                                                    |\n"
            "[16, 32)                0 |                                                    |\n"
            "[32, 64)                0 |                                                    |\n"
            "[64, 128)               0 |                                                    |\n"
            "[128, 256)              0 |                                                    |\n"
            "[256, 512)              0 |                                                    |\n"
            "[512, 1K)               0 |                                                    |\n"
            "[1K, 2K)                0 |                                                    |\n"
            "[2K, 4K)                0 |                                                    |\n"
            "[4K, 8K)                3 |@                                                   |\n"
            "\n"
            "comm = sh\n"
            "(..., 0)                1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "[0]                     1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "\n");
}

TEST_F(OutputTest, LinearHistogramWithCountAndStackKey) {
  PlanBuilder b;
  Expr* stack = b.Field("pid");
  b.plan.keys.push_back({stack, "ustack", Type::Stack(), 0, 8});
  b.Agg(AggFunc::kCount, nullptr, "count");
  AggItem* lh = b.Agg(AggFunc::kLhist, b.Field("ret"), "lhist");
  lh->lo = 0;
  lh->hi = 100;
  lh->step = 10;
  ResultSet rs;
  rs.rows.push_back(
      MakeRow(b.plan, {Stack{{0x401000, 0x7f0000001234}, {}, 42}}, {{0, 0, 0}, {-1, 15, 250}}));
  Capture out;
  MakeTextSink(out.file())->Window(b.plan, rs);
  EXPECT_EQ(out.Text(),
            "ustack:\n"
            "    0x0000000000401000\n"
            "    0x00007f0000001234\n"
            "count = 3\n"
            "lhist:\n"
            "(..., 0)                1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "[0, 10)                 0 |                                                    |\n"
            "[10, 20)                1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "[20, 30)                0 |                                                    |\n"
            "[30, 40)                0 |                                                    |\n"
            "[40, 50)                0 |                                                    |\n"
            "[50, 60)                0 |                                                    |\n"
            "[60, 70)                0 |                                                    |\n"
            "[70, 80)                0 |                                                    |\n"
            "[80, 90)                0 |                                                    |\n"
            "[90, 100)               0 |                                                    |\n"
            "[100, ...)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "\n");

  // Named frames print by name; a frame without a name keeps its address.
  std::get<Stack>(rs.rows[0].keys[0]).names = {"main+0x10", ""};
  Capture sym;
  MakeTextSink(sym.file())->Window(b.plan, rs);
  EXPECT_EQ(sym.Text().substr(0, 55),
            "ustack:\n"
            "    main+0x10\n"
            "    0x00007f0000001234\n"
            "count = 3\n");
}

TEST_F(OutputTest, StackKeyBlocksWithScalarKeysInRowOrder) {
  PlanBuilder b;
  b.Key(b.Field("comm"));
  b.plan.keys.push_back({b.Field("pid"), "ustack", Type::Stack(), 0, 8});
  b.Agg(AggFunc::kCount, nullptr, "count");
  ResultSet rs;
  rs.rows.push_back(MakeRow(
      b.plan,
      {std::string("python3"), Stack{{0x7f00000010a0, 0x55000000beef}, {"", "main+0x3f"}, 7}},
      {{0, 0}}));
  rs.rows.push_back(MakeRow(
      b.plan,
      {std::string("func_calls"), Stack{{0x401136, 0x4011f0, 0x401a00},
                                        {"fay_target+0x6", "main+0x40", "__libc_start_main+0x1f0"},
                                        9}},
      {{0, 0, 0, 0, 0}}));
  Capture out;
  MakeTextSink(out.file())->Window(b.plan, rs);
  EXPECT_EQ(out.Text(),
            "comm = func_calls\n"
            "ustack:\n"
            "    fay_target+0x6\n"
            "    main+0x40\n"
            "    __libc_start_main+0x1f0\n"
            "count = 5\n"
            "\n"
            "comm = python3\n"
            "ustack:\n"
            "    0x00007f00000010a0\n"
            "    main+0x3f\n"
            "count = 2\n"
            "\n");
}

TEST_F(OutputTest, StacksCompareByFramesThenProcess) {
  Stack a{{1, 2}, {"x", "y"}, 5};
  Stack b{{1, 2}, {}, 5};
  Stack c{{1, 2}, {"x", "y"}, 6};
  Stack d{{1, 3}, {}, 1};
  EXPECT_TRUE(a == b);  // names follow from frames and process
  EXPECT_FALSE(a == c);
  EXPECT_TRUE(a < c);
  EXPECT_FALSE(c < a);
  EXPECT_TRUE(c < d);
  EXPECT_FALSE(a < b);
  EXPECT_TRUE(Value(a) == Value(b));
  EXPECT_TRUE(Value(int64_t{1}) < Value(a));
}

TEST_F(OutputTest, Pow2Labels) {
  EXPECT_EQ(Pow2Label(0), "1");
  EXPECT_EQ(Pow2Label(9), "512");
  EXPECT_EQ(Pow2Label(10), "1K");
  EXPECT_EQ(Pow2Label(21), "2M");
  EXPECT_EQ(Pow2Label(63), "8E");
}

TEST_F(OutputTest, TextSelectRows) {
  PlanBuilder b;
  b.plan.mode = PlanMode::kSelect;
  b.Key(b.Field("pid"));
  b.Key(b.Field("comm"));
  b.Key(b.Field("ret"));
  Capture out;
  auto sink = MakeTextSink(out.file());
  sink->SelectRow(b.plan, {int64_t{42}, std::string("cat"), int64_t{-2}}, 0);
  sink->SelectRow(b.plan, {int64_t{7}, std::string("sh"), int64_t{12}}, 0);
  EXPECT_EQ(out.Text(),
            "    pid  comm                      ret\n"
            "     42  cat                        -2\n"
            "      7  sh                         12\n");
}

TEST_F(OutputTest, JsonLines) {
  PlanBuilder b;
  b.Key(b.Field("comm"));
  b.Key(b.Field("probe"));
  b.Agg(AggFunc::kCount, nullptr, "n");
  b.Agg(AggFunc::kAvg, b.Field("ret"), "avg");
  b.Agg(AggFunc::kHist, b.Field("ret"), "hist");
  b.Agg(AggFunc::kMin, b.Field("ret"), "min");
  AggItem* q = b.Agg(AggFunc::kQuantile, b.Field("ret"), "p99");
  q->q = 0.99;
  b.Agg(AggFunc::kDistinct, b.Field("ret"), "distinct");
  ResultSet rs;
  rs.window_end_ns = 1700000000123456789ull;
  std::vector<int64_t> v = {1, 2, 3, 1000};
  rs.rows.push_back(MakeRow(b.plan, {std::string("a\xff\"b"), int64_t{0}}, {v, v, v, v, v, v}));
  rs.rows.push_back(MakeRow(b.plan, {std::string("zz"), int64_t{1}}, {{}, {}, {}, {}, {}, {}}));
  Capture out;
  MakeJsonSink(out.file())->Window(b.plan, rs);
  EXPECT_EQ(out.Text(),
            "{\"comm\":\"a\xef\xbf\xbd\\\"b\",\"probe\":\"syscall:read\",\"n\":4,\"avg\":251.5,"
            "\"hist\":[{\"lo\":1,\"hi\":2,\"count\":1},{\"lo\":2,\"hi\":4,\"count\":2},"
            "{\"lo\":512,\"hi\":1024,\"count\":1}],\"min\":1,\"p99\":1008,\"distinct\":4,"
            "\"window\":1700000000123456789}\n"
            "{\"comm\":\"zz\",\"probe\":\"syscall:write\",\"n\":0,\"avg\":null,\"hist\":[],"
            "\"min\":null,\"p99\":0,\"distinct\":0,\"window\":1700000000123456789}\n");
}

TEST_F(OutputTest, JsonSelectAndStacks) {
  PlanBuilder b;
  b.plan.mode = PlanMode::kSelect;
  b.Key(b.Field("time"));
  b.Key(b.Field("args.count"), "bytes");
  b.plan.keys.push_back({b.Field("pid"), "stack", Type::Stack(), 0, 8});
  Capture out;
  auto sink = MakeJsonSink(out.file());
  sink->SelectRow(b.plan, {int64_t{5}, int64_t{-1}, Stack{{0x10}, {}, 3}}, 5);
  sink->SelectRow(b.plan,
                  {int64_t{6}, int64_t{2},
                   Stack{{0x401136, 0x10, 0x4011f0}, {"fay_target+0x6", "", "main+0x40"}, 3}},
                  6);
  sink->SelectRow(b.plan, {int64_t{7}, int64_t{2}, Stack{}}, 7);
  EXPECT_EQ(out.Text(),
            "{\"time\":5,\"bytes\":18446744073709551615,\"stack\":[\"0x0000000000000010\"]}\n"
            "{\"time\":6,\"bytes\":2,\"stack\":[\"fay_target+0x6\",\"0x0000000000000010\","
            "\"main+0x40\"]}\n"
            "{\"time\":7,\"bytes\":2,\"stack\":[]}\n");

  // Text select rows print a stack on one line.
  Capture text;
  MakeTextSink(text.file())
      ->SelectRow(b.plan,
                  {int64_t{6}, int64_t{2}, Stack{{0x401136, 0x10}, {"fay_target+0x6", ""}, 3}}, 6);
  EXPECT_EQ(text.Text(),
            "            time         bytes  stack\n"
            "               6             2  fay_target+0x6; 0x0000000000000010\n");
}

TEST_F(OutputTest, Summary) {
  RunStats s;
  s.events_seen = 2000123;
  s.events_matched = 2000000;
  s.map_full = 3;
  EXPECT_EQ(FormatSummary(s, 1.2149),
            "fay: 2000123 events, 2000000 matched, 0 dropped, 3 map-full, 0 read errors in 1.21s");
}

}  // namespace
}  // namespace fay
