// tracepoint:SUBSYS:NAME: kernel tracepoints, with fields from their tracefs format files.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "probes/provider.h"
#include "probes/tracefs.h"

namespace fay {

// The query fields of a tracepoint format: CommonFields(), then each non-common field that fay can
// load (integers of 1/2/4/8 bytes, char arrays, __data_loc strings); others are skipped.
std::vector<Field> TracepointFields(const EventFormat& format);

class TracepointProvider : public Provider {
 public:
  // tracefs_root empty: find (or mount) tracefs on first use.
  explicit TracepointProvider(std::string tracefs_root = "") : root_(std::move(tracefs_root)) {}

  std::string_view prefix() const override { return "tracepoint"; }
  Expected<std::vector<ProbeInfo>> Resolve(std::string_view pattern) override;
  Expected<std::vector<std::string>> List(std::string_view pattern) override;
  std::vector<std::string> Nearest(std::string_view pattern, size_t n) override;

 private:
  // (category, event) pairs matching "CAT:NAME" globs.
  Expected<std::vector<std::pair<std::string, std::string>>> Match(std::string_view category,
                                                                   std::string_view name);
  Status Init();

  std::string root_;
  std::optional<std::vector<std::string>> categories_;
  std::map<std::string, std::vector<std::string>> events_;  // per category, filled lazily
};

}  // namespace fay
