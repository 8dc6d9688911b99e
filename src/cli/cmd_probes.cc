// fay probes [PATTERN]: lists probes, and with -v (or a single match) their typed fields.
#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/strings.h"
#include "probes/catalog.h"
#include "schema/field.h"

namespace fay::cli {
namespace {

struct ProbesOptions {
  std::string pattern;
  bool verbose = false;
};

bool HasProvider(const std::string& pattern, const std::vector<std::string>& providers) {
  size_t colon = pattern.find(':');
  if (colon == std::string::npos) return false;
  std::string prefix = pattern.substr(0, colon);
  for (const auto& p : providers)
    if (p == prefix) return true;
  return false;
}

// Without a provider, PATTERN searches syscalls and tracepoints: "open*" is syscall:open* and
// tracepoint:*:open*, "sched:*" is tracepoint:sched:*.
std::vector<std::string> Specs(const std::string& pattern,
                               const std::vector<std::string>& providers) {
  if (pattern.empty()) return {"syscall:*", "tracepoint:*:*"};
  if (HasProvider(pattern, providers)) return {pattern};
  size_t colon = pattern.find(':');
  if (colon != std::string::npos) {
    // Other tools' providers (kprobe:, fentry:) get the catalog's own explanation.
    if (IsForeignProvider(std::string_view(pattern).substr(0, colon))) return {pattern};
    return {"tracepoint:" + pattern};
  }
  return {"syscall:" + pattern, "tracepoint:*:" + pattern};
}

void PrintFields(const ProbeInfo& probe) {
  std::vector<const Field*> own;
  for (const auto& f : probe.fields) {
    bool common = false;
    for (const auto& c : CommonFields()) common |= c.name == f.name;
    if (!common) own.push_back(&f);
  }
  size_t name_w = 0, type_w = 0;
  for (const Field* f : own) {
    name_w = std::max(name_w, f->name.size());
    type_w = std::max(type_w, TypeName(f->type).size());
  }
  for (const Field* f : own) {
    fmt::print("    {:<{}}  {:<{}}  ({})\n", f->name, name_w, TypeName(f->type), type_w, f->c_type);
  }
  std::vector<std::string> common;
  for (const auto& c : CommonFields()) common.push_back(c.name);
  fmt::print("    + common fields: {}\n", Join(common));
}

int Run(const ProbesOptions& opts) {
  SystemCatalog catalog;
  std::vector<std::string> specs = Specs(std::string(Trim(opts.pattern)), catalog.ProviderNames());
  std::vector<std::string> names;
  Status first_error;
  for (const auto& spec : specs) {
    auto listed = catalog.List(spec);
    if (!listed.ok()) {
      if (first_error.ok()) first_error = listed.status();
      continue;
    }
    names.insert(names.end(), listed->begin(), listed->end());
  }
  if (names.empty()) {
    if (!first_error.ok() && first_error.code() != Code::kNotFound) {
      fmt::print(stderr, "fay: error: {}\n", first_error.message());
      return 1;
    }
    // Resolve words the failure best ("this kernel has no sys_enter_X tracepoint").
    Status why = first_error;
    if (why.ok()) why = catalog.Resolve(specs.front()).status();
    if (why.ok()) why = Error(Code::kNotFound, "no probe matches '" + opts.pattern + "'");
    fmt::print(stderr, "fay: error: {}\n", why.message());
    std::vector<std::string> near = catalog.Nearest(specs.front(), 5);
    if (!near.empty()) fmt::print(stderr, "did you mean: {}\n", Join(near));
    return 1;
  }
  bool details = opts.verbose || names.size() == 1;
  for (const auto& name : names) {
    if (!details) {
      fmt::print("{}\n", name);
      continue;
    }
    auto probes = catalog.Resolve(name);
    if (!probes.ok()) {
      fmt::print(stderr, "fay: error: {}\n", probes.status().message());
      return 1;
    }
    for (const auto& p : *probes) {
      fmt::print("{}\n", p.name);
      PrintFields(p);
    }
  }
  return 0;
}

}  // namespace

Runner RegisterProbes(CLI::App& app) {
  auto opts = std::make_shared<ProbesOptions>();
  CLI::App* cmd = app.add_subcommand("probes", "List probes and their typed fields");
  cmd->add_option("pattern", opts->pattern,
                  "e.g. 'syscall:read*', 'tracepoint:sched:*', 'uprobe:/bin/bash:read*', 'open*'");
  cmd->add_flag("-v,--verbose", opts->verbose, "show every matching probe's fields");
  return [opts] { return Run(*opts); };
}

}  // namespace fay::cli
