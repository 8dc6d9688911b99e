// The query lexer. The probe source is scanned raw, because probe specs contain characters that
// are operators elsewhere ('/', '*', ':', '-', '?'). The stages after the first top-level '|'
// are tokenized on demand, so the first error in source order is the one reported.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "query/ast.h"
#include "query/token.h"

namespace fay {

class Lexer {
 public:
  explicit Lexer(const std::string& text);

  // Scans the probe specs from the start of the query up to the first '|' (or the end), split
  // on ',' and trimmed. '#' comments are skipped. Leaves the lexer at that '|'.
  Expected<std::vector<ProbeSpec>> ScanSource();

  // The next token of the stage pipeline; kEnd at the end, again and again.
  Expected<Token> Next();

  // The range of bytes [begin, end) as a SourceRange on begin's line. A range that crosses
  // lines is cut at the end of its first line.
  SourceRange RangeOf(size_t begin, size_t end) const;

  const std::string& text() const { return text_; }

 private:
  void SkipSpaceAndComments();
  Expected<Token> LexNumber(size_t begin);
  Expected<Token> LexString(size_t begin);
  std::string BpftraceHint(const std::string& probe, size_t at) const;
  Status Fail(size_t begin, size_t end, const std::string& message,
              const std::string& hint = "") const;

  std::string text_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
};

}  // namespace fay
