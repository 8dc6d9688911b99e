// A node's open windows: the states its children and its own engine send, merged per window
// with AggState::Merge, and which hosts each window has heard from. A state for a window already
// closed is late: counted and dropped, never merged into another window.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/value.h"
#include "fay_cluster.pb.h"
#include "query/plan.h"

namespace fay::cluster {

namespace pb = ::fay::cluster::v1;

// 2: aggregate states in their compact form (varint counters). 3: groups say their table.
inline constexpr uint32_t kProtocolVersion = 3;
// A node's merged windows, all open ones together, unless the query says otherwise.
inline constexpr size_t kDefaultMergeBytes = 512ull << 20;

// Rows to groups and back, of one table (Plan::table; 0 without several). A stack crosses
// with the names its host's symbolizer gave it.
void RowsToGroups(const std::vector<Row>& rows, pb::WindowState* out, uint32_t table = 0);
Status GroupsToRows(const pb::WindowState& in, std::vector<Row>* rows, uint32_t table = 0);

// What every group of a query's states must look like: its keys' kinds and its aggregates'
// specs, from the plan. A state of another shape (another plan, a hostile peer) is refused
// whole, before any of it is merged.
struct GroupShape {
  std::vector<int> keys;  // each key's pb::Value case: kI, kS or kStack
  std::vector<AggSpec> aggs;
};
// A query's groups, one shape per table (the query's own first, then Plan::tables).
using QueryShape = std::vector<GroupShape>;
// host_keys[t] >= 0: table t has a string key there that the agent inserts (`by host`) and the
// plan lacks; the query's own table first (HostQuery::KeyIndexes; missing: none).
QueryShape ShapeOf(const Plan& p, const std::vector<int>& host_keys = {});
// Why s does not decode or fit `shape` (when given), or "" when it is sound: every group's
// table, every key's kind, every aggregate's header and body checked in place, nothing copied.
std::string CheckState(const pb::WindowState& s, const QueryShape* shape);

class WindowTable {
 public:
  // max_keys bounds each window's merged groups: past it new keys are left out and the
  // window says it was truncated. Without a shape, states are checked only for decoding.
  // max_bytes bounds the memory of all its open windows together, keys and states counted:
  // past it, too, a window keeps its keys and says it was truncated.
  explicit WindowTable(size_t max_keys, std::optional<QueryShape> shape = std::nullopt,
                       size_t max_bytes = kDefaultMergeBytes)
      : max_keys_(max_keys), max_bytes_(max_bytes), shape_(std::move(shape)) {}

  // Folds s into its window. False when the window is closed already (counted late) or the
  // state is refused (it does not decode or fit the shape: *why says how).
  bool Add(const pb::WindowState& s, std::string* why = nullptr);
  // Whether every host of `hosts` has a word (answered or an error) for window `index`.
  bool Heard(uint64_t index, const std::vector<std::string>& hosts) const;
  // States added so far; WaitForAdd sleeps until there are more than `since`, or `timeout`.
  uint64_t adds() const {
    std::lock_guard lk(mu_);
    return adds_;
  }
  void WaitForAdd(uint64_t since, std::chrono::milliseconds timeout);
  // Removes window `index` and returns it merged: groups, the hosts heard from, stats.
  pb::WindowState Close(uint64_t index);
  uint64_t late() const {
    std::lock_guard lk(mu_);
    return late_;
  }

 private:
  struct Merged {
    pb::Group keys;  // its keys and table as they came (aggs unused)
    std::vector<AggState> aggs;
  };
  struct Open {
    std::unordered_map<std::string, Merged> groups;  // by EncodeKeys
    std::map<std::string, pb::HostState> hosts;      // by address
    pb::Stats stats;
    bool truncated = false;
    bool last = false;
    size_t bytes = 0;
  };
  mutable std::mutex mu_;
  std::condition_variable added_;
  uint64_t adds_ = 0;
  size_t max_keys_;
  size_t max_bytes_;
  size_t bytes_ = 0;  // what the open windows' groups take, about
  std::optional<QueryShape> shape_;
  std::map<uint64_t, Open> open_;
  std::set<uint64_t> closed_;  // a window is never reopened
  uint64_t closed_below_ = 0;  // every window under it is closed
  uint64_t late_ = 0;
};

}  // namespace fay::cluster
