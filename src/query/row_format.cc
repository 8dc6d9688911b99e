#include "query/row_format.h"

#include <fmt/format.h>
#include <time.h>

#include <cstring>

namespace fay {
namespace {

bool IsIntConv(char c) {
  return std::strchr("diuxXoc", c) != nullptr;
}

std::string Pad(std::string s, const FormatPiece& p) {
  if (static_cast<int>(s.size()) >= p.width) return s;
  const size_t fill = static_cast<size_t>(p.width) - s.size();
  if (p.left) return s + std::string(fill, ' ');
  if (p.zero && p.conv != 's' && p.conv != 'c') {
    // Zeros go after a sign: -0042.
    const size_t at = !s.empty() && s[0] == '-' ? 1 : 0;
    return s.insert(at, std::string(fill, '0'));
  }
  return std::string(fill, ' ') + s;
}

}  // namespace

Expected<RowFormat> RowFormat::Parse(const std::string& fmt, const std::vector<Type>& columns,
                                     const std::vector<std::string>& names) {
  RowFormat out;
  std::string literal;
  size_t column = 0;
  auto flush = [&] {
    if (literal.empty()) return;
    FormatPiece p;
    p.text = std::move(literal);
    literal.clear();
    out.pieces_.push_back(std::move(p));
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      literal += fmt[i];
      continue;
    }
    const size_t start = i++;
    if (i < fmt.size() && fmt[i] == '%') {
      literal += '%';
      continue;
    }
    FormatPiece p;
    for (; i < fmt.size() && (fmt[i] == '-' || fmt[i] == '0'); ++i)
      (fmt[i] == '-' ? p.left : p.zero) = true;
    for (; i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9'; ++i)
      p.width = std::min(p.width * 10 + (fmt[i] - '0'), 1000);
    if (i < fmt.size() && fmt[i] == '.') {
      p.precision = 0;
      for (++i; i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9'; ++i)
        p.precision = std::min(p.precision * 10 + (fmt[i] - '0'), 1000);
    }
    if (i < fmt.size() && fmt[i] == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos)
        return Error(Code::kInvalidArgument,
                     fmt::format("'{}' has no closing '}}'", fmt.substr(start)));
      p.time_format = fmt.substr(i + 1, close - i - 1);
      i = close + 1;
      if (i >= fmt.size() || fmt[i] != 'T')
        return Error(Code::kInvalidArgument,
                     "a strftime format in braces belongs to %T, e.g. %{%H:%M:%S}T");
    }
    if (i >= fmt.size())
      return Error(Code::kInvalidArgument,
                   fmt::format("'{}' ends without a conversion letter", fmt.substr(start)));
    p.conv = fmt[i];
    const std::string spec = fmt.substr(start, i - start + 1);
    if (p.conv == 'T') {
      if (p.time_format.empty()) p.time_format = "%H:%M:%S";
    } else if (IsIntConv(p.conv) || p.conv == 's') {
      if (column >= columns.size())
        return Error(Code::kInvalidArgument,
                     fmt::format("'{}' is conversion {} but select has {} column{}", spec,
                                 column + 1, columns.size(), columns.size() == 1 ? "" : "s"));
      if (IsIntConv(p.conv) && columns[column].kind != TypeKind::kInt)
        return Error(Code::kInvalidArgument,
                     fmt::format("'{}' takes an int, but column {} ({}) is {}: use %s", spec,
                                 column + 1, names[column], TypeName(columns[column])));
      p.column = static_cast<int>(column++);
    } else {
      return Error(Code::kInvalidArgument,
                   fmt::format("unknown conversion '{}'; conversions: %d %i %u %x %X %o %c %s, "
                               "%T (wall-clock time), %%",
                               spec));
    }
    flush();
    out.pieces_.push_back(std::move(p));
  }
  flush();
  if (column != columns.size())
    return Error(Code::kInvalidArgument,
                 fmt::format("the format takes {} column{} but select has {}", column,
                             column == 1 ? "" : "s", columns.size()));
  return out;
}

std::string RowFormat::Apply(const std::vector<int64_t>& ints,
                             const std::vector<std::string>& texts, uint64_t wall_ns) const {
  std::string line;
  for (const FormatPiece& p : pieces_) {
    if (!p.conv) {
      line += p.text;
      continue;
    }
    std::string s;
    if (p.conv == 'T') {
      time_t secs = static_cast<time_t>(wall_ns / 1000000000);
      struct tm tm {};
      localtime_r(&secs, &tm);
      char buf[256];
      size_t n = strftime(buf, sizeof buf, p.time_format.c_str(), &tm);
      s.assign(buf, n);
    } else {
      const size_t c = static_cast<size_t>(p.column);
      const int64_t v = c < ints.size() ? ints[c] : 0;
      const auto u = static_cast<uint64_t>(v);
      switch (p.conv) {
        case 'd':
        case 'i':
          s = std::to_string(v);
          break;
        case 'u':
          s = std::to_string(u);
          break;
        case 'x':
          s = fmt::format("{:x}", u);
          break;
        case 'X':
          s = fmt::format("{:X}", u);
          break;
        case 'o':
          s = fmt::format("{:o}", u);
          break;
        case 'c':
          s = std::string(1, static_cast<char>(v));
          break;
        default:  // 's'
          s = c < texts.size() ? texts[c] : "";
          if (p.precision >= 0 && static_cast<int>(s.size()) > p.precision)
            s.resize(static_cast<size_t>(p.precision));
          break;
      }
    }
    line += Pad(std::move(s), p);
  }
  return line;
}

}  // namespace fay
