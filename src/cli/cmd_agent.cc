// fay agent: the cluster's per-host daemon (docs/CLUSTER.md); fay cluster status: what each
// agent runs.
#include <fmt/core.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cluster/agent.h"
#include "cluster/coordinator.h"
#include "version.h"

namespace fay::cli {
namespace {

void AddTlsFlags(CLI::App* cmd, cluster::TlsFiles* tls) {
  cmd->add_option("--tls-cert", tls->cert, "this side's certificate (PEM)");
  cmd->add_option("--tls-key", tls->key, "its private key (PEM)");
  cmd->add_option("--tls-ca", tls->ca, "the CA that signs every peer's certificate (PEM)");
  cmd->add_flag("--insecure", tls->insecure, "plaintext, no authentication (tests, loopback)");
}

}  // namespace

Runner RegisterAgent(CLI::App& app) {
  auto o = std::make_shared<cluster::AgentOptions>();
  auto* cmd = app.add_subcommand("agent", "Serve cluster queries on this host (docs/CLUSTER.md)");
  cmd->add_option("--listen", o->listen, "ADDR:PORT to listen on, and only there")->required();
  cmd->add_option("--name", o->name, "this host's label in answers (default: the hostname)");
  cmd->add_option(
      "--standing", o->standing_file,
      "standing queries to run from the start, one `NAME = QUERY` a line (docs/SINKS.md)");
  cmd->add_option("--metrics", o->metrics_listen,
                  "ADDR:PORT to serve the standing queries at /metrics for Prometheus");
  cmd->add_option("--sink", o->sink,
                  "also write each standing query's windows to clickhouse://HOST[:PORT]/DB.TABLE "
                  "(table TABLE_NAME per query)");
  cmd->add_flag("--sink-create", o->sink_create, "with --sink: create the tables and views");
  cmd->add_option(
      "--metrics-max-series", o->metrics_max_series,
      "label sets each standing query keeps (default 10000); more are dropped, counted");
  AddTlsFlags(cmd, &o->tls);
  cmd->add_option("--max-queries", o->limits.max_queries, "queries running at once (default 4)");
  cmd->add_option("--max-probes", o->limits.max_probes, "probes one query may attach (1024)");
  cmd->add_option("--max-keys", o->limits.max_keys, "one query's aggregation map (65536 keys)");
  auto map_mib = std::make_shared<uint64_t>(o->limits.max_map_bytes >> 20);
  cmd->add_option("--max-map-memory", *map_mib,
                  "MiB one query's map may take at its fullest, all CPUs (default 64)");
  return [o, map_mib] {
    o->limits.max_map_bytes = *map_mib << 20;
    o->fay_version = FAY_VERSION " (" FAY_GIT_REVISION ")";
    if (o->name.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      o->name = host;
    }
    return cluster::RunAgent(*o);
  };
}

Runner RegisterCluster(CLI::App& app) {
  auto hosts = std::make_shared<std::string>();
  auto tls = std::make_shared<cluster::TlsFiles>();
  auto* cmd = app.add_subcommand("cluster", "Look at the agents of a cluster");
  auto* status = cmd->add_subcommand("status", "Each agent's version, capabilities and queries");
  status->add_option("--hosts", *hosts, "H1:P,H2:P,...")->required();
  AddTlsFlags(status, tls.get());
  cmd->require_subcommand(1);
  return [hosts, tls] { return cluster::PrintClusterStatus(*hosts, *tls); };
}

}  // namespace fay::cli
