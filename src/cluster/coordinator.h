// `fay query --hosts`: the root of the aggregation tree. It compiles the query for its output
// (the agents compile it again against their own kernels), dispatches it down the tree, and
// prints each merged window with the hosts it covers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/tls_files.h"
#include "common/status.h"

namespace fay::cluster {

struct ClusterQueryOptions {
  std::string query;
  std::string format = "text";
  std::vector<std::string> hosts;
  uint32_t fanout = 32;
  uint64_t deadline_ns = 1'000'000'000;
  uint32_t max_keys = 10240;           // each agent's map
  size_t max_merged_keys = 1'000'000;  // each window's merged groups, here and in inner agents
  uint64_t max_merge_bytes = 0;        // each node's open windows (0: kDefaultMergeBytes)
  TlsFiles tls;
};

// Exit codes: 0 every host answered every window; kExitPartial some window missed a host (it
// says which); 1 no host answered, or the query is refused.
inline constexpr int kExitPartial = 3;

// --hosts: ADDR:PORT,ADDR:PORT,... (empty items left out).
std::vector<std::string> SplitHosts(const std::string& list);
// Reads --hosts-file: one ADDR:PORT a line, # comments.
Expected<std::vector<std::string>> ReadHostsFile(const std::string& path);

int RunClusterQuery(const ClusterQueryOptions& o);

// `fay cluster status`: one line per agent of `hosts` (comma-separated); the exit code.
int PrintClusterStatus(const std::string& hosts, const TlsFiles& tls);

}  // namespace fay::cluster
