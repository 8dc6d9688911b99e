#include "query/lexer.h"

#include <gtest/gtest.h>

namespace fay {
namespace {

std::vector<Token> LexAll(const std::string& text) {
  Lexer lex(text);
  std::vector<Token> out;
  while (true) {
    Expected<Token> t = lex.Next();
    EXPECT_TRUE(t.ok()) << t.status().message();
    if (!t.ok() || t->kind == TokKind::kEnd) break;
    out.push_back(*t);
  }
  return out;
}

std::string LexError(const std::string& text) {
  Lexer lex(text);
  while (true) {
    Expected<Token> t = lex.Next();
    if (!t.ok()) return t.status().message();
    if (t->kind == TokKind::kEnd) return "no error";
  }
}

TEST(Lexer, OperatorsLongestFirst) {
  std::vector<Token> t = LexAll("a||b&&c|d==e!=f<=g>=h<<i>>j<k>l!~%^&");
  std::vector<std::string> ops;
  for (const Token& tok : t)
    if (tok.kind == TokKind::kOp) ops.push_back(tok.text);
  EXPECT_EQ(ops, (std::vector<std::string>{"||", "&&", "|", "==", "!=", "<=", ">=", "<<", ">>", "<",
                                           ">", "!", "~", "%", "^", "&"}));
}

TEST(Lexer, IntegersHexAndDurations) {
  std::vector<Token> t = LexAll("42 0x2A 100ns 10us 5ms 2s 1m 1h 1.5s 0");
  ASSERT_EQ(t.size(), 10u);
  EXPECT_EQ(t[0].kind, TokKind::kInt);
  EXPECT_EQ(t[0].int_value, 42);
  EXPECT_EQ(t[1].kind, TokKind::kInt);
  EXPECT_EQ(t[1].int_value, 42);
  EXPECT_EQ(t[2].kind, TokKind::kDuration);
  EXPECT_EQ(t[2].int_value, 100);
  EXPECT_EQ(t[3].int_value, 10000);
  EXPECT_EQ(t[4].int_value, 5000000);
  EXPECT_EQ(t[5].int_value, 2000000000);
  EXPECT_EQ(t[6].int_value, 60000000000);
  EXPECT_EQ(t[7].int_value, 3600000000000);
  EXPECT_EQ(t[8].kind, TokKind::kDuration);
  EXPECT_EQ(t[8].int_value, 1500000000);
  EXPECT_EQ(t[9].int_value, 0);
}

TEST(Lexer, FloatsKeepTheirSpelling) {
  std::vector<Token> t = LexAll("0.5 0.99");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kind, TokKind::kFloat);
  EXPECT_EQ(t[0].text, "0.5");
  EXPECT_DOUBLE_EQ(t[0].float_value, 0.5);
  EXPECT_DOUBLE_EQ(t[1].float_value, 0.99);
}

TEST(Lexer, StringsUnescape) {
  std::vector<Token> t = LexAll(R"("a\"b\\c\nd\te" "")");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kind, TokKind::kString);
  EXPECT_EQ(t[0].str_value, "a\"b\\c\nd\te");
  EXPECT_EQ(t[0].text, R"("a\"b\\c\nd\te")");
  EXPECT_EQ(t[1].str_value, "");
}

TEST(Lexer, IdentsAndDots) {
  std::vector<Token> t = LexAll("args.filename _x9");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_TRUE(t[0].IsWord("args"));
  EXPECT_TRUE(t[1].IsOp("."));
  EXPECT_TRUE(t[2].IsWord("filename"));
  EXPECT_TRUE(t[3].IsWord("_x9"));
}

TEST(Lexer, RangesAndComments) {
  std::vector<Token> t = LexAll("where  # a comment | not a pipe\n  comm == \"x\"");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].range.line, 1);
  EXPECT_EQ(t[0].range.col_begin, 1);
  EXPECT_EQ(t[0].range.col_end, 5);
  EXPECT_EQ(t[1].range.line, 2);
  EXPECT_EQ(t[1].range.col_begin, 3);
  EXPECT_EQ(t[1].range.col_end, 6);
  EXPECT_EQ(t[2].range.col_begin, 8);
  EXPECT_EQ(t[2].range.col_end, 9);
  EXPECT_EQ(t[3].range.col_begin, 11);
  EXPECT_EQ(t[3].range.col_end, 13);
  EXPECT_EQ(t[3].begin, 42u);
  EXPECT_EQ(t[3].end, 45u);
}

TEST(Lexer, EndTokenSitsAfterTheLastToken) {
  Lexer lex("top 10   # trailing\n\n");
  ASSERT_TRUE(lex.Next().ok());
  ASSERT_TRUE(lex.Next().ok());
  Expected<Token> end = lex.Next();
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->kind, TokKind::kEnd);
  // After the trailing comment: the last non-blank byte is the comment's end.
  EXPECT_EQ(end->range.line, 1);
  EXPECT_EQ(end->range.col_begin, 20);
}

TEST(Lexer, Errors) {
  EXPECT_EQ(LexError("comm == \"abc"),
            "query:1:9-12: ERROR: Unterminated string\ncomm == \"abc\n        ~~~~\n"
            "HINT: close the string with '\"'");
  EXPECT_EQ(LexError("\"a\\qb\""),
            "query:1:3-4: ERROR: Unknown escape '\\q'\n\"a\\qb\"\n  ~~\n"
            "HINT: strings take \\\" \\\\ \\n and \\t");
  EXPECT_EQ(LexError("pid = 3"),
            "query:1:5: ERROR: Unexpected '='\npid = 3\n    ~\nHINT: compare with '=='");
  EXPECT_EQ(LexError("a @ b"),
            "query:1:3: ERROR: Unexpected character '@'\na @ b\n  ~\n"
            "HINT: fay has no @maps: aggregate with a stage, e.g. | count() by comm");
  EXPECT_EQ(LexError("10x"),
            "query:1:3: ERROR: Unknown suffix 'x' on a number\n10x\n  ~\n"
            "HINT: durations take ns, us, ms, s, m or h, e.g. 100ms");
  EXPECT_EQ(LexError("99999999999999999999"),
            "query:1:1-20: ERROR: Number literal out of range\n99999999999999999999\n"
            "~~~~~~~~~~~~~~~~~~~~");
  EXPECT_EQ(LexError("1.5ns"),
            "query:1:1-5: ERROR: Duration is not a whole number of nanoseconds\n1.5ns\n~~~~~");
  EXPECT_EQ(LexError("0xg"), "query:1:1-3: ERROR: Invalid hex literal '0xg'\n0xg\n~~~");
}

// A bpftrace habit gets its fay form in the hint, one case per habit.
TEST(Lexer, BpftraceHabitsGetTheirFayForm) {
  auto scan = [](const std::string& q) {
    Lexer lex(q);
    auto s = lex.ScanSource();
    return s.ok() ? std::string("no error") : s.status().message();
  };
  auto hint = [](const std::string& message) {
    size_t at = message.find("HINT: ");
    return at == std::string::npos ? std::string() : message.substr(at + 6);
  };
  // args->field
  EXPECT_EQ(hint(LexError("count() by args->filename")),
            "fay reaches a field with '.': args.filename");
  // /predicate/
  EXPECT_EQ(hint(scan("syscall:openat /pid == 1/ | count()")),
            "bpftrace's /filter/ is a where stage: syscall:openat | where pid == 1 | ...");
  // an action block with a map
  EXPECT_EQ(hint(scan("tracepoint:syscalls:sys_enter_openat { @[comm] = count(); }")),
            "a bpftrace action block is a stage after '|': "
            "tracepoint:syscalls:sys_enter_openat | count() by comm");
  EXPECT_EQ(hint(scan("syscall:read { printf(\"%d\\n\", pid); }")),
            "a bpftrace action block is a stage after '|': syscall:read | select comm, pid");
  // @x[k] = agg() as a whole query, and as a stage
  EXPECT_EQ(
      hint(scan("@x[comm] = count()")),
      "fay has no @maps: the aggregate is a stage after the probes: PROBE | count() as x by comm");
  EXPECT_EQ(hint(LexError("@c[comm, pid] = hist(latency)")),
            "fay has no @maps: the aggregate is a stage: hist(latency) as c by comm, pid");
}

TEST(Lexer, ScanSourceSplitsOnCommasUpToThePipe) {
  std::string q =
      "uprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:mall* ,  syscall:re?d\n"
      "  , profile:99 | count()";
  Lexer lex(q);
  Expected<std::vector<ProbeSpec>> specs = lex.ScanSource();
  ASSERT_TRUE(specs.ok()) << specs.status().message();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].text, "uprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:mall*");
  EXPECT_EQ((*specs)[0].range.col_begin, 1);
  EXPECT_EQ((*specs)[0].range.col_end, 48);
  EXPECT_EQ((*specs)[1].text, "syscall:re?d");
  EXPECT_EQ((*specs)[1].range.col_begin, 53);
  EXPECT_EQ((*specs)[1].range.col_end, 64);
  EXPECT_EQ((*specs)[2].text, "profile:99");
  EXPECT_EQ((*specs)[2].range.line, 2);
  EXPECT_EQ((*specs)[2].range.col_begin, 5);
  EXPECT_EQ((*specs)[2].range.col_end, 14);
  Expected<Token> pipe = lex.Next();
  ASSERT_TRUE(pipe.ok());
  EXPECT_TRUE(pipe->IsOp("|"));
}

TEST(Lexer, ScanSourceErrors) {
  auto err = [](const std::string& q) {
    Lexer lex(q);
    auto s = lex.ScanSource();
    return s.ok() ? std::string("no error") : s.status().message();
  };
  EXPECT_EQ(err("syscall:read syscall:write"),
            "query:1:14-26: ERROR: Unexpected 'syscall:write' after probe 'syscall:read'\n"
            "syscall:read syscall:write\n             ~~~~~~~~~~~~~\n"
            "HINT: separate probes with ',' and stages with '|', e.g. syscall:read | count()");
  EXPECT_EQ(err("syscall:read,,syscall:write"),
            "query:1:14: ERROR: Expected a probe before ','\nsyscall:read,,syscall:write\n"
            "             ~\nHINT: probes are separated by ',', e.g. syscall:read, syscall:write");
  EXPECT_EQ(err(" | count()"),
            "query:1:2: ERROR: Expected a probe\n | count()\n ~\n"
            "HINT: a query starts with probes, e.g. syscall:openat | count() by comm");
  EXPECT_EQ(err("syscall:read # c, d\n"), "no error");
}

}  // namespace
}  // namespace fay
