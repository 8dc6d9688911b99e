// Output sinks for the machine part: terminal tables and histograms, JSON Lines.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/value.h"
#include "query/plan.h"

namespace fay {

class OutputSink {
 public:
  virtual ~OutputSink();
  // One aggregated window (the whole run when the query has no `every`).
  virtual void Window(const Plan& plan, const ResultSet& rs) = 0;
  // One raw event of a `select` query; row is parallel to Plan::keys.
  virtual void SelectRow(const Plan& plan, const std::vector<Value>& row, uint64_t time_ns) = 0;
  virtual void Flush();
};

// Options of the terminal output (none yet). Stack frames print by the names they carry
// (Stack::names, filled where the stack is read), else as addresses.
struct TextOptions {};

std::unique_ptr<OutputSink> MakeTextSink(FILE* out, TextOptions options = {});
std::unique_ptr<OutputSink> MakeJsonSink(FILE* out);

// "fay: 2000123 events, 2000000 matched, 0 dropped, 0 map-full, 0 read errors in 1.21s".
void PrintSummary(FILE* err, const RunStats& stats, double seconds);
std::string FormatSummary(const RunStats& stats, double seconds);

}  // namespace fay
