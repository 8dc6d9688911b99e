#include "query/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace fay {
namespace {

// The text of 1-based line `line`, without its newline; empty past the end.
std::string_view SourceLine(std::string_view source, int line) {
  size_t begin = 0;
  for (int l = 1; l < line; ++l) {
    size_t nl = source.find('\n', begin);
    if (nl == std::string_view::npos) return {};
    begin = nl + 1;
  }
  size_t end = source.find('\n', begin);
  if (end == std::string_view::npos) end = source.size();
  std::string_view s = source.substr(begin, end - begin);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

}  // namespace

std::string RenderDiagnostic(const std::string& source, SourceRange r, const std::string& message,
                             const std::string& hint) {
  int begin = std::max(1, r.col_begin);
  int end = std::max(begin, r.col_end);
  std::string out = begin == end
                        ? fmt::format("query:{}:{}: ERROR: {}", r.line, begin, message)
                        : fmt::format("query:{}:{}-{}: ERROR: {}", r.line, begin, end, message);
  std::string_view line = SourceLine(source, r.line);
  out += "\n";
  out += line;
  out += "\n";
  for (int c = 1; c < begin; ++c) {
    size_t i = static_cast<size_t>(c - 1);
    out += i < line.size() && line[i] == '\t' ? '\t' : ' ';
  }
  out.append(static_cast<size_t>(end - begin + 1), '~');
  if (!hint.empty()) out += "\nHINT: " + hint;
  return out;
}

Status QueryError(const std::string& source, SourceRange r, const std::string& message,
                  const std::string& hint) {
  return Status(Code::kInvalidArgument, RenderDiagnostic(source, r, message, hint));
}

}  // namespace fay
