#include "engine/eval.h"

#include <gtest/gtest.h>

#include "plan_builder.h"

namespace fay {
namespace {

using testing::PlanBuilder;

class EvalTest : public ::testing::Test {
 protected:
  Value Eval(Expr* e, const Event& ev) {
    auto v = EvalExpr(*e, ev, b.plan.probes[ev.probe_index]);
    EXPECT_TRUE(v.ok()) << v.status().message();
    return v.ok() ? *v : Value();
  }
  int64_t IntOf(Expr* e) { return std::get<int64_t>(Eval(e, ev)); }
  std::string StrOf(Expr* e) { return std::get<std::string>(Eval(e, ev)); }

  PlanBuilder b;
  Event ev = b.Ev(0, 42, "bash", /*fd=*/-7, /*count=*/5);
};

TEST_F(EvalTest, Fields) {
  EXPECT_EQ(IntOf(b.Field("pid")), 42);
  EXPECT_EQ(IntOf(b.Field("args.fd")), -7);
  EXPECT_EQ(StrOf(b.Field("comm")), "bash");
  EXPECT_EQ(StrOf(b.Field("probe")), "syscall:read");
  Event w = b.Ev(1, 1, "x");
  EXPECT_EQ(std::get<std::string>(Eval(b.Field("probe"), w)), "syscall:write");
}

TEST_F(EvalTest, SignedArithmeticWraps) {
  EXPECT_EQ(IntOf(b.Bin("/", b.Field("args.fd"), b.Int(2))), -3);
  EXPECT_EQ(IntOf(b.Bin("%", b.Field("args.fd"), b.Int(2))), -1);
  EXPECT_EQ(IntOf(b.Bin("+", b.Int(INT64_MAX), b.Int(1))), INT64_MIN);
  EXPECT_EQ(IntOf(b.Bin("*", b.Int(INT64_MIN), b.Int(-1))), INT64_MIN);
  EXPECT_EQ(IntOf(b.Bin("/", b.Int(INT64_MIN), b.Int(-1))), INT64_MIN);
  EXPECT_EQ(IntOf(b.Bin("%", b.Int(INT64_MIN), b.Int(-1))), 0);
  EXPECT_EQ(IntOf(b.Unary("-", b.Int(INT64_MIN))), INT64_MIN);
  EXPECT_EQ(IntOf(b.Unary("~", b.Int(0))), -1);
  EXPECT_EQ(IntOf(b.Unary("!", b.Int(5))), 0);
  EXPECT_EQ(IntOf(b.Unary("!", b.Int(0))), 1);
}

TEST_F(EvalTest, DivisionByZeroFollowsEbpf) {
  EXPECT_EQ(IntOf(b.Bin("/", b.Int(17), b.Int(0))), 0);
  EXPECT_EQ(IntOf(b.Bin("%", b.Int(17), b.Int(0))), 17);
  EXPECT_EQ(IntOf(b.Bin("%", b.Int(-17), b.Int(0))), -17);
}

TEST_F(EvalTest, UnsignedOnlyWhenBothOperandsAre) {
  Event e = b.Ev(0, 1, "x", 0, /*count=*/-1);  // count = 2^64 - 1
  auto at = [&](Expr* x) { return std::get<int64_t>(Eval(x, e)); };
  // Both unsigned: unsigned comparison and division.
  EXPECT_EQ(at(b.Bin(">", b.Field("args.count"), b.Int(5, false))), 1);
  EXPECT_EQ(at(b.Bin("/", b.Field("args.count"), b.Int(2, false))), INT64_MAX);
  EXPECT_EQ(at(b.Bin("%", b.Field("args.count"), b.Int(10, false))), 5);  // 18446744073709551615
  // A signed operand makes it signed: -1 > 5 is false.
  EXPECT_EQ(at(b.Bin(">", b.Field("args.count"), b.Int(5))), 0);
  EXPECT_EQ(at(b.Bin("/", b.Field("args.count"), b.Int(2))), 0);
}

TEST_F(EvalTest, ShiftsFollowTheLeftType) {
  EXPECT_EQ(IntOf(b.Bin(">>", b.Int(-16), b.Int(2))), -4);
  EXPECT_EQ(IntOf(b.Bin(">>", b.Int(-16, false), b.Int(60))), 15);
  EXPECT_EQ(IntOf(b.Bin("<<", b.Int(1), b.Int(65))), 2);  // the count is masked to 6 bits
  EXPECT_EQ(IntOf(b.Bin("&", b.Int(12), b.Int(10))), 8);
  EXPECT_EQ(IntOf(b.Bin("|", b.Int(12), b.Int(10))), 14);
  EXPECT_EQ(IntOf(b.Bin("^", b.Int(12), b.Int(10))), 6);
}

TEST_F(EvalTest, LogicalOperatorsGiveZeroOrOne) {
  EXPECT_EQ(IntOf(b.Bin("&&", b.Int(7), b.Int(9))), 1);
  EXPECT_EQ(IntOf(b.Bin("&&", b.Int(7), b.Int(0))), 0);
  EXPECT_EQ(IntOf(b.Bin("||", b.Int(0), b.Int(-3))), 1);
  EXPECT_EQ(IntOf(b.Bin("||", b.Int(0), b.Int(0))), 0);
  EXPECT_EQ(IntOf(b.Bin("<=", b.Int(-1), b.Int(0))), 1);
  EXPECT_EQ(IntOf(b.Bin(">=", b.Int(-1), b.Int(0))), 0);
  EXPECT_EQ(IntOf(b.Bin("!=", b.Int(3), b.Int(3))), 0);
}

TEST_F(EvalTest, StringsAndGlobs) {
  EXPECT_EQ(IntOf(b.Bin("==", b.Field("comm"), b.Str("bash"))), 1);
  EXPECT_EQ(IntOf(b.Bin("!=", b.Field("comm"), b.Str("bas"))), 1);
  EXPECT_EQ(IntOf(b.Bin("==", b.Field("comm"), b.Str("ba*"))), 1);
  EXPECT_EQ(IntOf(b.Bin("==", b.Field("comm"), b.Str("?ash"))), 1);
  EXPECT_EQ(IntOf(b.Bin("==", b.Field("comm"), b.Str("d*"))), 0);
  EXPECT_EQ(IntOf(b.Bin("!=", b.Field("comm"), b.Str("d*"))), 1);
  EXPECT_EQ(IntOf(b.Bin("==", b.Field("probe"), b.Str("syscall:re*"))), 1);
  EXPECT_EQ(IntOf(b.In(b.Field("comm"), {b.Str("sh"), b.Str("bash")})), 1);
  EXPECT_EQ(IntOf(b.In(b.Field("comm"), {b.Str("sh"), b.Str("b*")})), 1);
  EXPECT_EQ(IntOf(b.In(b.Field("pid"), {b.Int(1), b.Int(2)})), 0);
  EXPECT_EQ(IntOf(b.In(b.Field("pid"), {b.Int(1), b.Int(42)})), 1);
}

TEST_F(EvalTest, StringsAreBoundedByTheirType) {
  // comm is char[16]: the probe sees at most 15 bytes.
  Event e = b.Ev(0, 1, "averyveryverylongname");
  EXPECT_EQ(std::get<std::string>(Eval(b.Field("comm"), e)), "averyveryverylo");
  EXPECT_EQ(std::get<int64_t>(Eval(b.Bin("==", b.Field("comm"), b.Str("averyveryverylo")), e)), 1);
  EXPECT_EQ(std::get<std::string>(Eval(b.Field("comm"), b.Ev(0, 1, std::string("ab\0cd", 5)))),
            "ab");
}

TEST_F(EvalTest, StrCallTruncates) {
  Event e = b.Ev(0, 1, "cat", 0, 0, "/etc/passwd");
  EXPECT_EQ(std::get<std::string>(Eval(b.StrCall(b.Field("args.filename"), 64), e)), "/etc/passwd");
  EXPECT_EQ(std::get<std::string>(Eval(b.StrCall(b.Field("args.filename"), 5), e)), "/etc");
  e.user_strings.clear();  // unreadable
  EXPECT_EQ(std::get<std::string>(Eval(b.StrCall(b.Field("args.filename"), 64), e)), "");
}

TEST_F(EvalTest, UnresolvedFieldIsAnError) {
  Expr* f = b.Field("pid");
  f->field_index.resize(1);  // resolved for probe 0 only
  Event w = b.Ev(1, 1, "x");
  EXPECT_FALSE(EvalExpr(*f, w, b.plan.probes[1]).ok());
  EXPECT_FALSE(EvalExpr(*b.Bin("==", b.Field("comm"), b.Int(1)), ev, b.plan.probes[0]).ok());
}

}  // namespace
}  // namespace fay
