// Small string helpers shared by the layers: glob matching for probe and value patterns, and
// edit distance for "did you mean" hints.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fay {

// Shell-style match of the whole of s: '*' matches any run (also empty), '?' one character.
// There is no escaping and no character classes: probe names and comm values never need them.
bool GlobMatch(std::string_view pattern, std::string_view s);

// True when the pattern contains '*' or '?'.
bool HasGlob(std::string_view pattern);

// Levenshtein distance (insert, delete and substitute each cost 1), in bytes.
size_t EditDistance(std::string_view a, std::string_view b);

// Up to n candidates closest to word by edit distance, closest first; ties keep the candidates'
// order. Candidates too far away to be a plausible typo (more than half of the longer name
// changed) are left out, so the result may be shorter than n.
std::vector<std::string> Nearest(const std::vector<std::string>& candidates, std::string_view word,
                                 size_t n);

// "a, b, c".
std::string Join(const std::vector<std::string>& parts, std::string_view sep = ", ");

// s without leading and trailing spaces, tabs, CR and LF.
std::string_view Trim(std::string_view s);

}  // namespace fay
