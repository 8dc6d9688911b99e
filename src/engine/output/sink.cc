#include "engine/output/sink.h"

#include <fmt/format.h>

namespace fay {

OutputSink::~OutputSink() = default;

void OutputSink::Flush() {}

std::string FormatSummary(const RunStats& s, double seconds) {
  // Every loss is counted under its own name; the rarer ones appear only when they happened.
  std::string rare;
  if (s.map_busy)
    rare += fmt::format(", {} map-busy (a nested probe found the map locked)", s.map_busy);
  if (s.map_errors)
    rare +=
        fmt::format(", {} map-errors (the kernel refused a new key, e.g. no memory)", s.map_errors);
  if (s.no_entry)
    rare += fmt::format(", {} returns without their entry (calls in flight at attach)", s.no_entry);
  if (s.state_full)
    rare += fmt::format(", {} state-full (a remembered value found its map full)", s.state_full);
  if (s.no_state) rare += fmt::format(", {} without their remembered value", s.no_state);
  return fmt::format(
      "fay: {} events, {} matched, {} dropped, {} map-full, {} read errors{} in {:.2f}s",
      s.events_seen, s.events_matched, s.dropped, s.map_full, s.read_errors, rare, seconds);
}

void PrintSummary(FILE* err, const RunStats& stats, double seconds) {
  fmt::print(err, "{}\n", FormatSummary(stats, seconds));
}

}  // namespace fay
