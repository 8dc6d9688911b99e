#include "common/strings.h"

#include <gtest/gtest.h>

namespace fay {
namespace {

TEST(GlobMatch, LiteralsMustMatchWhole) {
  EXPECT_TRUE(GlobMatch("bash", "bash"));
  EXPECT_FALSE(GlobMatch("bash", "bas"));
  EXPECT_FALSE(GlobMatch("bash", "bashx"));
  EXPECT_TRUE(GlobMatch("", ""));
  EXPECT_FALSE(GlobMatch("", "a"));
}

TEST(GlobMatch, StarMatchesAnyRunIncludingEmpty) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("*", "anything"));
  EXPECT_TRUE(GlobMatch("mall*", "malloc"));
  EXPECT_TRUE(GlobMatch("mall*", "mall"));
  EXPECT_FALSE(GlobMatch("mall*", "xmalloc"));
  EXPECT_TRUE(GlobMatch("*read*", "pread64"));
  EXPECT_TRUE(GlobMatch("sys_*_openat", "sys_enter_openat"));
  EXPECT_FALSE(GlobMatch("sys_*_openat", "sys_enter_openat2"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXbYbZ"));
  EXPECT_TRUE(GlobMatch("**x", "abx"));
}

TEST(GlobMatch, QuestionMatchesExactlyOne) {
  EXPECT_TRUE(GlobMatch("read?", "readv"));
  EXPECT_FALSE(GlobMatch("read?", "read"));
  EXPECT_FALSE(GlobMatch("read?", "readvv"));
  EXPECT_TRUE(GlobMatch("?*", "x"));
  EXPECT_FALSE(GlobMatch("?*", ""));
}

TEST(GlobMatch, BacktracksWithoutBlowingUp) {
  std::string s(2000, 'a');
  EXPECT_FALSE(GlobMatch("*a*a*a*a*a*a*a*b", s));
  EXPECT_TRUE(GlobMatch("*a*a*a*a*a*a*a*a", s));
}

TEST(HasGlob, SeesStarAndQuestion) {
  EXPECT_TRUE(HasGlob("ba*"));
  EXPECT_TRUE(HasGlob("b?sh"));
  EXPECT_FALSE(HasGlob("bash"));
}

TEST(EditDistance, ClassicValues) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("filenme", "filename"), 1u);
  EXPECT_EQ(EditDistance("opnat", "openat"), 1u);
  EXPECT_EQ(EditDistance("flaw", "lawn"), 2u);
  EXPECT_EQ(EditDistance("same", "same"), 0u);
}

TEST(Nearest, ClosestFirstTiesInOrderFarOnesDropped) {
  std::vector<std::string> c = {"openat", "open", "close", "read", "openat2", "xyzzy"};
  EXPECT_EQ(Nearest(c, "opnat", 3), (std::vector<std::string>{"openat", "openat2"}));
  EXPECT_EQ(Nearest(c, "opem", 3), (std::vector<std::string>{"open", "openat"}));
  EXPECT_EQ(Nearest(c, "opnat", 1), (std::vector<std::string>{"openat"}));
  EXPECT_EQ(Nearest(c, "completelydifferent", 3), std::vector<std::string>{});
  EXPECT_EQ(Nearest({}, "x", 3), std::vector<std::string>{});
}

TEST(Join, Separates) {
  EXPECT_EQ(Join({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(Join({"a"}, "|"), "a");
  EXPECT_EQ(Join({}), "");
}

TEST(Trim, StripsBlanks) {
  EXPECT_EQ(Trim("  a b \t\n"), "a b");
  EXPECT_EQ(Trim("   "), "");
  EXPECT_EQ(Trim("x"), "x");
}

}  // namespace
}  // namespace fay
