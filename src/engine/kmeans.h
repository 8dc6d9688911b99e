// K-means grouping of entities (hosts, processes, traces) by the shape of their activity. Counts
// become shares of each entity's total first, so a busy host and an idle host with the same mix
// land in one group. The result depends only on the set of entities, never on their order, so two
// runs over the same data can be compared line by line.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace fay {

struct ClusterInput {
  std::string name;                        // unique among the inputs
  std::map<std::string, double> features;  // feature -> count (>= 0); absent means 0
};

struct ClusterGroup {
  // A feature the group does more of than everyone does.
  struct Distinct {
    std::string feature;
    double group_share = 0;  // in the group's centroid
    double all_share = 0;    // mean share over all entities
    bool operator==(const Distinct&) const = default;
  };
  std::vector<std::string> members;  // sorted
  std::vector<double> centroid;      // mean share, one per ClusterResult::features entry
  // At most 3, largest group_share - all_share first (ties by name). Only features the group has
  // more of: one it lacks mostly names the feature some other group is busy with.
  std::vector<Distinct> distinct;
  bool operator==(const ClusterGroup&) const = default;
};

struct ClusterResult {
  std::vector<std::string> features;  // the union of the inputs' feature names, sorted
  std::vector<ClusterGroup> groups;   // ordered by first member
  double inertia = 0;                 // sum of squared distances of shares to their centroid
  bool operator==(const ClusterResult&) const = default;
};

// Groups the entities into min(k, number of distinct share vectors) groups, with deterministic
// k-means++ seeding and Lloyd iterations. kInvalidArgument for k == 0, no entities, a duplicate
// name, or a negative or non-finite count.
Expected<ClusterResult> KMeans(const std::vector<ClusterInput>& in, size_t k);

}  // namespace fay
