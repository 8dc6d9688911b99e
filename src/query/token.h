// Tokens of the stage pipeline (everything after the probe source, which is scanned raw).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/source_range.h"

namespace fay {

enum class TokKind {
  kEnd,       // end of the query
  kIdent,     // [A-Za-z_][A-Za-z0-9_]*; keywords (where, by, as, in, ...) are idents too
  kInt,       // 42, 0x2a: int_value
  kFloat,     // 0.5: float_value; text keeps the digits exactly (sample 0.5% needs them)
  kDuration,  // 100ns 10us 5ms 2s 1m 1h 1.5s: int_value in ns
  kString,    // "a\"b": str_value holds the unescaped bytes
  kOp,        // punctuation: text is the spelling ("|", "||", "==", "(", ",", ".", ...)
};

struct Token {
  TokKind kind = TokKind::kEnd;
  std::string text;  // the exact source spelling
  int64_t int_value = 0;
  double float_value = 0;
  std::string str_value;
  size_t begin = 0, end = 0;  // byte offsets into the query, end exclusive
  SourceRange range;

  bool IsOp(const char* op) const { return kind == TokKind::kOp && text == op; }
  bool IsWord(const char* word) const { return kind == TokKind::kIdent && text == word; }
};

// "end of query", "'where'", "string \"abc\"": how a token is named in "unexpected" messages.
std::string Describe(const Token& t);

}  // namespace fay
