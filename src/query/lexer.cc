#include "query/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <regex>

#include "common/strings.h"
#include "query/diagnostics.h"

namespace fay {
namespace {

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Nanoseconds per unit of a duration suffix; 0 when the suffix is not a unit.
int64_t UnitNs(std::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us") return 1000;
  if (unit == "ms") return 1000 * 1000;
  if (unit == "s") return 1000 * 1000 * 1000;
  if (unit == "m") return 60LL * 1000 * 1000 * 1000;
  if (unit == "h") return 3600LL * 1000 * 1000 * 1000;
  return 0;
}

// What a bpftrace map assignment at the start of `s` reads as in fay: `@x[comm] = count()` is
// `count() as x by comm`; empty when `s` is not one.
std::string MapAssignmentAsStage(std::string_view s) {
  static const std::regex kAssign(R"(^@(\w*)\s*(?:\[([^\]]*)\])?\s*=\s*(\w+)\(([^)]*)\))");
  std::cmatch m;
  if (!std::regex_search(s.data(), s.data() + s.size(), m, kAssign)) return "";
  std::string stage = m[3].str() + "(" + m[4].str() + ")";
  if (m[1].length() > 0) stage += " as " + m[1].str();
  if (m[2].length() > 0) stage += " by " + m[2].str();
  return stage;
}

std::string Printable(char c) {
  if (std::isprint(static_cast<unsigned char>(c))) return std::string(1, c);
  return fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
}

constexpr const char* kTwoCharOps[] = {"||", "&&", "==", "!=", "<=", ">=", "<<", ">>"};
constexpr std::string_view kOneCharOps = "|&^<>+-*/%!~(),.[];";

}  // namespace

std::string Describe(const Token& t) {
  switch (t.kind) {
    case TokKind::kEnd:
      return "end of query";
    case TokKind::kString:
      return "string " + t.text;
    default:
      return "'" + t.text + "'";
  }
}

Lexer::Lexer(const std::string& text) : text_(text) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

SourceRange Lexer::RangeOf(size_t begin, size_t end) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), begin);
  size_t line_index = static_cast<size_t>(it - line_starts_.begin()) - 1;
  size_t start = line_starts_[line_index];
  size_t line_end =
      line_index + 1 < line_starts_.size() ? line_starts_[line_index + 1] - 1 : text_.size();
  SourceRange r;
  r.line = static_cast<int>(line_index) + 1;
  r.col_begin = static_cast<int>(begin - start) + 1;
  size_t last = end > begin ? std::min(end - 1, std::max(line_end, begin + 1) - 1) : begin;
  r.col_end = std::max(r.col_begin, static_cast<int>(last - start) + 1);
  return r;
}

Status Lexer::Fail(size_t begin, size_t end, const std::string& message,
                   const std::string& hint) const {
  return QueryError(text_, RangeOf(begin, end), message, hint);
}

Expected<std::vector<ProbeSpec>> Lexer::ScanSource() {
  std::vector<ProbeSpec> specs;
  // The current piece: [first, last) of its non-blank text; npos while empty.
  size_t first = std::string::npos, last = 0;
  bool gap = false;  // whitespace seen after the piece's text
  auto finish = [&](size_t at, bool more) -> Status {
    if (first == std::string::npos) {
      if (more || !specs.empty())
        return Fail(at, at + 1, "Expected a probe before ','",
                    "probes are separated by ',', e.g. syscall:read, syscall:write");
      return Fail(at, at + 1, "Expected a probe",
                  "a query starts with probes, e.g. syscall:openat | count() by comm");
    }
    specs.push_back({text_.substr(first, last - first), RangeOf(first, last)});
    first = std::string::npos;
    gap = false;
    return Status::Ok();
  };
  while (pos_ < text_.size() && text_[pos_] != '|' && text_[pos_] != ';') {
    char c = text_[pos_];
    if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      if (first != std::string::npos) gap = true;
      continue;
    }
    if (c == ',') {
      FAY_RETURN_IF_ERROR(finish(pos_, true));
      ++pos_;
      continue;
    }
    if (IsSpace(c)) {
      if (first != std::string::npos) gap = true;
      ++pos_;
      continue;
    }
    if (gap) {
      size_t word_end = pos_;
      while (word_end < text_.size() && !IsSpace(text_[word_end]) &&
             std::string_view(",|;#").find(text_[word_end]) == std::string_view::npos)
        ++word_end;
      const std::string probe = text_.substr(first, last - first);
      return Fail(pos_, word_end,
                  fmt::format("Unexpected '{}' after probe '{}'",
                              text_.substr(pos_, word_end - pos_), probe),
                  BpftraceHint(probe, pos_));
    }
    if (first == std::string::npos) first = pos_;
    last = ++pos_;
  }
  FAY_RETURN_IF_ERROR(finish(pos_, false));
  return specs;
}

// The hint for something after a probe: bpftrace's /filter/ and { action } have fay forms.
std::string Lexer::BpftraceHint(const std::string& probe, size_t at) const {
  const std::string_view rest = std::string_view(text_).substr(at);
  if (!rest.empty() && rest[0] == '/') {
    const size_t close = rest.find('/', 1);
    if (close != std::string_view::npos)
      return fmt::format("bpftrace's /filter/ is a where stage: {} | where {} | ...", probe,
                         Trim(rest.substr(1, close - 1)));
  }
  if (!rest.empty() && rest[0] == '{') {
    const size_t at_sign = rest.find('@');
    const std::string stage =
        at_sign == std::string_view::npos ? "" : MapAssignmentAsStage(rest.substr(at_sign));
    // printf of each event is a select, which prints every event's fields.
    const bool prints = stage.empty() && rest.find("printf") != std::string_view::npos;
    return fmt::format("a bpftrace action block is a stage after '|': {} | {}", probe,
                       !stage.empty() ? stage
                       : prints       ? "select comm, pid"
                                      : "count() by comm");
  }
  if (!probe.empty() && probe[0] == '@') {
    const std::string stage = MapAssignmentAsStage(std::string_view(text_).substr(0));
    if (!stage.empty())
      return "fay has no @maps: the aggregate is a stage after the probes: PROBE | " + stage;
  }
  return "separate probes with ',' and stages with '|', e.g. syscall:read | count()";
}

void Lexer::SkipSpaceAndComments() {
  while (pos_ < text_.size()) {
    if (IsSpace(text_[pos_])) {
      ++pos_;
    } else if (text_[pos_] == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

Expected<Token> Lexer::Next() {
  SkipSpaceAndComments();
  Token t;
  size_t begin = pos_;
  if (pos_ >= text_.size()) {
    // Point just past the last real token, not at a trailing newline or comment.
    size_t at = text_.size();
    while (at > 0 && IsSpace(text_[at - 1])) --at;
    t.kind = TokKind::kEnd;
    t.begin = t.end = at;
    t.range = RangeOf(at, at);
    return t;
  }
  char c = text_[pos_];
  if (IsIdentStart(c)) {
    while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
    t.kind = TokKind::kIdent;
  } else if (IsDigit(c)) {
    return LexNumber(begin);
  } else if (c == '"') {
    return LexString(begin);
  } else {
    std::string_view two = std::string_view(text_).substr(pos_, 2);
    bool matched = false;
    for (const char* op : kTwoCharOps) {
      if (two == op) {
        pos_ += 2;
        matched = true;
        break;
      }
    }
    if (two == "->") {
      // C's and bpftrace's args->filename.
      size_t l = begin, r = begin + 2;
      while (l > 0 && IsIdentChar(text_[l - 1])) --l;
      while (r < text_.size() && IsIdentChar(text_[r])) ++r;
      const std::string left = text_.substr(l, begin - l),
                        right = text_.substr(begin + 2, r - begin - 2);
      return Fail(begin, begin + 2, "Unexpected '->'",
                  fmt::format("fay reaches a field with '.': {}.{}", left.empty() ? "args" : left,
                              right.empty() ? "filename" : right));
    }
    if (!matched) {
      if (c == '@') {
        const std::string stage = MapAssignmentAsStage(std::string_view(text_).substr(begin));
        return Fail(begin, begin + 1, "Unexpected character '@'",
                    stage.empty()
                        ? "fay has no @maps: aggregate with a stage, e.g. | count() by comm"
                        : "fay has no @maps: the aggregate is a stage: " + stage);
      }
      if (c == '=') return Fail(begin, begin + 1, "Unexpected '='", "compare with '=='");
      if (c == '\'') return Fail(begin, begin + 1, "Unexpected '''", "strings use double quotes");
      if (kOneCharOps.find(c) == std::string_view::npos)
        return Fail(begin, begin + 1, fmt::format("Unexpected character '{}'", Printable(c)));
      ++pos_;
    }
    t.kind = TokKind::kOp;
  }
  t.text = text_.substr(begin, pos_ - begin);
  t.begin = begin;
  t.end = pos_;
  t.range = RangeOf(begin, pos_);
  return t;
}

Expected<Token> Lexer::LexNumber(size_t begin) {
  Token t;
  t.begin = begin;
  auto finish = [&](TokKind kind) {
    t.kind = kind;
    t.end = pos_;
    t.text = text_.substr(begin, pos_ - begin);
    t.range = RangeOf(begin, pos_);
    return t;
  };
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (text_[pos_] == '0' && pos_ + 1 < text_.size() && (text_[pos_ + 1] | 0x20) == 'x') {
    pos_ += 2;
    uint64_t v = 0;
    size_t digits = 0;
    while (pos_ < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
      int d = IsDigit(text_[pos_]) ? text_[pos_] - '0' : (text_[pos_] | 0x20) - 'a' + 10;
      if (v > (kMax - static_cast<uint64_t>(d)) / 16) {
        while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
        return Fail(begin, pos_, "Integer literal out of range",
                    "the largest is 0x7fffffffffffffff");
      }
      v = v * 16 + static_cast<uint64_t>(d);
      ++pos_;
      ++digits;
    }
    if (digits == 0 || (pos_ < text_.size() && IsIdentChar(text_[pos_]))) {
      while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
      return Fail(begin, pos_,
                  fmt::format("Invalid hex literal '{}'", text_.substr(begin, pos_ - begin)));
    }
    t.int_value = static_cast<int64_t>(v);
    return finish(TokKind::kInt);
  }

  // Decimal: mantissa holds every digit, scale the power of ten of the fraction, so 1.5s is
  // computed exactly as 15 * 1e9 / 10.
  unsigned __int128 mantissa = 0;
  unsigned __int128 scale = 1;
  bool too_big = false;
  auto digit_run = [&](bool fraction) {
    while (pos_ < text_.size() && IsDigit(text_[pos_])) {
      mantissa = mantissa * 10 + static_cast<unsigned>(text_[pos_] - '0');
      if (fraction) scale *= 10;
      if (mantissa > kMax || scale > kMax) too_big = true;
      ++pos_;
    }
  };
  digit_run(false);
  bool has_fraction = false;
  if (pos_ + 1 < text_.size() && text_[pos_] == '.' && IsDigit(text_[pos_ + 1])) {
    has_fraction = true;
    ++pos_;
    digit_run(true);
  }
  size_t suffix_begin = pos_;
  while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
  std::string_view suffix = std::string_view(text_).substr(suffix_begin, pos_ - suffix_begin);
  if (too_big) return Fail(begin, pos_, "Number literal out of range");
  if (!suffix.empty()) {
    int64_t unit = UnitNs(suffix);
    if (unit == 0)
      return Fail(suffix_begin, pos_, fmt::format("Unknown suffix '{}' on a number", suffix),
                  "durations take ns, us, ms, s, m or h, e.g. 100ms");
    unsigned __int128 total = mantissa * static_cast<unsigned __int128>(unit);
    if (total % scale != 0)
      return Fail(begin, pos_, "Duration is not a whole number of nanoseconds");
    total /= scale;
    if (total > kMax) return Fail(begin, pos_, "Duration out of range");
    t.int_value = static_cast<int64_t>(total);
    return finish(TokKind::kDuration);
  }
  if (has_fraction) {
    t.float_value = std::strtod(text_.substr(begin, pos_ - begin).c_str(), nullptr);
    return finish(TokKind::kFloat);
  }
  t.int_value = static_cast<int64_t>(mantissa);
  return finish(TokKind::kInt);
}

Expected<Token> Lexer::LexString(size_t begin) {
  Token t;
  t.begin = begin;
  ++pos_;  // the opening quote
  std::string value;
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n') {
      return Fail(begin, pos_, "Unterminated string", "close the string with '\"'");
    }
    char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      break;
    }
    if (c == '\\') {
      char e = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
      switch (e) {
        case '"':
          value += '"';
          break;
        case '\\':
          value += '\\';
          break;
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        default:
          return Fail(pos_, pos_ + 2, fmt::format("Unknown escape '\\{}'", Printable(e)),
                      "strings take \\\" \\\\ \\n and \\t");
      }
      pos_ += 2;
      continue;
    }
    value += c;
    ++pos_;
  }
  t.kind = TokKind::kString;
  t.str_value = std::move(value);
  t.end = pos_;
  t.text = text_.substr(begin, pos_ - begin);
  t.range = RangeOf(begin, pos_);
  return t;
}

}  // namespace fay
