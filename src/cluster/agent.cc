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
#include "cluster/node.h"
#include "fay_cluster.grpc.pb.h"
#include "probes/catalog.h"
#include "probes/tracefs.h"
#include "query/compile.h"

namespace fay::cluster {
namespace {

int NumCpus() {
  static const int n = std::max(1, libbpf_num_possible_cpus());
  return n;
}

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}

// This host's engine, running the query with the host parts cut out.
class LiveEngine : public LocalEngine {
 public:
  static Expected<std::unique_ptr<LiveEngine>> Start(const std::string& text,
                                                     const std::string& name,
                                                     const std::string& address, uint32_t want_keys,
                                                     const AgentLimits& lim) {
    auto e = std::unique_ptr<LiveEngine>(new LiveEngine());
    e->name_ = name;
    e->address_ = address;
    FAY_ASSIGN_OR_RETURN(HostQuery hq, SplitHostQuery(text));
    e->host_key_ = hq.host_key;
    FAY_ASSIGN_OR_RETURN(e->selected_, HostSelected(text, name));
    FAY_RETURN_IF_ERROR(EnsureTracefs());
    e->text_ = hq.local;
    // The caller's --max-keys, within this agent's own.
    if (want_keys > lim.max_keys)
      return Error(Code::kInvalidArgument,
                   fmt::format("the query asks for {} keys; this agent allows {} (--max-keys)",
                               want_keys, lim.max_keys));
    PlanOptions popt;
    popt.max_keys = want_keys ? want_keys : lim.max_keys;
    popt.uprobe_multi = bpf::UprobeMultiSupported();
    FAY_ASSIGN_OR_RETURN(e->plan_, CompileQuery(e->text_, e->catalog_, popt));
    const Plan& p = e->plan_;
    if (p.mode != PlanMode::kAggregate)
      return Error(Code::kInvalidArgument, "only aggregating queries run across hosts");
    if (p.probes.size() > lim.max_probes)
      return Error(Code::kInvalidArgument,
                   fmt::format("the query attaches {} probes; this agent allows {} (--max-probes)",
                               p.probes.size(), lim.max_probes));
    // The aggregation map at its fullest, each CPU's values apart (a per-CPU hash).
    uint64_t map_bytes = uint64_t{p.max_keys} *
                         (static_cast<uint64_t>(p.key_size) +
                          static_cast<uint64_t>(p.value_size) * static_cast<uint64_t>(NumCpus()));
    if (map_bytes > lim.max_map_bytes)
      return Error(Code::kInvalidArgument,
                   fmt::format("the query's map takes up to {} MiB ({} keys of {} + {} bytes on "
                               "{} CPUs); this agent allows {} MiB (--max-map-memory)",
                               (map_bytes + (1 << 20) - 1) >> 20, p.max_keys, p.key_size,
                               p.value_size, NumCpus(), lim.max_map_bytes >> 20));
    // The shape of the states this node merges: its plan's, with the host key where the
    // query has it. Compiled even when the host filter leaves this host out, for its subtree.
    e->shape_ = ShapeOf(p, e->host_key_);
    if (!e->selected_) return e;  // its host filter leaves this host out: nothing to attach
    bpf::CodegenOptions copt;
    copt.self_tgid = static_cast<uint32_t>(getpid());
    FAY_ASSIGN_OR_RETURN(e->live_, bpf::LiveQuery::Load(e->plan_, copt));
    FAY_RETURN_IF_ERROR(e->live_->Attach());
    return e;
  }

  pb::WindowState TakeWindow(uint64_t index, bool last) override {
    pb::WindowState out;
    out.set_version(kProtocolVersion);
    out.set_index(index);
    pb::HostState* h = out.add_hosts();
    h->set_host(name_);
    h->set_address(address_);
    if (!selected_) return out;
    auto rs = live_->ReadWindow(RealtimeNs());
    if (!rs.ok()) {
      h->set_error("read: " + rs.status().message());
      return out;
    }
    if (host_key_ >= 0)
      for (Row& row : rs->rows)
        row.keys.insert(row.keys.begin() + host_key_, Value{std::string(name_)});
    RowsToGroups(rs->rows, &out);
    RunStats s = live_->Stats();
    pb::Stats* st = out.mutable_stats();
    st->set_events_seen(s.events_seen - sent_.events_seen);
    st->set_events_matched(s.events_matched - sent_.events_matched);
    st->set_dropped(s.dropped - sent_.dropped);
    st->set_map_full(s.map_full - sent_.map_full);
    st->set_read_errors(s.read_errors - sent_.read_errors);
    sent_ = s;
    if (last) live_->Detach();
    return out;
  }

  const GroupShape& shape() const { return shape_; }

  ~LiveEngine() override {
    if (live_) live_->Detach();
  }

 private:
  LiveEngine() = default;
  std::string name_, address_, text_;
  int host_key_ = -1;
  bool selected_ = true;
  SystemCatalog catalog_;
  Plan plan_;
  GroupShape shape_;
  std::unique_ptr<bpf::LiveQuery> live_;
  RunStats sent_;
};

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
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Running queries see g_stop and end (their probes detached); then the server goes.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  return 0;
}

}  // namespace fay::cluster
