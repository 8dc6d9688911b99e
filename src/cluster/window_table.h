// A node's open windows: the states its children and its own engine send, merged per window
// with AggState::Merge, and which hosts each window has heard from. A state for a window already
// closed is late: counted and dropped, never merged into another window.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/value.h"
#include "fay_cluster.pb.h"

namespace fay::cluster {

namespace pb = ::fay::cluster::v1;

inline constexpr uint32_t kProtocolVersion = 1;

// Rows to groups and back. Stacks do not cross the wire (the query is refused before).
void RowsToGroups(const std::vector<Row>& rows, pb::WindowState* out);
Status GroupsToRows(const pb::WindowState& in, std::vector<Row>* rows);

class WindowTable {
 public:
  // max_keys bounds each window's merged groups: past it new keys are left out and the
  // window says it was truncated.
  explicit WindowTable(size_t max_keys) : max_keys_(max_keys) {}

  // Folds s into its window. False when the window is closed already (counted late) or the
  // state does not decode.
  bool Add(const pb::WindowState& s);
  // Whether every host of `hosts` has a word (answered or an error) for window `index`.
  bool Heard(uint64_t index, const std::vector<std::string>& hosts) const;
  // Removes window `index` and returns it merged: groups, the hosts heard from, stats.
  pb::WindowState Close(uint64_t index);
  uint64_t late() const {
    std::lock_guard lk(mu_);
    return late_;
  }

 private:
  struct Open {
    std::map<std::vector<Value>, std::vector<AggState>> groups;
    std::map<std::string, pb::HostState> hosts;  // by address
    pb::Stats stats;
    bool truncated = false;
    bool last = false;
  };
  mutable std::mutex mu_;
  size_t max_keys_;
  std::map<uint64_t, Open> open_;
  std::set<uint64_t> closed_;  // a window is never reopened
  uint64_t closed_below_ = 0;  // every window under it is closed
  uint64_t late_ = 0;
};

}  // namespace fay::cluster
