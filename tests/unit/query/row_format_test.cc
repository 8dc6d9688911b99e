#include "query/row_format.h"

#include <gtest/gtest.h>

namespace fay {
namespace {

std::string Error(const std::string& fmt, std::vector<Type> types) {
  std::vector<std::string> names;
  for (size_t i = 0; i < types.size(); ++i) names.push_back("c" + std::to_string(i));
  auto f = RowFormat::Parse(fmt, types, names);
  return f.ok() ? "ok" : f.status().message();
}

TEST(RowFormat, ConversionsWidthsAndTime) {
  auto f = RowFormat::Parse(
      "%T|%-6d|%06d|%5s|%.3s|%x|%X|%o|%u|%c|%%|%{%Y}T",
      {Type::Int(true), Type::Int(true), Type::Str(16), Type::Str(16), Type::Int(false),
       Type::Int(false), Type::Int(false), Type::Int(true), Type::Int(true)},
      {"a", "b", "c", "d", "e", "f", "g", "h", "i"});
  ASSERT_TRUE(f.ok()) << f.status().message();
  // 2024-01-02 03:04:05 UTC, printed in local time: set TZ for the test's process.
  setenv("TZ", "UTC", 1);
  tzset();
  const uint64_t wall = 1704164645ull * 1000000000ull;
  EXPECT_EQ(f->Apply({42, -42, 0, 0, 255, 255, 8, -1, 'A'}, {"", "", "ab", "abcdef"}, wall),
            "03:04:05|42    |-00042|   ab|abc|ff|FF|10|18446744073709551615|A|%|2024");
}

TEST(RowFormat, ErrorsNameTheConversionAndColumn) {
  EXPECT_EQ(Error("%d %d", {Type::Int(true)}), "'%d' is conversion 2 but select has 1 column");
  EXPECT_EQ(Error("%d", {Type::Str(16)}), "'%d' takes an int, but column 1 (c0) is string: use %s");
  EXPECT_EQ(Error("%d", {Type::Int(true), Type::Int(true)}),
            "the format takes 1 column but select has 2");
  EXPECT_EQ(Error("%q", {}),
            "unknown conversion '%q'; conversions: %d %i %u %x %X %o %c %s, %T (wall-clock "
            "time), %%");
  EXPECT_EQ(Error("%-", {}), "'%-' ends without a conversion letter");
  EXPECT_EQ(Error("%{%H", {}), "'%{%H' has no closing '}'");
  EXPECT_EQ(Error("%{%H}d", {Type::Int(true)}),
            "a strftime format in braces belongs to %T, e.g. %{%H:%M:%S}T");
  EXPECT_EQ(Error("plain %T", {}), "ok");
}

}  // namespace
}  // namespace fay
