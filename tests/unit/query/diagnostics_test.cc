#include "query/diagnostics.h"

#include <gtest/gtest.h>

namespace fay {
namespace {

TEST(RenderDiagnostic, RangeWithHint) {
  std::string src = "syscall:openat | where filenme == \"x\"";
  EXPECT_EQ(RenderDiagnostic(src, {1, 24, 30}, "Unknown field 'filenme' on syscall:openat",
                             "fields of syscall:openat: time, cpu"),
            "query:1:24-30: ERROR: Unknown field 'filenme' on syscall:openat\n"
            "syscall:openat | where filenme == \"x\"\n"
            "                       ~~~~~~~\n"
            "HINT: fields of syscall:openat: time, cpu");
}

TEST(RenderDiagnostic, OneColumnAndNoHint) {
  EXPECT_EQ(RenderDiagnostic("a = b", {1, 3, 3}, "Unexpected '='", ""),
            "query:1:3: ERROR: Unexpected '='\n"
            "a = b\n"
            "  ~");
}

TEST(RenderDiagnostic, PicksTheRangesLine) {
  std::string src = "syscall:read\n| where x\n| top 10";
  EXPECT_EQ(RenderDiagnostic(src, {2, 9, 9}, "Unknown field 'x'", "h"),
            "query:2:9: ERROR: Unknown field 'x'\n"
            "| where x\n"
            "        ~\n"
            "HINT: h");
  EXPECT_EQ(RenderDiagnostic(src, {3, 3, 5}, "m", ""), "query:3:3-5: ERROR: m\n| top 10\n  ~~~");
}

TEST(RenderDiagnostic, KeepsTabsAligned) {
  EXPECT_EQ(RenderDiagnostic("\tab cd", {1, 5, 6}, "m", ""),
            "query:1:5-6: ERROR: m\n\tab cd\n\t   ~~");
}

TEST(RenderDiagnostic, PastTheEndOfTheLine) {
  EXPECT_EQ(RenderDiagnostic("count(", {1, 7, 7}, "Expected ')'", ""),
            "query:1:7: ERROR: Expected ')'\ncount(\n      ~");
}

TEST(QueryError, IsInvalidArgumentWithTheRenderedText) {
  Status st = QueryError("x y", {1, 3, 3}, "Bad", "fix it");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "query:1:3: ERROR: Bad\nx y\n  ~\nHINT: fix it");
}

}  // namespace
}  // namespace fay
