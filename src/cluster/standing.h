// Standing queries (docs/SINKS.md): queries an agent runs from its start to its end, each window
// folded into metrics a scrape reads (sinks/metrics.h). A file holds one per line,
// `NAME = QUERY`; blank lines and `#` comments are skipped. A query without `every` gets
// `every 10s`; `for` is refused (a standing query runs as long as the agent).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "cluster/agent.h"
#include "common/status.h"
#include "sinks/clickhouse.h"
#include "sinks/metrics.h"

namespace fay::cluster {

struct StandingQuery {
  std::string name, text;
  int line = 0;  // in the file, for messages
};

// The file's queries; a malformed line is an error naming FILE:LINE.
Expected<std::vector<StandingQuery>> ReadStandingFile(const std::string& path);

class LiveEngine;

class StandingQueries {
 public:
  // Compiles and attaches every query, each registered with `metrics`; the first that fails
  // is the error, as FILE:LINE: NAME: why.
  static Expected<std::unique_ptr<StandingQueries>> Start(const std::string& path,
                                                          const AgentOptions& o,
                                                          sinks::MetricsRegistry* metrics);
  ~StandingQueries();

  // Ends each query's windows at its `every` until `stop`; then detaches everything.
  void Run(const std::atomic<bool>& stop);

 private:
  struct Running {
    StandingQuery q;
    std::unique_ptr<LiveEngine> engine;
    // Each table's name among the metrics: NAME, then NAME_2, NAME_3 for further tables.
    std::vector<std::string> names;
    // --sink: each table's windows into TABLE_NAME (TABLE_NAME_2, ...).
    std::vector<std::unique_ptr<sinks::ClickHouseSink>> sinks;
    uint64_t every_ns = 0, next_ns = 0;
  };
  StandingQueries() = default;
  std::vector<Running> running_;
  sinks::MetricsRegistry* metrics_ = nullptr;
};

}  // namespace fay::cluster
