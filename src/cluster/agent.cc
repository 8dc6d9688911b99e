#include "cluster/agent.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <bpf/libbpf.h>
#include <fmt/format.h>

#include "bpf/attach.h"
#include "bpf/runtime.h"
#include "cluster/host_query.h"
#include "cluster/live_engine.h"
#include "cluster/node.h"
#include "cluster/standing.h"
#include "fay_cluster.grpc.pb.h"
#include "probes/catalog.h"
#include "probes/tracefs.h"
#include "query/compile.h"
#include "sinks/metrics_server.h"

namespace fay::cluster {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}

struct Running {
  std::string query;
  std::atomic<bool> stop{false};
  std::atomic<bool> cancel{false};
  std::atomic<bool> ended{false};
  std::atomic<bool> attached{false};
};

class Service final : public pb::Agent::Service {
 public:
  explicit Service(const AgentOptions& o) : o_(o) {}

  grpc::Status Run(grpc::ServerContext* ctx, const pb::QueryRequest* req,
                   grpc::ServerWriter<pb::WindowState>* writer) override {
    if (req->version() != kProtocolVersion)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          fmt::format("the caller speaks cluster protocol version {}, this agent "
                                      "{}",
                                      req->version(), kProtocolVersion));
    auto fail = [&](const std::string& why) {
      Note(why);
      pb::WindowState ws;
      ws.set_version(kProtocolVersion);
      ws.set_error(why);
      pb::HostState* h = ws.add_hosts();
      h->set_host(o_.name);
      h->set_address(req->address());
      h->set_error(why);
      writer->Write(ws);
      return grpc::Status::OK;
    };
    if (fay::Status st = ValidateRequest(*req, RealtimeNs()); !st.ok()) return fail(st.message());
    if (req->every_ns() && req->every_ns() < o_.limits.min_every_ns)
      return fail(
          fmt::format("every {} ms is more windows than this agent allows (at most one "
                      "per {} ms)",
                      req->every_ns() / 1'000'000, o_.limits.min_every_ns / 1'000'000));
    if (req->for_ns() > o_.limits.max_for_ns)
      return fail(fmt::format("for {} s is longer than this agent allows ({} s)",
                              req->for_ns() / 1'000'000'000, o_.limits.max_for_ns / 1'000'000'000));
    auto run = std::make_shared<Running>();
    run->query = req->query();
    {
      std::unique_lock lk(mu_);
      // One run per query id: a caller that re-dispatches after a failure above this agent
      // replaces the run its old parent started.
      if (auto it = runs_.find(req->query_id()); it != runs_.end()) {
        auto old = it->second;
        old->cancel = true;
        lk.unlock();
        for (int i = 0; i < 200 && !old->ended; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        lk.lock();
      }
      size_t active = 0;
      for (auto& [id, r] : runs_) active += !r->ended;
      if (active >= o_.limits.max_queries)
        return fail(fmt::format("{} queries are running; this agent allows {} (--max-queries)",
                                active, o_.limits.max_queries));
      runs_[req->query_id()] = run;
    }
    auto engine =
        LiveEngine::Start(req->query(), o_.name, req->address(), req->max_keys(), o_.limits);
    if (!engine.ok()) {
      run->ended = true;
      {
        std::lock_guard lk(mu_);
        if (runs_[req->query_id()] == run) runs_.erase(req->query_id());
      }
      return fail(engine.status().message());
    }
    run->attached = true;
    NodeOptions no;
    no.request = *req;
    no.tls = o_.tls;
    no.self_address = req->address();
    no.shape = (*engine)->shape();
    bool ok = RunNode(
        no, engine->get(), [&](const pb::WindowState& ws) { return writer->Write(ws); },
        [&] { return ctx->IsCancelled() || run->cancel || g_stop; }, run->stop);
    engine->reset();  // detached before the stream ends
    run->ended = true;
    {
      std::lock_guard lk(mu_);
      if (runs_[req->query_id()] == run) runs_.erase(req->query_id());
    }
    return ok ? grpc::Status::OK : grpc::Status(grpc::StatusCode::CANCELLED, "query ended");
  }

  grpc::Status Stop(grpc::ServerContext*, const pb::StopRequest* req, pb::StopReply*) override {
    std::lock_guard lk(mu_);
    if (auto it = runs_.find(req->query_id()); it != runs_.end()) it->second->stop = true;
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext*, const pb::StatusRequest*,
                      pb::StatusReply* rep) override {
    rep->set_version(kProtocolVersion);
    rep->set_name(o_.name);
    rep->set_fay_version(o_.fay_version);
    rep->add_capabilities(fmt::format("uprobe_multi={}", bpf::UprobeMultiSupported()));
    std::lock_guard lk(mu_);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    for (auto& [id, r] : runs_) {
      pb::RunningQuery* q = rep->add_queries();
      q->set_query_id(id);
      q->set_query(r->query);
      // The agent's own figures: its queries share its process.
      q->set_cpu_seconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
      q->set_rss_bytes(static_cast<uint64_t>(ru.ru_maxrss) * 1024);
      q->set_attached(r->attached);
    }
    rep->set_last_error(last_error_);
    return grpc::Status::OK;
  }

 private:
  void Note(const std::string& why) {
    std::lock_guard lk(mu_);
    last_error_ = why;
  }
  const AgentOptions& o_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Running>> runs_;
  std::string last_error_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAgentService(const AgentOptions& o) {
  return std::make_unique<Service>(o);
}

int RunAgent(const AgentOptions& o) {
  auto creds = ServerCredentials(o.tls);
  if (!creds.ok()) {
    fmt::print(stderr, "fay agent: {}\n", creds.status().message());
    return 2;
  }
  Service service(o);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(o.listen, *creds, &port);
  ConfigureServer(&b);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server || port == 0) {
    fmt::print(stderr, "fay agent: cannot listen on {}\n", o.listen);
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  fmt::print(stderr, "fay agent: {} listening on {} ({})\n", o.name, o.listen,
             o.tls.insecure ? "plaintext, --insecure" : "mutual TLS");
  // Standing queries run on a thread of their own; their metrics are served where asked.
  sinks::MetricsRegistry metrics(o.metrics_max_series);
  std::unique_ptr<StandingQueries> standing;
  if (!o.standing_file.empty()) {
    auto s = StandingQueries::Start(o.standing_file, o, &metrics);
    if (!s.ok()) {
      fmt::print(stderr, "fay agent: {}\n", s.status().message());
      server->Shutdown();
      return 2;
    }
    standing = std::move(s).value();
  }
  std::unique_ptr<sinks::MetricsServer> metrics_server;
  if (!o.metrics_listen.empty()) {
    auto m = sinks::MetricsServer::Start(o.metrics_listen, &metrics);
    if (!m.ok()) {
      fmt::print(stderr, "fay agent: {}\n", m.status().message());
      server->Shutdown();
      return 1;
    }
    metrics_server = std::move(m).value();
    fmt::print(stderr, "fay agent: metrics at http://{}/metrics\n", o.metrics_listen);
  }
  std::thread standing_thread;
  if (standing) standing_thread = std::thread([&] { standing->Run(g_stop); });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // No scrape may render a standing query's metrics once its engine (and plan) is gone.
  metrics_server.reset();
  if (standing_thread.joinable()) standing_thread.join();
  // Running queries see g_stop and end (their probes detached); then the server goes.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  return 0;
}

}  // namespace fay::cluster
