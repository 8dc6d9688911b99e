#include "query/parser.h"

#include <gtest/gtest.h>

#include <fstream>

namespace fay {
namespace {

std::string Sexp(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kInt:
      return std::to_string(e.int_value);
    case ExprKind::kString:
      return "\"" + e.str_value + "\"";
    case ExprKind::kField:
      return e.name;
    default:
      break;
  }
  std::string out = "(";
  out += e.kind == ExprKind::kCall ? e.name : e.kind == ExprKind::kIn ? "in" : e.op;
  for (const auto& k : e.kids) out += " " + Sexp(*k);
  return out + ")";
}

std::shared_ptr<Query> Parse(const std::string& text) {
  Expected<std::shared_ptr<Query>> q = ParseQuery(text);
  EXPECT_TRUE(q.ok()) << q.status().message();
  return q.ok() ? *q : nullptr;
}

std::string ParseError(const std::string& text) {
  Expected<std::shared_ptr<Query>> q = ParseQuery(text);
  if (q.ok()) return "no error";
  EXPECT_EQ(q.status().code(), Code::kInvalidArgument);
  return q.status().message();
}

// The where condition of "syscall:read | where EXPR" as an S-expression.
std::string Where(const std::string& expr) {
  auto q = Parse("syscall:read | where " + expr);
  if (!q) return "parse failed";
  return Sexp(*std::get<WhereStage>(q->stages.at(0).stage).cond);
}

TEST(Parser, Precedence) {
  EXPECT_EQ(Where("a + b * c"), "(+ a (* b c))");
  EXPECT_EQ(Where("a * b + c"), "(+ (* a b) c)");
  EXPECT_EQ(Where("a - b - c"), "(- (- a b) c)");
  EXPECT_EQ(Where("a || b && c"), "(|| a (&& b c))");
  EXPECT_EQ(Where("a && b || c"), "(|| (&& a b) c)");
  EXPECT_EQ(Where("a == 1 && b != 2"), "(&& (== a 1) (!= b 2))");
  EXPECT_EQ(Where("a < b == c > d"), "(== (< a b) (> c d))");
  EXPECT_EQ(Where("a << 1 < b"), "(< (<< a 1) b)");
  EXPECT_EQ(Where("a + 1 << 2"), "(<< (+ a 1) 2)");
  EXPECT_EQ(Where("a & b == c"), "(& a (== b c))");
  EXPECT_EQ(Where("a ^ b & c"), "(^ a (& b c))");
  EXPECT_EQ(Where("(a | b ^ c) != 0"), "(!= (| a (^ b c)) 0)");
  EXPECT_EQ(Where("(a || b) && c"), "(&& (|| a b) c)");
  EXPECT_EQ(Where("a % b / c * d"), "(* (/ (% a b) c) d)");
  EXPECT_EQ(Where("!a && ~b == -c"), "(&& (! a) (== (~ b) (- c)))");
  EXPECT_EQ(Where("- - a"), "(- (- a))");
  // The words read as the symbols, at their precedence.
  EXPECT_EQ(Where("a or b and c"), "(|| a (&& b c))");
  EXPECT_EQ(Where("ret < 0 and errno == 13"), "(&& (< ret 0) (== errno 13))");
  EXPECT_EQ(Where("not a and b"), "(&& (! a) b)");
  EXPECT_EQ(Where("not errno == 2 and pid > 0"), "(&& (! (== errno 2)) (> pid 0))");
  EXPECT_EQ(Where("not not a"), "(! (! a))");
  EXPECT_EQ(Where("a not in (1, 2) or b"), "(|| (! (in a 1 2)) b)");
}

TEST(Parser, LiteralsFieldsAndCalls) {
  EXPECT_EQ(Where("ret == -2"), "(== ret -2)");
  EXPECT_EQ(Where("latency > 5ms"), "(> latency 5000000)");
  EXPECT_EQ(Where("args.flags & 0x40"), "(& args.flags 64)");
  EXPECT_EQ(Where("str(args.filename) == \"/etc/passwd\""),
            "(== (str args.filename) \"/etc/passwd\")");
  EXPECT_EQ(Where("str(args.filename, 128) == \"a\\\"b\""),
            "(== (str args.filename 128) \"a\"b\")");
  EXPECT_EQ(Where("comm in (\"bash\", \"sh\")"), "(in comm \"bash\" \"sh\")");
  EXPECT_EQ(Where("ret in (-2, -13) && pid > 1"), "(&& (in ret -2 -13) (> pid 1))");
  EXPECT_EQ(Where("pid not in (1, 2)"), "(! (in pid 1 2))");
  EXPECT_EQ(Where("a.b.c"), "a.b.c");
}

TEST(Parser, ExprTextAndRanges) {
  auto q = Parse("syscall:read | where  pid  ==  (1 + 2) ");
  const Expr& c = *std::get<WhereStage>(q->stages[0].stage).cond;
  EXPECT_EQ(c.text, "pid  ==  (1 + 2)");
  EXPECT_EQ(c.range.line, 1);
  EXPECT_EQ(c.range.col_begin, 23);
  EXPECT_EQ(c.range.col_end, 38);
  EXPECT_EQ(c.kids[0]->text, "pid");
  EXPECT_EQ(c.kids[0]->range.col_begin, 23);
  EXPECT_EQ(c.kids[0]->range.col_end, 25);
  EXPECT_EQ(c.kids[1]->text, "(1 + 2)");
  EXPECT_EQ(c.kids[1]->kids[1]->text, "2");
  EXPECT_EQ(c.kids[1]->kids[1]->range.col_begin, 37);
  EXPECT_EQ(q->stages[0].range.col_begin, 16);
  EXPECT_EQ(q->stages[0].range.col_end, 38);
}

TEST(Parser, MultiLineQueriesKeepLinesAndOneLineNames) {
  auto q = Parse(
      "syscall:openat,   # opens\n  syscall:read\n| count() by comm,\n"
      "   str(args.filename,  # the path\n 32)\n| top 5");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->sources.size(), 2u);
  EXPECT_EQ(q->sources[1].text, "syscall:read");
  EXPECT_EQ(q->sources[1].range.line, 2);
  EXPECT_EQ(q->sources[1].range.col_begin, 3);
  const auto& agg = std::get<AggregateStage>(q->stages[0].stage);
  ASSERT_EQ(agg.keys.size(), 2u);
  EXPECT_EQ(agg.keys[1].name, "str(args.filename, 32)");
  EXPECT_EQ(agg.keys[1].expr->range.line, 4);
  EXPECT_EQ(agg.keys[1].expr->range.col_begin, 4);
  EXPECT_EQ(q->stages[0].range.line, 3);
  EXPECT_EQ(q->stages[1].range.line, 6);
  EXPECT_EQ(std::get<TopStage>(q->stages[1].stage).n, 5);
}

TEST(Parser, IssueExampleOne) {
  auto q = Parse(
      "syscall:openat | where ret < 0 | count() as fails by comm, str(args.filename) as path | "
      "top 10");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->sources.size(), 1u);
  EXPECT_EQ(q->sources[0].text, "syscall:openat");
  EXPECT_EQ(q->sources[0].range.col_begin, 1);
  EXPECT_EQ(q->sources[0].range.col_end, 14);
  ASSERT_EQ(q->stages.size(), 3u);
  EXPECT_EQ(Sexp(*std::get<WhereStage>(q->stages[0].stage).cond), "(< ret 0)");
  const auto& agg = std::get<AggregateStage>(q->stages[1].stage);
  ASSERT_EQ(agg.aggs.size(), 1u);
  EXPECT_EQ(agg.aggs[0].func, AggFunc::kCount);
  EXPECT_EQ(agg.aggs[0].name, "fails");
  EXPECT_EQ(agg.aggs[0].arg, nullptr);
  EXPECT_EQ(agg.aggs[0].range.col_begin, 34);
  EXPECT_EQ(agg.aggs[0].range.col_end, 40);
  ASSERT_EQ(agg.keys.size(), 2u);
  EXPECT_EQ(agg.keys[0].name, "comm");
  EXPECT_EQ(agg.keys[1].name, "path");
  EXPECT_EQ(agg.keys[1].expr->text, "str(args.filename)");
  EXPECT_EQ(std::get<TopStage>(q->stages[2].stage).n, 10);
}

TEST(Parser, IssueExampleTwo) {
  auto q = Parse(
      "syscall:read, syscall:pread64 | where comm == \"postgres\" | hist(latency) by probe | "
      "every 1s");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->sources.size(), 2u);
  EXPECT_EQ(q->sources[1].text, "syscall:pread64");
  EXPECT_EQ(q->sources[1].range.col_begin, 15);
  EXPECT_EQ(q->sources[1].range.col_end, 29);
  const auto& agg = std::get<AggregateStage>(q->stages[1].stage);
  EXPECT_EQ(agg.aggs[0].func, AggFunc::kHist);
  EXPECT_EQ(agg.aggs[0].name, "hist");
  EXPECT_EQ(agg.aggs[0].arg->text, "latency");
  EXPECT_EQ(agg.keys[0].name, "probe");
  EXPECT_EQ(std::get<EveryStage>(q->stages[2].stage).ns, 1000000000u);
}

TEST(Parser, IssueExampleThree) {
  auto q = Parse("syscall:* | sample 1% | count() by comm | for 5s");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->sources[0].text, "syscall:*");
  const auto& s = std::get<SampleStage>(q->stages[0].stage);
  EXPECT_EQ(s.num, 1u);
  EXPECT_EQ(s.den, 100u);
  EXPECT_EQ(std::get<ForStage>(q->stages[2].stage).ns, 5000000000u);
}

TEST(Parser, IssueExampleFour) {
  auto q = Parse(
      "syscall:write | select time, pid, comm, args.count, ret          # streams raw events");
  ASSERT_TRUE(q);
  const auto& sel = std::get<SelectStage>(q->stages[0].stage);
  std::vector<std::string> names;
  for (const auto& i : sel.items) names.push_back(i.name);
  EXPECT_EQ(names, (std::vector<std::string>{"time", "pid", "comm", "args.count", "ret"}));
  EXPECT_EQ(q->stages[0].range.col_end, 55);
}

TEST(Parser, IssueExampleFive) {
  auto q = Parse("uprobe:/bin/bash:readline | count() by uid");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->sources[0].text, "uprobe:/bin/bash:readline");
  EXPECT_EQ(std::get<AggregateStage>(q->stages[0].stage).keys[0].name, "uid");
}

TEST(Parser, AllAggregates) {
  auto q = Parse(
      "syscall:read | count(), sum(ret), min(ret) as lo, max(ret), avg(latency), hist(ret), "
      "lhist(latency, 0, 1ms, 100us), quantile(latency, 0.99) as p99, quantile(latency, 50), "
      "distinct(pid)");
  ASSERT_TRUE(q);
  const auto& aggs = std::get<AggregateStage>(q->stages[0].stage).aggs;
  ASSERT_EQ(aggs.size(), 10u);
  std::vector<std::string> names;
  for (const auto& a : aggs) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"count", "sum", "lo", "max", "avg", "hist", "lhist",
                                             "p99", "quantile", "distinct"}));
  EXPECT_EQ(aggs[6].func, AggFunc::kLhist);
  EXPECT_EQ(aggs[6].lo, 0);
  EXPECT_EQ(aggs[6].hi, 1000000);
  EXPECT_EQ(aggs[6].step, 100000);
  EXPECT_DOUBLE_EQ(aggs[7].q, 0.99);
  EXPECT_DOUBLE_EQ(aggs[8].q, 0.5);
  EXPECT_EQ(aggs[9].func, AggFunc::kDistinct);
  EXPECT_TRUE(std::get<AggregateStage>(q->stages[0].stage).keys.empty());
}

TEST(Parser, LhistTakesNegativeBounds) {
  auto q = Parse("syscall:read | lhist(ret, -10, 10, 5)");
  ASSERT_TRUE(q);
  const auto& a = std::get<AggregateStage>(q->stages[0].stage).aggs[0];
  EXPECT_EQ(a.lo, -10);
  EXPECT_EQ(a.hi, 10);
  EXPECT_EQ(a.step, 5);
}

TEST(Parser, SampleForms) {
  auto sample = [](const std::string& s) {
    auto q = Parse("syscall:read | sample " + s);
    if (!q) return std::pair<uint64_t, uint64_t>{0, 0};
    const auto& st = std::get<SampleStage>(q->stages[0].stage);
    return std::pair<uint64_t, uint64_t>{st.num, st.den};
  };
  EXPECT_EQ(sample("0.5%"), (std::pair<uint64_t, uint64_t>{5, 1000}));
  EXPECT_EQ(sample("1%"), (std::pair<uint64_t, uint64_t>{1, 100}));
  EXPECT_EQ(sample("100%"), (std::pair<uint64_t, uint64_t>{100, 100}));
  EXPECT_EQ(sample("12.25%"), (std::pair<uint64_t, uint64_t>{1225, 10000}));
  EXPECT_EQ(sample("1/1000"), (std::pair<uint64_t, uint64_t>{1, 1000}));
}

TEST(Parser, NoStagesIsFine) {
  auto q = Parse("syscall:openat");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->sources.size(), 1u);
  EXPECT_TRUE(q->stages.empty());
  EXPECT_EQ(q->text, "syscall:openat");
}

TEST(Parser, BitwiseOrNeedsParenthesesAtTopLevel) {
  EXPECT_EQ(ParseError("syscall:read | where a | b"),
            "query:1:26: ERROR: Unknown stage 'b'\nsyscall:read | where a | b\n"
            "                         ~\nHINT: for a bitwise or, use parentheses: where (a | b); "
            "stages: where EXPR, sample P% or 1/N, select EXPR, "
            "..., top N, every DURATION, for DURATION, or aggregates: count() sum(x) min(x) "
            "max(x) avg(x) hist(x) lhist(x, lo, hi, step) quantile(x, q) distinct(x) [by EXPR, "
            "...]");
}

TEST(Parser, Errors) {
  EXPECT_EQ(ParseError("syscall:read | wher pid == 1"),
            "query:1:16-19: ERROR: Unknown stage 'wher'\nsyscall:read | wher pid == 1\n"
            "               ~~~~\nHINT: did you mean 'where'? stages: where EXPR, sample P% or "
            "1/N, select EXPR, ..., top N, every DURATION, for DURATION, or aggregates: count() "
            "sum(x) min(x) max(x) avg(x) hist(x) lhist(x, lo, hi, step) quantile(x, q) "
            "distinct(x) [by EXPR, ...]");
  EXPECT_EQ(ParseError("syscall:read | count by comm"),
            "query:1:16-20: ERROR: Expected '(' after 'count'\nsyscall:read | count by comm\n"
            "               ~~~~~\nHINT: write count()");
  EXPECT_EQ(ParseError("syscall:read | where comm == \"bash"),
            "query:1:30-34: ERROR: Unterminated string\nsyscall:read | where comm == \"bash\n"
            "                             ~~~~~\nHINT: close the string with '\"'");
  EXPECT_EQ(ParseError("syscall:read | where pid == 1 2"),
            "query:1:31: ERROR: Unexpected '2' after the where stage\n"
            "syscall:read | where pid == 1 2\n                              ~\n"
            "HINT: stages are separated by '|'");
  EXPECT_EQ(ParseError("syscall:read |"),
            "query:1:15: ERROR: Expected a stage after '|'\nsyscall:read |\n              ~\n"
            "HINT: stages: where EXPR, sample P% or 1/N, select EXPR, ..., top N, every DURATION, "
            "for DURATION, or aggregates: count() sum(x) min(x) max(x) avg(x) hist(x) lhist(x, "
            "lo, hi, step) quantile(x, q) distinct(x) [by EXPR, ...]");
  EXPECT_EQ(ParseError("syscall:read | where (pid == 1"),
            "query:1:31: ERROR: Expected ')' to close '(', found end of query\n"
            "syscall:read | where (pid == 1\n                              ~");
  EXPECT_EQ(ParseError("syscall:read | every 5"),
            "query:1:22: ERROR: 'every' needs a duration with a unit\nsyscall:read | every 5\n"
            "                     ~\nHINT: e.g. every 5s; units: ns, us, ms, s, m, h");
  EXPECT_EQ(ParseError("syscall:read | top 0"),
            "query:1:20: ERROR: Expected a row count after 'top', found '0'\n"
            "syscall:read | top 0\n                   ~\nHINT: e.g. top 10");
  EXPECT_EQ(ParseError("syscall:read | count(pid)"),
            "query:1:22-24: ERROR: count() takes no argument\nsyscall:read | count(pid)\n"
            "                     ~~~\nHINT: count() counts events; to count distinct values use "
            "distinct(x)");
  EXPECT_EQ(ParseError("syscall:read | hist(ret, 2)"),
            "query:1:24: ERROR: Too many arguments to hist()\nsyscall:read | hist(ret, 2)\n"
            "                       ~\nHINT: write hist(x)");
  EXPECT_EQ(ParseError("syscall:read | lhist(ret)"),
            "query:1:25: ERROR: Expected ',' before lhist's lo, found ')'\n"
            "syscall:read | lhist(ret)\n                        ~\n"
            "HINT: write lhist(x, lo, hi, step), e.g. lhist(latency, 0, 1ms, 100us)");
  EXPECT_EQ(ParseError("syscall:read | quantile(latency, 1.5)"),
            "query:1:34-36: ERROR: Quantile out of range\nsyscall:read | quantile(latency, "
            "1.5)\n                                 ~~~\nHINT: q is a fraction in (0, 1] such as "
            "0.99, or a percent 1..100 such as 99");
  EXPECT_EQ(ParseError("syscall:read | sample 0%"),
            "query:1:23-24: ERROR: Sampling rate must be above 0% and at most 100%\n"
            "syscall:read | sample 0%\n                      ~~\n"
            "HINT: e.g. sample 1% or sample 0.5% or sample 1/100");
  EXPECT_EQ(ParseError("syscall:read | sample 101%"),
            "query:1:23-26: ERROR: Sampling rate must be above 0% and at most 100%\n"
            "syscall:read | sample 101%\n                      ~~~~\n"
            "HINT: e.g. sample 1% or sample 0.5% or sample 1/100");
  EXPECT_EQ(ParseError("syscall:read | where count() > 1"),
            "query:1:22-26: ERROR: Aggregate count() is not allowed inside an expression\n"
            "syscall:read | where count() > 1\n                     ~~~~~\n"
            "HINT: aggregates form a stage of their own, e.g. ... | count() by comm");
  EXPECT_EQ(ParseError("syscall:read | where pid > 1.5"),
            "query:1:28-30: ERROR: Float literals are only allowed in quantile() and sample\n"
            "syscall:read | where pid > 1.5\n                           ~~~\n"
            "HINT: expressions compute on integers; use a duration such as 1500us for 1.5ms");
  EXPECT_EQ(ParseError("syscall:read | where pid in (1, tid)"),
            "query:1:33-35: ERROR: 'in' takes a list of literals\n"
            "syscall:read | where pid in (1, tid)\n                                ~~~\n"
            "HINT: e.g. comm in (\"bash\", \"sh\") or ret in (-2, -13)");
  EXPECT_EQ(ParseError("syscall:read | count() as"),
            "query:1:26: ERROR: Expected a name after 'as', found end of query\n"
            "syscall:read | count() as\n                         ~\n"
            "HINT: names are identifiers, e.g. count() as calls");
  EXPECT_EQ(ParseError("syscall:read | where args."),
            "query:1:27: ERROR: Expected a field name after '.', found end of query\n"
            "syscall:read | where args.\n                          ~\nHINT: e.g. args.filename");
  EXPECT_EQ(ParseError("syscall:read | where\n  pid ==\n"),
            "query:2:9: ERROR: Expected an expression, found end of query\n  pid ==\n"
            "        ~\nHINT: e.g. a field (pid, comm, args.filename), a literal (42, \"bash\", "
            "5ms) or str(ptr)");
}

}  // namespace
}  // namespace fay

namespace fay {
namespace {

// The queries in the Examples section of docs/QUERY.md: each code block holds queries separated
// by blank lines or '#' comment lines; an indented line continues the query above it.
std::vector<std::string> DocExamples() {
  std::ifstream in(std::string(FAY_SOURCE_DIR) + "/docs/QUERY.md");
  std::vector<std::string> out;
  std::string line, cur;
  bool in_section = false, in_block = false;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Examples";
    if (!in_section) continue;
    if (line.rfind("```", 0) == 0) {
      flush();
      in_block = !in_block;
      continue;
    }
    if (!in_block) continue;
    if (line.empty() || line[0] == '#') {
      flush();
    } else if (line[0] == ' ' && !cur.empty()) {
      cur += "\n" + line;
    } else {
      flush();
      cur = line;
    }
  }
  return out;
}

TEST(Parser, DocExamplesParse) {
  std::vector<std::string> examples = DocExamples();
  EXPECT_GE(examples.size(), 18u);
  for (const std::string& q : examples) {
    Expected<std::shared_ptr<Query>> parsed = ParseQuery(q);
    EXPECT_TRUE(parsed.ok()) << q << "\n" << parsed.status().message();
  }
}

}  // namespace
// 10000 nested parentheses (or unary operators, calls, or a chain of 10000 binary operators)
// overflowed the stack in the parser or the passes after it; fuzz_query then found 175
// parentheses enough under ASan. The nesting is bounded, and the error points at the first level
// too many.
std::string FirstLine(const std::string& s) {
  return s.substr(0, s.find('\n'));
}
std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(Parser, NestingIsBoundedNotAStackOverflow) {
  const std::string w = "syscall:read | where ";  // 21 columns: the expression starts at 22
  EXPECT_EQ(Where(Repeat("(", 64) + "1" + Repeat(")", 64)), "1");
  EXPECT_EQ(FirstLine(ParseError(w + Repeat("(", 10000) + "1" + Repeat(")", 10000))),
            "query:1:86: ERROR: Expression nested more than 64 levels deep");
  EXPECT_EQ(FirstLine(ParseError(w + Repeat("!", 10000) + "1")),
            "query:1:86: ERROR: Expression nested more than 64 levels deep");
  EXPECT_EQ(FirstLine(ParseError(w + Repeat("str(", 10000) + "1" + Repeat(")", 10000))),
            "query:1:278-280: ERROR: Expression nested more than 64 levels deep");
  // The input fuzz_query found (a stack overflow under ASan at the old limit of 256 levels).
  EXPECT_EQ(
      FirstLine(ParseError(
          R"q(syscall:ope(((((((((((((((((((((((((RRRRRRRRRRRRRRRRRRRRsyscall:write | where co ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((| distinct(fRRRRRRRRRR>=RRRRRRRRRRRRRRRcomm in ("bash", "sh") | count()as n by stRRRRRRRRRRRRRcomm in d() by uid | to"bpash" 3, 10)q")),
      "query:1:146: ERROR: Expression nested more than 64 levels deep");
  // A left-leaning chain nests by its length: 256 operators make a tree 257 levels high.
  EXPECT_EQ(Where(Repeat("1+", 255) + "1").substr(0, 6), "(+ (+ ");
  std::string err = ParseError(w + Repeat("1+", 10000) + "1");
  EXPECT_EQ(FirstLine(err), "query:1:22-534: ERROR: Expression nested more than 256 levels deep");
  EXPECT_EQ(err.substr(err.rfind('\n') + 1), "HINT: split it, e.g. into several where stages");
}

}  // namespace fay

namespace fay {
namespace {

TEST(Parser, StatePipelinesBeforeSemicolons) {
  auto q = Parse(
      "uprobe:./app:a | where arg0 > 1 | remember time as t0 by tid, arg0 for 5s;\n"
      "uprobe:./app:b | remember arg1 as x;\n"
      "uprobe:./app:c | hist(time - t0[tid, arg0]) by x[tid]");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->states.size(), 2u);
  EXPECT_EQ(q->states[0]->sources.at(0).text, "uprobe:./app:a");
  const auto& r = std::get<RememberStage>(q->states[0]->stages.back().stage);
  EXPECT_EQ(r.name, "t0");
  EXPECT_EQ(r.value->text, "time");
  ASSERT_EQ(r.keys.size(), 2u);
  EXPECT_EQ(r.keys[1]->text, "arg0");
  EXPECT_EQ(r.ttl_ns, 5'000'000'000u);
  EXPECT_TRUE(std::get<RememberStage>(q->states[1]->stages.back().stage).keys.empty());
  EXPECT_EQ(q->sources.at(0).text, "uprobe:./app:c");
  const auto& agg = std::get<AggregateStage>(q->stages.at(0).stage);
  const Expr& read = *agg.aggs.at(0).arg->kids.at(1);
  EXPECT_EQ(read.kind, ExprKind::kState);
  EXPECT_EQ(read.name, "t0");
  EXPECT_EQ(read.kids.size(), 2u);
  EXPECT_EQ(agg.keys.at(0).name, "x[tid]");
}

TEST(Parser, StatePipelineErrors) {
  auto says = [](const std::string& query, const std::string& want) {
    const std::string got = ParseError(query);
    EXPECT_NE(got.find(want), std::string::npos) << got;
  };
  says("syscall:read | count(); syscall:write | count()",
       "A pipeline before ';' must end with a remember stage");
  says("syscall:read | remember ret by tid; syscall:write | count()",
       "Expected 'as NAME' after remember's value");
  says("syscall:read | remember time as t; syscall:write | sum(t[tid)",
       "Expected ']' after the keys of t[...]");
  says("syscall:read | remember time as t |; syscall:write | count()",
       "Expected a stage after '|'");
  std::string many;
  for (int i = 0; i < 5; ++i)
    many += "syscall:read | remember time as t" + std::to_string(i) + "; ";
  says(many + "syscall:write | count()", "At most 4 state pipelines");
}

}  // namespace
}  // namespace fay

namespace fay {
namespace {

TEST(Parser, SeveralTables) {
  auto q = Parse(
      "syscall:* | where ret < 0 | (count() by probe | top 10), (sum(ret) as s by comm) "
      "| every 1s");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->stages.size(), 3u);
  const auto& t = std::get<TablesStage>(q->stages[1].stage);
  ASSERT_EQ(t.tables.size(), 2u);
  EXPECT_EQ(t.tables[0].top_n, 10);
  EXPECT_EQ(t.tables[0].agg.keys.at(0).name, "probe");
  EXPECT_EQ(t.tables[1].top_n, 0);
  EXPECT_EQ(t.tables[1].agg.aggs.at(0).name, "s");
  EXPECT_NE(ParseError("syscall:* | (count() by probe) (count())").find("Unexpected"),
            std::string::npos);
  EXPECT_NE(ParseError("syscall:* | (count() by probe").find("Expected ')' to close the table"),
            std::string::npos);
}

}  // namespace
}  // namespace fay
