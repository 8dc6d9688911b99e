#include "query/passes/semantic.h"

#include <gtest/gtest.h>

#include "common/strings.h"
#include "fake_catalog.h"
#include "query/parser.h"

namespace fay {
namespace {

struct Analyzed {
  std::shared_ptr<Query> query;
  std::vector<ProbeInfo> probes;
};

Analyzed Analyze(const std::string& text) {
  Expected<std::shared_ptr<Query>> q = ParseQuery(text);
  EXPECT_TRUE(q.ok()) << q.status().message();
  if (!q.ok()) return {};
  FakeCatalog catalog;
  Expected<std::vector<ProbeInfo>> probes = AnalyzeQuery(**q, catalog);
  EXPECT_TRUE(probes.ok()) << probes.status().message();
  if (!probes.ok()) return {*q, {}};
  return {*q, *probes};
}

std::string AnalyzeError(const std::string& text) {
  Expected<std::shared_ptr<Query>> q = ParseQuery(text);
  if (!q.ok()) return "parse error: " + q.status().message();
  FakeCatalog catalog;
  Expected<std::vector<ProbeInfo>> probes = AnalyzeQuery(**q, catalog);
  return probes.ok() ? "no error" : probes.status().message();
}

const Expr& WhereOf(const Analyzed& a) {
  return *std::get<WhereStage>(a.query->stages.at(0).stage).cond;
}
const AggregateStage& AggOf(const Analyzed& a, size_t i = 0) {
  return std::get<AggregateStage>(a.query->stages.at(i).stage);
}

TEST(Semantic, ResolvesSpecsInOrderAndDedupes) {
  Analyzed a = Analyze("syscall:read, syscall:*read*, syscall:openat | count()");
  std::vector<std::string> names;
  for (const auto& p : a.probes) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"syscall:read", "syscall:pread64", "syscall:openat"}));
}

TEST(Semantic, UnknownProbeNamesTheNearest) {
  EXPECT_EQ(AnalyzeError("syscall:read, syscall:opnat | count()"),
            "query:1:15-27: ERROR: Unknown probe 'syscall:opnat'\n"
            "syscall:read, syscall:opnat | count()\n              ~~~~~~~~~~~~~\n"
            "HINT: did you mean: syscall:openat, syscall:read, syscall:close");
}

TEST(Semantic, OtherCatalogErrorsPassThrough) {
  Expected<std::shared_ptr<Query>> q = ParseQuery("denied:x | count()");
  ASSERT_TRUE(q.ok());
  FakeCatalog catalog;
  auto r = AnalyzeQuery(**q, catalog);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermission);
  EXPECT_EQ(r.status().message(), "tracefs: Permission denied");
}

TEST(Semantic, MalformedSpecIsPointedAtWithoutGuesses) {
  Expected<std::shared_ptr<Query>> q = ParseQuery("interval:xyz | count()");
  ASSERT_TRUE(q.ok());
  FakeCatalog catalog;
  auto r = AnalyzeQuery(**q, catalog);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "query:1:1-12: ERROR: Bad duration 'xyz'\ninterval:xyz | count()\n~~~~~~~~~~~~");
}

TEST(Semantic, FieldIndexIsParallelToProbes) {
  Analyzed a = Analyze("syscall:read, syscall:openat | where ret < 0 && pid != 1");
  const Expr& cond = WhereOf(a);
  const Expr& ret = *cond.kids[0]->kids[0];
  EXPECT_EQ(ret.name, "ret");
  EXPECT_EQ(ret.field_index, (std::vector<int>{10, 11}));
  EXPECT_EQ(ret.type, Type::Int(true));
  const Expr& pid = *cond.kids[1]->kids[0];
  EXPECT_EQ(pid.field_index, (std::vector<int>{2, 2}));
  EXPECT_EQ(cond.type, Type::Int(true));
}

TEST(Semantic, UnknownFieldListsTheProbesFields) {
  EXPECT_EQ(AnalyzeError("syscall:openat | where filenme == \"x\""),
            "query:1:24-30: ERROR: Unknown field 'filenme' on syscall:openat\n"
            "syscall:openat | where filenme == \"x\"\n                       ~~~~~~~\n"
            "HINT: did you mean 'args.filename'? fields of syscall:openat: time, cpu, pid, tid, "
            "uid, comm, probe, args.dfd, "
            "args.filename, args.flags, args.mode, ret, errno, latency");
  EXPECT_EQ(
      AnalyzeError("syscall:openat | count() by filename"),
      "query:1:29-36: ERROR: Unknown field 'filename' on syscall:openat\n"
      "syscall:openat | count() by filename\n                            ~~~~~~~~\n"
      "HINT: did you mean 'args.filename'? fields of syscall:openat: time, cpu, pid, tid, "
      "uid, comm, probe, args.dfd, args.filename, args.flags, args.mode, ret, errno, latency");
  EXPECT_EQ(AnalyzeError("syscall:openat | count() by args.flag"),
            "query:1:29-37: ERROR: Unknown field 'args.flag' on syscall:openat\n"
            "syscall:openat | count() by args.flag\n                            ~~~~~~~~~\n"
            "HINT: did you mean 'args.flags'? fields of syscall:openat: time, cpu, pid, tid, uid, "
            "comm, probe, args.dfd, args.filename, args.flags, args.mode, ret, errno, latency");
}

TEST(Semantic, FieldMustExistOnEveryProbe) {
  EXPECT_EQ(AnalyzeError("syscall:read, syscall:openat | sum(args.count)"),
            "query:1:36-45: ERROR: Unknown field 'args.count' on syscall:openat\n"
            "syscall:read, syscall:openat | sum(args.count)\n"
            "                                   ~~~~~~~~~~\n"
            "HINT: fields of syscall:openat: time, cpu, pid, tid, uid, comm, probe, args.dfd, "
            "args.filename, args.flags, args.mode, ret, errno, latency (a field must exist on "
            "every probe of the query, or use coalesce(a, b))");
}

TEST(Semantic, FieldTypeConflictAcrossProbes) {
  EXPECT_EQ(AnalyzeError("tracepoint:sched:sched_switch, tracepoint:fake:conflict | count() "
                         "by prev_comm"),
            "query:1:70-78: ERROR: Field 'prev_comm' is string on tracepoint:sched:sched_switch "
            "but int on tracepoint:fake:conflict\n"
            "tracepoint:sched:sched_switch, tracepoint:fake:conflict | count() by prev_comm\n"
            "                                                                     ~~~~~~~~~\n"
            "HINT: query these probes separately");
}

TEST(Semantic, IntSignednessDifferencesUnifyToSigned) {
  Analyzed a = Analyze("syscall:read, syscall:close | count() by args.fd");
  const Expr& fd = *AggOf(a).keys[0].expr;
  EXPECT_EQ(fd.type, Type::Int(true));
  EXPECT_EQ(fd.field_index, (std::vector<int>{7, 7}));
  Analyzed b = Analyze("syscall:read, syscall:pread64 | count() by args.fd");
  EXPECT_EQ(AggOf(b).keys[0].expr->type, Type::Int(false));
}

TEST(Semantic, TypeMismatchSaysFoundAndExpected) {
  EXPECT_EQ(AnalyzeError("syscall:read | where comm + 1 > 2"),
            "query:1:22-25: ERROR: Type mismatch: found string, expected int\n"
            "syscall:read | where comm + 1 > 2\n                     ~~~~\n"
            "HINT: '+' takes ints");
  EXPECT_EQ(AnalyzeError("syscall:read | where pid == \"x\""),
            "query:1:29-31: ERROR: Type mismatch: found string, expected int\n"
            "syscall:read | where pid == \"x\"\n                            ~~~\n"
            "HINT: '==' compares two ints or two strings; 'pid' is int");
  EXPECT_EQ(AnalyzeError("syscall:read | where 3 == comm"),
            "query:1:22: ERROR: Type mismatch: found int, expected string\n"
            "syscall:read | where 3 == comm\n                     ~\n"
            "HINT: '==' compares two ints or two strings; 'comm' is string");
  EXPECT_EQ(AnalyzeError("syscall:openat | where args.filename == \"/etc/passwd\""),
            "query:1:41-53: ERROR: Type mismatch: found string, expected user pointer\n"
            "syscall:openat | where args.filename == \"/etc/passwd\"\n"
            "                                        ~~~~~~~~~~~~~\n"
            "HINT: 'args.filename' is a user pointer; read the string with str(args.filename)");
  EXPECT_EQ(AnalyzeError("syscall:read | where comm"),
            "query:1:22-25: ERROR: Type mismatch: found string, expected int\n"
            "syscall:read | where comm\n                     ~~~~\n"
            "HINT: a where condition is an int (non-zero keeps the event); compare strings with "
            "==, e.g. comm == \"bash\"");
  EXPECT_EQ(AnalyzeError("syscall:read | where comm < \"b\""),
            "query:1:22-31: ERROR: Strings cannot be compared with '<'\n"
            "syscall:read | where comm < \"b\"\n                     ~~~~~~~~~~\n"
            "HINT: strings take only == and != (with * and ? globs)");
  EXPECT_EQ(AnalyzeError("syscall:read | where !comm"),
            "query:1:23-26: ERROR: Type mismatch: found string, expected int\n"
            "syscall:read | where !comm\n                      ~~~~\nHINT: '!' takes an int");
}

TEST(Semantic, ExpressionTypes) {
  Analyzed a = Analyze("syscall:read | where (latency - 5) > args.count + ret");
  const Expr& c = WhereOf(a);
  EXPECT_EQ(c.type, Type::Int(true));
  EXPECT_EQ(c.kids[0]->type, Type::Int(false));  // unsigned latency, literal adopts it
  EXPECT_EQ(c.kids[1]->type, Type::Int(false));  // unsigned + signed is unsigned, as in C
  EXPECT_EQ(c.kids[1]->kids[1]->type, Type::Int(true));
}

TEST(Semantic, StrCalls) {
  Analyzed a = Analyze("syscall:openat | count() by str(args.filename), str(args.filename, 128)");
  EXPECT_EQ(AggOf(a).keys[0].expr->type, Type::Str(64));
  EXPECT_EQ(AggOf(a).keys[0].name, "str(args.filename)");
  EXPECT_EQ(AggOf(a).keys[1].expr->type, Type::Str(128));
  EXPECT_EQ(AggOf(a).keys[1].expr->kids[0]->type, Type::UserPtr());

  Analyzed u = Analyze("uprobe:/bin/bash:readline | count() by str(arg0)");
  EXPECT_EQ(AggOf(u).keys[0].expr->type, Type::Str(64));

  EXPECT_EQ(AnalyzeError("syscall:read | count() by str(comm)"),
            "query:1:31-34: ERROR: Type mismatch: found string, expected user pointer\n"
            "syscall:read | count() by str(comm)\n                              ~~~~\n"
            "HINT: 'comm' is already a string; use it without str()");
  EXPECT_EQ(AnalyzeError("syscall:read | count() by str(pid)"),
            "query:1:31-33: ERROR: Type mismatch: found int, expected user pointer\n"
            "syscall:read | count() by str(pid)\n                              ~~~\n"
            "HINT: str() reads a NUL-terminated string at a user-space address, such as "
            "args.filename");
  EXPECT_EQ(AnalyzeError("syscall:read | count() by str(args.buf, 300)"),
            "query:1:41-43: ERROR: str() length must be an integer literal 1..256\n"
            "syscall:read | count() by str(args.buf, 300)\n"
            "                                        ~~~\n"
            "HINT: str(ptr) reads up to 64 bytes, str(ptr, N) up to N (1..256)");
  EXPECT_EQ(AnalyzeError("syscall:read | count() by strr(args.buf)"),
            "query:1:27-40: ERROR: Unknown function 'strr'\n"
            "syscall:read | count() by strr(args.buf)\n                          ~~~~~~~~~~~~~~\n"
            "HINT: did you mean 'str'? functions: str(ptr), str(ptr, N), join(argv), ksym(addr), "
            "usym(addr), coalesce(field, field, ...)");
}

TEST(Semantic, GlobsAreMarked) {
  Analyzed a =
      Analyze("syscall:openat | where str(args.filename) == \"/etc/*\" && comm == \"bash\"");
  const Expr& c = WhereOf(a);
  EXPECT_TRUE(c.kids[0]->is_glob);
  EXPECT_FALSE(c.kids[1]->is_glob);
  EXPECT_EQ(c.kids[0]->kids[1]->type, Type::Str(7));
  Analyzed b = Analyze("syscall:read | where \"ba?h\" != comm");
  EXPECT_TRUE(WhereOf(b).is_glob);
  Analyzed in = Analyze("syscall:read | where comm in (\"sh\", \"ba*\")");
  EXPECT_TRUE(WhereOf(in).is_glob);
  Analyzed plain = Analyze("syscall:read | where comm in (\"sh\", \"bash\")");
  EXPECT_FALSE(WhereOf(plain).is_glob);
}

TEST(Semantic, ProbeGlobsPutStarOnlyAtTheEnd) {
  EXPECT_EQ(AnalyzeError("syscall:read | where comm == \"*sh\""),
            "query:1:30-34: ERROR: Glob \"*sh\" cannot be matched inside the probe\n"
            "syscall:read | where comm == \"*sh\"\n                             ~~~~~\n"
            "HINT: a glob may use '?' anywhere but '*' only at the end, e.g. \"post*\"");
  EXPECT_EQ(AnalyzeError("syscall:read | where comm in (\"a*b\")"),
            "query:1:31-35: ERROR: Glob \"a*b\" cannot be matched inside the probe\n"
            "syscall:read | where comm in (\"a*b\")\n                              ~~~~~\n"
            "HINT: a glob may use '?' anywhere but '*' only at the end, e.g. \"post*\"");
  EXPECT_EQ(AnalyzeError("syscall:* | where probe == \"*read*\" | count() by probe"), "no error");
  EXPECT_EQ(AnalyzeError("syscall:read | where comm == \"b?sh*\""), "no error");
}

TEST(Semantic, InListTypesMatchTheLeftSide) {
  Analyzed a = Analyze("syscall:read | where ret in (-2, -13)");
  EXPECT_EQ(WhereOf(a).type, Type::Int(true));
  EXPECT_EQ(AnalyzeError("syscall:read | where pid in (1, \"a\")"),
            "query:1:33-35: ERROR: Type mismatch: found string, expected int\n"
            "syscall:read | where pid in (1, \"a\")\n                                ~~~\n"
            "HINT: 'pid' is int, so the list holds int literals");
}

TEST(Semantic, AggregateArguments) {
  Analyzed a = Analyze("syscall:read | distinct(comm), distinct(pid) as pids, hist(latency)");
  EXPECT_EQ(AggOf(a).aggs[0].arg->type, Type::Str(16));
  EXPECT_EQ(AggOf(a).aggs[2].arg->field_index, (std::vector<int>{12}));
  EXPECT_EQ(AnalyzeError("syscall:read | sum(comm)"),
            "query:1:20-23: ERROR: Type mismatch: found string, expected int\n"
            "syscall:read | sum(comm)\n                   ~~~~\nHINT: sum() takes an int");
  EXPECT_EQ(AnalyzeError("profile:99 | distinct(ustack)"),
            "query:1:23-28: ERROR: Type mismatch: found stack, expected int or string\n"
            "profile:99 | distinct(ustack)\n                      ~~~~~~\n"
            "HINT: distinct() counts distinct ints or strings");
  Analyzed p = Analyze("profile:99 | count() by ustack, comm");
  EXPECT_EQ(AggOf(p).keys[0].expr->type, Type::Stack());
}

TEST(Semantic, LhistAndQuantileBounds) {
  EXPECT_EQ(AnalyzeError("syscall:read | lhist(ret, 10, 0, 1)"),
            "query:1:16-35: ERROR: lhist() lo must be below hi\n"
            "syscall:read | lhist(ret, 10, 0, 1)\n               ~~~~~~~~~~~~~~~~~~~~\n"
            "HINT: e.g. lhist(latency, 0, 1ms, 100us)");
  EXPECT_EQ(AnalyzeError("syscall:read | lhist(ret, 0, 10, 0)"),
            "query:1:16-35: ERROR: lhist() step must be positive\n"
            "syscall:read | lhist(ret, 0, 10, 0)\n               ~~~~~~~~~~~~~~~~~~~~\n"
            "HINT: e.g. lhist(latency, 0, 1ms, 100us)");
  EXPECT_EQ(AnalyzeError("syscall:read | lhist(ret, 0, 10, 3)"),
            "query:1:16-35: ERROR: lhist() range hi - lo must be a whole number of steps\n"
            "syscall:read | lhist(ret, 0, 10, 3)\n               ~~~~~~~~~~~~~~~~~~~~\n"
            "HINT: e.g. lhist(latency, 0, 1ms, 100us)");
  EXPECT_EQ(AnalyzeError("syscall:read | lhist(ret, 0, 1001, 1)"),
            "query:1:16-37: ERROR: lhist() has 1001 buckets; at most 1000 are allowed\n"
            "syscall:read | lhist(ret, 0, 1001, 1)\n               ~~~~~~~~~~~~~~~~~~~~~~\n"
            "HINT: use a larger step, or hist() for log2 buckets");
  EXPECT_EQ(AnalyzeError("syscall:read | lhist(ret, 0, 1000, 1)"), "no error");
}

TEST(Semantic, StageRules) {
  EXPECT_EQ(AnalyzeError("syscall:read | count() | where pid == 1"),
            "query:1:26-39: ERROR: 'where' must come before the aggregate stage\n"
            "syscall:read | count() | where pid == 1\n                         ~~~~~~~~~~~~~~\n"
            "HINT: filter and sample first, e.g. syscall:read | where pid == 42 | count() by comm");
  EXPECT_EQ(AnalyzeError("syscall:read | select pid | sample 1%"),
            "query:1:29-37: ERROR: 'sample' must come before the select stage\n"
            "syscall:read | select pid | sample 1%\n                            ~~~~~~~~~\n"
            "HINT: filter and sample first, e.g. syscall:read | where pid == 42 | count() by comm");
  EXPECT_EQ(AnalyzeError("syscall:read | count() | sum(ret)"),
            "query:1:26-33: ERROR: Only one aggregate or select stage is allowed\n"
            "syscall:read | count() | sum(ret)\n                         ~~~~~~~~\n"
            "HINT: compute several aggregates in one stage, e.g. count(), avg(latency) by comm");
  EXPECT_EQ(AnalyzeError("syscall:read | top 5 | count()"),
            "query:1:16-20: ERROR: 'top' needs an aggregate stage before it\n"
            "syscall:read | top 5 | count()\n               ~~~~~\n"
            "HINT: e.g. syscall:openat | count() by comm | top 10");
  EXPECT_EQ(AnalyzeError("syscall:read | select pid | top 5"),
            "query:1:29-33: ERROR: 'top' needs an aggregate stage before it\n"
            "syscall:read | select pid | top 5\n                            ~~~~~\n"
            "HINT: e.g. syscall:openat | count() by comm | top 10");
  EXPECT_EQ(AnalyzeError("syscall:read | every 1s | select pid"),
            "query:1:16-23: ERROR: 'every' needs an aggregate stage\n"
            "syscall:read | every 1s | select pid\n               ~~~~~~~~\n"
            "HINT: every prints and resets the aggregates each window, e.g. syscall:read | "
            "count() by comm | every 1s");
  EXPECT_EQ(AnalyzeError("syscall:read | count() | for 1s | for 2s"),
            "query:1:35-40: ERROR: Only one for stage is allowed\n"
            "syscall:read | count() | for 1s | for 2s\n                                  ~~~~~~");
  EXPECT_EQ(AnalyzeError("syscall:read | sample 1% | sample 2%"),
            "query:1:28-36: ERROR: Only one sample stage is allowed\n"
            "syscall:read | sample 1% | sample 2%\n                           ~~~~~~~~~");
  EXPECT_EQ(AnalyzeError("syscall:read | where pid > 1 | where tid > 1 | sample 1/10 | count() "
                         "| top 3 | every 1s | for 10s"),
            "no error");
  EXPECT_EQ(AnalyzeError("syscall:read | for 1s"), "no error");
}

TEST(Semantic, OutputNamesAreUnique) {
  EXPECT_EQ(AnalyzeError("syscall:read | count(), count()"),
            "query:1:25-31: ERROR: Duplicate output name 'count'\n"
            "syscall:read | count(), count()\n                        ~~~~~~~\n"
            "HINT: name it with 'as', e.g. count() as count2");
  EXPECT_EQ(AnalyzeError("syscall:read | count() as n by comm as n"),
            "query:1:16-22: ERROR: Duplicate output name 'n'\n"
            "syscall:read | count() as n by comm as n\n               ~~~~~~~\n"
            "HINT: choose a different name");
  EXPECT_EQ(AnalyzeError("syscall:read | select pid, tid as pid"),
            "query:1:28-30: ERROR: Duplicate output name 'pid'\n"
            "syscall:read | select pid, tid as pid\n                           ~~~\n"
            "HINT: choose a different name");
  EXPECT_EQ(AnalyzeError("syscall:read | count() as window"),
            "query:1:16-22: ERROR: Output name 'window' is reserved\n"
            "syscall:read | count() as window\n               ~~~~~~~\n"
            "HINT: every result row has a 'window' member holding the window's end time; choose "
            "another name with 'as'");
  EXPECT_EQ(AnalyzeError("syscall:read | count(), count() as calls by comm"), "no error");
}

TEST(Semantic, IssueExamplesAnalyze) {
  for (const char* q : {
           "syscall:openat | where ret < 0 | count() as fails by comm, str(args.filename) as path "
           "| top 10",
           "syscall:read, syscall:pread64 | where comm == \"postgres\" | hist(latency) by probe | "
           "every 1s",
           "syscall:* | sample 1% | count() by comm | for 5s",
           "syscall:read | select time, pid, comm, args.count, ret  # streams raw events",
           "uprobe:/bin/bash:readline | count() by uid",
       }) {
    EXPECT_EQ(AnalyzeError(q), "no error") << q;
  }
}

TEST(Semantic, NoAggregateIsFine) {
  Analyzed a = Analyze("syscall:openat | where ret < 0");
  EXPECT_EQ(a.probes.size(), 1u);
}

}  // namespace
}  // namespace fay
