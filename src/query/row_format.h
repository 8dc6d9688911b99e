// The `format` stage's layout of a selected row: printf's conversions, each taking the next
// selected column, plus the event's wall-clock time. `select time, pid, comm, args.sig |
// format "%T %-6d %-16s %d"` prints "14:02:07 4242   bash             15".
//
//   %[-][0][WIDTH][.PREC]CONV   CONV: d i (signed) u x X o (unsigned) c (a byte) s (any value,
//                               as the row prints it; .PREC cuts it)
//   %T  %{STRFTIME}T            the wall-clock time as HH:MM:SS, or as strftime says (live:
//                               when the row is read; a recording: the event's); no column
//   %%                          a percent sign
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/field.h"

namespace fay {

struct FormatPiece {
  std::string text;  // literal text, when conv is 0
  char conv = 0;     // d i u x X o c s T
  bool left = false, zero = false;
  int width = 0, precision = -1;
  std::string time_format;  // %T: strftime's format ("%H:%M:%S")
  int column = -1;          // the selected column it takes (not %T)
};

class RowFormat {
 public:
  // Checks `fmt` against the selected columns' types: as many conversions as columns, and each
  // numeric conversion on an int. Errors name the conversion and the column.
  static Expected<RowFormat> Parse(const std::string& fmt, const std::vector<Type>& columns,
                                   const std::vector<std::string>& names);

  // The line for one row: ints as int64_t (the column's value), every other column as the text
  // the row would print; `wall_ns` is the event's CLOCK_REALTIME time. No newline added.
  std::string Apply(const std::vector<int64_t>& ints, const std::vector<std::string>& texts,
                    uint64_t wall_ns) const;

  const std::vector<FormatPiece>& pieces() const { return pieces_; }

 private:
  std::vector<FormatPiece> pieces_;
};

}  // namespace fay
