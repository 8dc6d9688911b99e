// A ClickHouse sink (docs/SINKS.md): each window's partial states, per host, inserted over
// ClickHouse's HTTP interface into a Null input table, whose materialized view folds them into
// an AggregatingMergeTree, so that ClickHouse merges windows, hosts and shards exactly as fay
// does. A plain view TABLE_result shows merged values under the query's own column names:
//
//   count, sum   sumState                          min, max   minState, maxState
//   avg          sumState of its sum and its count
//   hist, lhist  sumMap of {bucket's lower bound -> count}
//   quantile     sumMap of {bucket's value -> count}; the view picks the rank fay picks
//   distinct     maxForEach of the HyperLogLog registers; the view estimates as fay does
//
// Windows go out from a thread of their own: a server that is down or slow never stalls
// tracing. Up to a bound they wait in memory; past it the oldest is dropped and counted.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "engine/output/sink.h"
#include "engine/value.h"
#include "query/plan.h"

namespace fay::sinks {

struct ClickHouseTarget {
  std::string host;
  int port = 8123;
  std::string db, table;
};

// clickhouse://HOST[:PORT]/DB.TABLE (port 8123, ClickHouse's HTTP port, by default).
Expected<ClickHouseTarget> ParseClickHouseUrl(const std::string& url);

// The statements --sink-create runs, in order: the database, the AggregatingMergeTree TABLE,
// the Null input TABLE_input, the view TABLE_mv between them, and the view TABLE_result.
Expected<std::vector<std::string>> ClickHouseSchema(const Plan& plan, const ClickHouseTarget& t);

// One window's rows for TABLE_input, as JSONEachRow.
std::string ClickHouseRows(const Plan& plan, const ResultSet& rs, const std::string& host);

class ClickHouseSink {
 public:
  // Checks the server answers (and creates the schema with `create`) before tracing starts.
  static Expected<std::unique_ptr<ClickHouseSink>> Start(const std::string& url, const Plan& plan,
                                                         const std::string& host, bool create,
                                                         size_t max_pending = 256);
  ~ClickHouseSink();

  // Queues a window; never blocks.
  void Window(const ResultSet& rs);
  // At the end: waits up to `seconds` for the queue to drain, then stops. Returns a summary
  // line ("clickhouse: 12 windows written, 0 dropped") with the last error if there was one.
  std::string Finish(double seconds);
  // DB.TABLE, as the URL named it.
  std::string name() const { return target_.db + "." + target_.table; }

 private:
  ClickHouseSink() = default;
  Status Post(const std::string& body, std::string* answer = nullptr);
  void Loop();

  ClickHouseTarget target_;
  const Plan* plan_ = nullptr;
  std::string host_;
  size_t max_pending_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> pending_;
  bool stop_ = false, busy_ = false;
  uint64_t written_ = 0, dropped_ = 0, failures_ = 0;
  std::string last_error_;
  std::thread thread_;
};

// With several tables (Plan::tables), each goes to a ClickHouse table of its own: the query's
// own to the URL's TABLE, the second to TABLE_2, the third to TABLE_3.
std::string ClickHouseTableUrl(const std::string& url, size_t table);

// `inner` (the terminal or JSON output) with every window also sent to `chs[plan.table]` (the
// first when the query has one table). Empty: `inner` alone.
std::unique_ptr<OutputSink> WithClickHouse(std::unique_ptr<OutputSink> inner,
                                           std::vector<ClickHouseSink*> chs);

}  // namespace fay::sinks
