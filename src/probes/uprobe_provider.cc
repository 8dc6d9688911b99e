#include "probes/uprobe_provider.h"

#include <algorithm>
#include <set>

#include "common/strings.h"

namespace fay {
namespace {

// PATH:SYMBOL, split at the last ':' so the path may itself hold one. A missing symbol part
// means every symbol.
std::pair<std::string_view, std::string_view> Split(std::string_view pattern) {
  size_t colon = pattern.rfind(':');
  if (colon == std::string_view::npos) return {pattern, "*"};
  return {pattern.substr(0, colon), pattern.substr(colon + 1)};
}

}  // namespace

Expected<const std::vector<ElfSymbol>*> UprobeProvider::Symbols(const std::string& path) {
  auto it = cache_.find(path);
  if (it == cache_.end()) {
    FAY_ASSIGN_OR_RETURN(auto symbols, ReadFunctionSymbols(path));
    it = cache_.emplace(path, std::move(symbols)).first;
  }
  return &it->second;
}

Expected<UprobeProvider::Target> UprobeProvider::Match(std::string_view pattern) {
  auto [path_part, symbol] = Split(pattern);
  Target target;
  FAY_ASSIGN_OR_RETURN(target.path, ResolveBinaryPath(path_part));
  FAY_ASSIGN_OR_RETURN(const std::vector<ElfSymbol>* symbols, Symbols(target.path));
  std::set<uint64_t> seen;
  for (const auto& s : *symbols) {
    if (!GlobMatch(symbol, s.name)) continue;
    if (!seen.insert(s.address).second) continue;
    target.symbols.push_back(&s);
  }
  return target;
}

Expected<std::vector<ProbeInfo>> UprobeProvider::Resolve(std::string_view pattern) {
  auto [path_part, symbol] = Split(pattern);
  if (pattern.find(':') == std::string_view::npos || path_part.empty() || symbol.empty()) {
    return Error(Code::kInvalidArgument, std::string("'") + std::string(prefix()) + ":" +
                                             std::string(pattern) + "' should be " +
                                             std::string(prefix()) +
                                             ":PATH:SYMBOL, e.g. uprobe:/bin/bash:readline");
  }
  FAY_ASSIGN_OR_RETURN(Target target, Match(pattern));
  if (target.symbols.empty()) {
    auto all = Symbols(target.path);
    if (all.ok() && (*all)->empty()) {
      return Error(Code::kNotFound, "'" + target.path + "' has no function symbols (stripped?)");
    }
    return Error(Code::kNotFound, (HasGlob(symbol) ? "no function matches '" : "no function '") +
                                      std::string(symbol) + "' in " + target.path);
  }
  bool ret = kind_ == ProbeKind::kUretprobe;
  std::vector<ProbeInfo> out;
  out.reserve(target.symbols.size());
  for (const ElfSymbol* s : target.symbols) {
    ProbeInfo p;
    p.name = std::string(prefix()) + ":" + target.path + ":" + s->name;
    p.kind = kind_;
    p.path = target.path;
    p.symbol = s->name;
    p.file_offset = s->file_offset;
    p.symbol_address = s->address;
    p.symbol_size = s->size;
    p.fields = CommonFields();
    for (int i = 0; i < 6; ++i) {
      p.fields.push_back(
          {"arg" + std::to_string(i), Type::Int(true), FieldSource::kUprobeArg, 0, 8, i, "long"});
    }
    p.fields.push_back({"func", Type::Str(64), FieldSource::kFunc, 0, 64, 0, "string"});
    if (ret) {
      p.fields.push_back({"retval", Type::Int(true), FieldSource::kUprobeRet, 0, 8, 0, "long"});
      p.fields.push_back({"latency", Type::Int(false), FieldSource::kLatency, 0, 8, 0, "u64 ns"});
    }
    for (Field& f : StackFields()) p.fields.push_back(std::move(f));
    out.push_back(std::move(p));
  }
  return out;
}

Expected<std::vector<std::string>> UprobeProvider::List(std::string_view pattern) {
  FAY_ASSIGN_OR_RETURN(Target target, Match(pattern));
  std::vector<std::string> out;
  out.reserve(target.symbols.size());
  for (const ElfSymbol* s : target.symbols)
    out.push_back(std::string(prefix()) + ":" + target.path + ":" + s->name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> UprobeProvider::Nearest(std::string_view pattern, size_t n) {
  auto [path_part, symbol] = Split(pattern);
  auto path = ResolveBinaryPath(path_part);
  if (!path.ok()) return {};
  auto symbols = Symbols(*path);
  if (!symbols.ok()) return {};
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& s : **symbols) {
    // Names whose length alone puts them out of typo range are dropped before the quadratic
    // distance: C++ binaries hold tens of thousands of long mangled names.
    size_t longer = std::max(s.name.size(), symbol.size());
    size_t diff = longer - std::min(s.name.size(), symbol.size());
    if (diff * 2 > longer) continue;
    if (seen.insert(s.name).second) names.push_back(s.name);
  }
  std::vector<std::string> out = fay::Nearest(names, symbol, n);
  for (auto& s : out) s = std::string(prefix()) + ":" + *path + ":" + s;
  return out;
}

}  // namespace fay
