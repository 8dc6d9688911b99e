// One node of the aggregation tree: the coordinator at the root, an agent below it. A node fans
// the query out to the hosts under it (a tree of --fanout children), merges what they and its
// own engine send per window, and closes each window at its end plus the deadline, or as soon
// as every host under it has had its word. What a closed window did not hear from a host is
// said in its coverage, with the reason. A child that fails is retried once a window; the
// hosts under a failed inner agent are reached directly from the next window on.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/channel.h"
#include "cluster/window_table.h"
#include "common/status.h"

namespace fay::cluster {

// The host's own part: one state per window, its groups keyed as the plan says (host included).
class LocalEngine {
 public:
  virtual ~LocalEngine() = default;
  virtual pb::WindowState TakeWindow(uint64_t index, bool last) = 0;
  // Between windows, at least every 50 ms: what must keep up with the machine meanwhile.
  virtual void Tick() {}
};

struct NodeOptions {
  pb::QueryRequest request;  // subtree: the hosts under this node
  TlsFiles tls;
  std::string self_address;  // empty at the root, which runs no engine
  size_t max_keys = 1'000'000;
  std::optional<QueryShape> shape;  // what the children's states must look like
};

// The end of window `index` (CLOCK_REALTIME ns), or UINT64_MAX for an open-ended one.
uint64_t WindowEnd(const pb::QueryRequest& r, uint64_t index);
bool IsLastWindow(const pb::QueryRequest& r, uint64_t index);
// The tree under a node: each child and the hosts below it.
std::vector<std::pair<std::string, std::vector<std::string>>> Layout(
    const std::vector<std::string>& hosts, uint32_t fanout);

// Runs until the last window is emitted (true), or until cancelled() or emit() fails (false).
// `stop` ends the query early: the open window becomes the last.
bool RunNode(const NodeOptions& o, LocalEngine* local,
             const std::function<bool(const pb::WindowState&)>& emit,
             const std::function<bool()>& cancelled, const std::atomic<bool>& stop);

uint64_t RealtimeNs();

// Refuses a request no coordinator sends: a start more than a day from `now_ns`, a deadline
// past a minute, a fanout under 2 or over 1024, a subtree over 100,000 hosts, query text over
// 64 KiB. Without it a hostile start could make every window end at once, in a loop. The
// reason names the field.
Status ValidateRequest(const pb::QueryRequest& r, uint64_t now_ns);

}  // namespace fay::cluster
