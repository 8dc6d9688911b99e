// `fay agent`: one per host. It serves the cluster protocol (fay_cluster.proto): compiles the
// query text it is sent against its own kernel, runs it, and streams one state per window,
// merged with the subtree it is given when it is an inner node of the tree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cluster/tls_files.h"
#include "common/status.h"

namespace grpc {
class Service;
}

namespace fay::cluster {

// What a query may ask of this host; a request past one is refused with the reason.
struct AgentLimits {
  uint32_t max_queries = 4;                            // running at once
  uint32_t max_probes = 1024;                          // attached by one query
  uint32_t max_keys = 65536;                           // one query's aggregation map
  uint64_t max_map_bytes = 64ull << 20;                // that map at its fullest, all CPUs
  uint64_t min_every_ns = 100'000'000;                 // at most 10 windows a second
  uint64_t max_for_ns = 24ull * 3600 * 1'000'000'000;  // a day; open-ended queries are leased
};

struct AgentOptions {
  std::string listen;  // ADDR:PORT, the only address it listens on
  std::string name;    // the host's label (default: the hostname)
  TlsFiles tls;
  AgentLimits limits;
  std::string fay_version = "unknown";  // what `fay cluster status` shows (the CLI's)
  // Standing queries (standing.h) and the endpoint Prometheus scrapes for them (empty: none).
  std::string standing_file, metrics_listen;
  // Each standing query's windows also into ClickHouse, table TABLE_NAME (sinks/clickhouse.h).
  std::string sink;
  bool sink_create = false;
  uint32_t metrics_max_series = 10000;
};

// Serves until SIGINT or SIGTERM; the exit code.
int RunAgent(const AgentOptions& o);

// The agent's gRPC service alone, for a server of the caller's (tests); `o` must outlive it.
std::unique_ptr<grpc::Service> MakeAgentService(const AgentOptions& o);

}  // namespace fay::cluster
