#include "engine/output/sink.h"

#include <fmt/format.h>

namespace fay {

OutputSink::~OutputSink() = default;

void OutputSink::Flush() {}

std::string FormatSummary(const RunStats& s, double seconds) {
  return fmt::format(
      "fay: {} events, {} matched, {} dropped, {} map-full, {} read errors in {:.2f}s",
      s.events_seen, s.events_matched, s.dropped, s.map_full, s.read_errors, seconds);
}

void PrintSummary(FILE* err, const RunStats& stats, double seconds) {
  fmt::print(err, "{}\n", FormatSummary(stats, seconds));
}

}  // namespace fay
