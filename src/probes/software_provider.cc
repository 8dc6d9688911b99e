#include "probes/software_provider.h"

#include <linux/perf_event.h>

#include <charconv>

#include "common/strings.h"

namespace fay {
namespace {

struct Event {
  const char* name;
  const char* alias;
  uint64_t config;
  bool fault;  // the sample carries the faulting address
};

constexpr Event kEvents[] = {
    {"page-faults", "faults", PERF_COUNT_SW_PAGE_FAULTS, true},
    {"minor-faults", "", PERF_COUNT_SW_PAGE_FAULTS_MIN, true},
    {"major-faults", "", PERF_COUNT_SW_PAGE_FAULTS_MAJ, true},
    {"context-switches", "cs", PERF_COUNT_SW_CONTEXT_SWITCHES, false},
    {"cpu-migrations", "migrations", PERF_COUNT_SW_CPU_MIGRATIONS, false},
    {"alignment-faults", "", PERF_COUNT_SW_ALIGNMENT_FAULTS, true},
    {"emulation-faults", "", PERF_COUNT_SW_EMULATION_FAULTS, true},
};

// bpf_perf_event_data: the sample's registers (struct pt_regs, 168 bytes on x86-64), its period,
// then the address a fault sample carries.
constexpr int kAddrOffset = 168 + 8;

}  // namespace

Expected<std::vector<ProbeInfo>> SoftwareProvider::Resolve(std::string_view pattern) {
  std::string_view name = pattern, period_text;
  if (size_t colon = pattern.find(':'); colon != std::string_view::npos) {
    name = pattern.substr(0, colon);
    period_text = pattern.substr(colon + 1);
  }
  uint64_t period = 1;
  if (!period_text.empty()) {
    auto [ptr, ec] =
        std::from_chars(period_text.data(), period_text.data() + period_text.size(), period);
    if (ec != std::errc() || ptr != period_text.data() + period_text.size() || period == 0)
      return Error(
          Code::kInvalidArgument,
          "bad period '" + std::string(period_text) +
              "': software:EVENT:N samples every Nth event, e.g. software:page-faults:100");
  }
  for (const Event& e : kEvents) {
    if (name != e.name && (e.alias[0] == '\0' || name != e.alias)) continue;
    ProbeInfo p;
    p.name = std::string("software:") + e.name + (period > 1 ? ":" + std::to_string(period) : "");
    p.kind = ProbeKind::kSoftware;
    p.perf_config = e.config;
    p.period_events = period;
    p.fields = CommonFields();
    for (Field& f : StackFields()) p.fields.push_back(std::move(f));
    if (e.fault)
      p.fields.push_back(
          {"addr", Type::Int(false), FieldSource::kCtx, kAddrOffset, 8, 0, "u64 faulting address"});
    return std::vector<ProbeInfo>{std::move(p)};
  }
  std::string names;
  for (const Event& e : kEvents) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return Error(Code::kNotFound,
               "no software event '" + std::string(name) + "'; there are " + names);
}

Expected<std::vector<std::string>> SoftwareProvider::List(std::string_view pattern) {
  std::vector<std::string> out;
  for (const Event& e : kEvents)
    if (pattern.empty() || pattern == "*" || GlobMatch(pattern, e.name))
      out.push_back(std::string("software:") + e.name);
  return out;
}

std::vector<std::string> SoftwareProvider::Nearest(std::string_view pattern, size_t n) {
  std::vector<std::string> out;
  for (const Event& e : kEvents)
    if (out.size() < n) out.push_back(std::string("software:") + e.name);
  return out;
}

}  // namespace fay
