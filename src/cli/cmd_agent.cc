// fay agent: the cluster's per-host daemon (docs/CLUSTER.md); fay cluster status: what each
// agent runs.
#include <fmt/core.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cluster/agent.h"
#include "cluster/channel.h"
#include "cluster/coordinator.h"
#include "cluster/window_table.h"
#include "fay_cluster.grpc.pb.h"

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
  AddTlsFlags(cmd, &o->tls);
  cmd->add_option("--max-queries", o->limits.max_queries, "queries running at once (default 4)");
  cmd->add_option("--max-probes", o->limits.max_probes, "probes one query may attach (1024)");
  cmd->add_option("--max-keys", o->limits.max_keys, "one query's aggregation map (65536 keys)");
  return [o] {
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
  return [hosts, tls] {
    int bad = 0;
    std::string list = *hosts;
    size_t at = 0;
    while (at <= list.size()) {
      size_t comma = list.find(',', at);
      std::string h = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      at = comma == std::string::npos ? list.size() + 1 : comma + 1;
      if (h.empty()) continue;
      auto ch = cluster::Connect(h, *tls);
      if (!ch.ok()) {
        fmt::print(stderr, "fay: {}\n", ch.status().message());
        return 2;
      }
      auto stub = cluster::pb::Agent::NewStub(*ch);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
      cluster::pb::StatusRequest req;
      req.set_version(cluster::kProtocolVersion);
      cluster::pb::StatusReply rep;
      grpc::Status st = stub->Status(&ctx, req, &rep);
      if (!st.ok()) {
        fmt::print("{}: unreachable: {}\n", h, cluster::Reason(st));
        ++bad;
        continue;
      }
      fmt::print("{}: {} fay {} protocol {}", h, rep.name(), rep.fay_version(), rep.version());
      for (const auto& c : rep.capabilities()) fmt::print(" {}", c);
      fmt::print("\n");
      for (const auto& q : rep.queries())
        fmt::print("  query {}: {} ({}, agent CPU {:.2f} s, max RSS {} MB)\n", q.query_id(),
                   q.query(), q.attached() ? "attached" : "starting", q.cpu_seconds(),
                   q.rss_bytes() >> 20);
      if (!rep.last_error().empty()) fmt::print("  last error: {}\n", rep.last_error());
    }
    return bad ? 1 : 0;
  };
}

}  // namespace fay::cli
