#include "common/strings.h"

#include <algorithm>
#include <numeric>

namespace fay {

bool GlobMatch(std::string_view pattern, std::string_view s) {
  // Iterative matcher with one backtrack point: the most recent '*'. Linear in practice and
  // never exponential, unlike the naive recursive version.
  size_t p = 0, i = 0;
  size_t star = std::string_view::npos, star_i = 0;
  while (i < s.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == s[i])) {
      ++p;
      ++i;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_i = i;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      i = ++star_i;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool HasGlob(std::string_view pattern) {
  return pattern.find_first_of("*?") != std::string_view::npos;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      size_t sub = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({up + 1, row[j - 1] + 1, sub});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> Nearest(const std::vector<std::string>& candidates, std::string_view word,
                                 size_t n) {
  std::vector<std::pair<size_t, size_t>> scored;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    size_t d = EditDistance(word, candidates[i]);
    size_t longer = std::max(word.size(), candidates[i].size());
    if (d * 2 > longer) continue;
    scored.emplace_back(d, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t k = 0; k < scored.size() && out.size() < n; ++k)
    out.push_back(candidates[scored[k].second]);
  return out;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace fay
