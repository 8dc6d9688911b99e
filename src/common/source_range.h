#pragma once

namespace fay {

// A span of query text. Lines and columns are 1-based; col_end is inclusive, so a one-character
// token has col_begin == col_end. Diagnostics render it as "query:LINE:BEGIN-END".
struct SourceRange {
  int line = 1;
  int col_begin = 1;
  int col_end = 1;
};

}  // namespace fay
