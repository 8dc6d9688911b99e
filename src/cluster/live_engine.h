// This host's engine for a cluster query or a standing query: the query compiled against this
// kernel with its host parts cut out (host_query.h), within the agent's limits, attached, and
// read one window at a time.
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include "bpf/runtime.h"
#include "cluster/agent.h"
#include "cluster/node.h"
#include "cluster/window_table.h"
#include "probes/catalog.h"
#include "query/plan.h"

namespace fay::cluster {

class LiveEngine : public LocalEngine {
 public:
  // `name` is this host's (what `host` says); `address` what its answers carry; `want_keys`
  // the caller's --max-keys (0: the agent's own).
  static Expected<std::unique_ptr<LiveEngine>> Start(const std::string& text,
                                                     const std::string& name,
                                                     const std::string& address, uint32_t want_keys,
                                                     const AgentLimits& lim);
  ~LiveEngine() override;

  // One window as serialized states, for a cluster node.
  pb::WindowState TakeWindow(uint64_t index, bool last) override;
  // The kernel's mapping records drained every 50 ms, and the processes stack keys name read
  // every 200 ms: a busy host's records never fill their rings between windows, and a process
  // that exits before the window ends is still named (as a local query does between prints).
  void Tick() override;
  // One window as rows, each table's (the query's own first), for a standing query.
  Expected<std::vector<ResultSet>> TakeRows();

  const QueryShape& shape() const { return shape_; }
  const Plan& plan() const { return plan_; }
  // Whether `host` is among any table's keys.
  bool has_host_key() const {
    return std::any_of(host_keys_.begin(), host_keys_.end(), [](int k) { return k >= 0; });
  }

 private:
  LiveEngine() = default;
  std::string name_, address_, text_;
  std::vector<int> host_keys_;  // each table's, the query's own first (HostQuery::KeyIndexes)
  bool selected_ = true;
  SystemCatalog catalog_;
  Plan plan_;
  QueryShape shape_;
  std::unique_ptr<bpf::LiveQuery> live_;
  RunStats sent_;
  uint64_t last_tick_ns_ = 0, last_stacks_ns_ = 0;
};

}  // namespace fay::cluster
