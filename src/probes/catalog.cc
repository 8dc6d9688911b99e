#include "probes/catalog.h"

#include "common/strings.h"
#include "probes/interval_provider.h"
#include "probes/profile_provider.h"
#include "probes/software_provider.h"
#include "probes/syscall_provider.h"
#include "probes/tracepoint_provider.h"
#include "probes/uprobe_provider.h"

namespace fay {

bool IsForeignProvider(std::string_view prefix) {
  for (std::string_view p : {"kprobe", "kretprobe", "fentry", "fexit", "rawtracepoint", "usdt",
                             "hardware", "software"}) {
    if (prefix == p) return true;
  }
  return false;
}

SystemCatalog::SystemCatalog(std::string tracefs_root) {
  providers_.push_back(std::make_unique<SyscallProvider>(tracefs_root));
  providers_.push_back(std::make_unique<TracepointProvider>(tracefs_root));
  providers_.push_back(std::make_unique<UprobeProvider>(ProbeKind::kUprobe));
  providers_.push_back(std::make_unique<UprobeProvider>(ProbeKind::kUretprobe));
  providers_.push_back(std::make_unique<IntervalProvider>());
  providers_.push_back(std::make_unique<ProfileProvider>());
  providers_.push_back(std::make_unique<SoftwareProvider>());
}

SystemCatalog::~SystemCatalog() = default;

std::vector<std::string> SystemCatalog::ProviderNames() const {
  std::vector<std::string> out;
  for (const auto& p : providers_) out.emplace_back(p->prefix());
  return out;
}

Expected<std::pair<Provider*, std::string>> SystemCatalog::Route(const std::string& spec) {
  std::string_view s = Trim(spec);
  size_t colon = s.find(':');
  if (colon == std::string_view::npos) {
    return Error(Code::kNotFound, "'" + std::string(s) +
                                      "' is not a probe; expected PROVIDER:NAME with a provider "
                                      "among " +
                                      Join(ProviderNames()));
  }
  std::string_view prefix = s.substr(0, colon);
  for (const auto& p : providers_)
    if (p->prefix() == prefix) return std::make_pair(p.get(), std::string(s.substr(colon + 1)));
  std::string message = "unknown probe provider '" + std::string(prefix) + "' in '" +
                        std::string(s) + "'; providers: " + Join(ProviderNames());
  if (IsForeignProvider(prefix)) {
    message +=
        " (fay attaches to tracepoints and uprobes; `fay doctor` shows what this kernel "
        "permits)";
  }
  return Error(Code::kNotFound, message);
}

Expected<std::vector<ProbeInfo>> SystemCatalog::Resolve(const std::string& spec) {
  FAY_ASSIGN_OR_RETURN(auto route, Route(spec));
  return route.first->Resolve(route.second);
}

Expected<std::vector<std::string>> SystemCatalog::List(const std::string& spec) {
  FAY_ASSIGN_OR_RETURN(auto route, Route(spec));
  return route.first->List(route.second);
}

std::vector<std::string> SystemCatalog::Nearest(const std::string& spec, size_t n) {
  std::string_view s = Trim(spec);
  size_t colon = s.find(':');
  if (colon == std::string_view::npos) {
    // A bare name is most often a syscall.
    return providers_[0]->Nearest(s, n);
  }
  std::string_view prefix = s.substr(0, colon);
  std::string_view rest = s.substr(colon + 1);
  for (const auto& p : providers_)
    if (p->prefix() == prefix) return p->Nearest(rest, n);
  if (IsForeignProvider(prefix)) return {};
  std::vector<std::string> out = fay::Nearest(ProviderNames(), prefix, n);
  for (auto& name : out) name += ":" + std::string(rest);
  return out;
}

}  // namespace fay
