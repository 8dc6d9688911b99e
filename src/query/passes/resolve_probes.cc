#include "query/passes/resolve_probes.h"

#include <fmt/format.h>

#include <unordered_set>

#include "common/strings.h"
#include "query/diagnostics.h"

namespace fay {

Expected<std::vector<ProbeInfo>> ResolveProbes(const Query& q, ProbeCatalog& catalog) {
  std::vector<ProbeInfo> probes;
  std::unordered_set<std::string> seen;
  for (const ProbeSpec& spec : q.sources) {
    Expected<std::vector<ProbeInfo>> found = catalog.Resolve(spec.text);
    Code code = found.ok() ? Code::kNotFound : found.status().code();
    if (code != Code::kNotFound && code != Code::kInvalidArgument) return found.status();
    if (!found.ok() || found->empty()) {
      // A malformed spec ("interval:xyz") is pointed at too, but only an unknown name gets
      // "did you mean".
      std::string message = found.ok() || found.status().message().empty()
                                ? fmt::format("Unknown probe '{}'", spec.text)
                                : found.status().message();
      // Providers write lower-case messages; diagnostics start with a capital, like the rest.
      if (!message.empty() && message[0] >= 'a' && message[0] <= 'z') message[0] -= 'a' - 'A';
      std::string hint;
      if (code == Code::kNotFound) {
        std::vector<std::string> near = catalog.Nearest(spec.text, 3);
        if (!near.empty()) hint = "did you mean: " + Join(near);
      }
      return Status(code, RenderDiagnostic(q.text, spec.range, message, hint));
    }
    for (ProbeInfo& p : *found) {
      if (seen.insert(p.name).second) probes.push_back(std::move(p));
    }
  }
  return probes;
}

}  // namespace fay
