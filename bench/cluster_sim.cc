// A thousand agents in one process, for `bench/run --only cluster` (bench/workloads/cluster.py).
//
//   cluster_sim --port BASE --agents N [--keys K] [--seed S]
//   cluster_sim --dump DIR      writes seed messages for tests/fuzz/corpus/cluster
//
// Serves the cluster protocol on 127.0.0.1:BASE .. BASE+N-1 with no eBPF at all. An agent that
// is sent a subtree (an inner node of the coordinator's tree) runs the real RunNode: it fans out
// over real gRPC to its children, here in the same process, and merges with the real window
// table. Every agent's own part is one fixed state per window, built once at start with the
// engine's own AggState: `count() by comm` over K comms (200) plus `hist(latency)` of the
// latencies a syscall-heavy host shows (a log-normal spread around 2 us). That is the state of
// `syscall:* | count(), hist(latency) by comm` on such a host. A leaf writes it at each window's
// end without decoding it again: on a real host that cost is the host's own, not the tree's.
// Prints "listening on N ports" once every port is bound; exits on SIGINT or SIGTERM.
#include <signal.h>

#include <atomic>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "cluster/channel.h"
#include "cluster/node.h"
#include "fay_cluster.grpc.pb.h"

namespace fay::cluster {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}

// count() and hist(latency) for each of `keys` comms, deterministic for a seed.
pb::WindowState MakeState(int keys, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> latency(std::log(2000.0), 1.5);  // ns
  AggSpec count_spec, hist_spec;
  count_spec.func = AggFunc::kCount;
  hist_spec.func = AggFunc::kHist;
  std::vector<Row> rows;
  for (int k = 0; k < keys; ++k) {
    AggState count(count_spec), hist(hist_spec);
    // A few busy comms, a long tail of quiet ones (Zipf-like): 20,000 / (k + 1) calls.
    int calls = 20000 / (k + 1) + 1;
    for (int c = 0; c < calls; ++c) {
      count.Update(0);
      hist.Update(static_cast<int64_t>(latency(rng)));
    }
    rows.push_back(Row{{Value{fmt::format("comm-{:03}", k)}}, {count, hist}});
  }
  pb::WindowState ws;
  ws.set_version(kProtocolVersion);
  RowsToGroups(rows, &ws);
  pb::Stats* st = ws.mutable_stats();
  for (const Row& r : rows) st->set_events_seen(st->events_seen() + r.aggs[0].Count());
  st->set_events_matched(st->events_seen());
  return ws;
}

class CannedEngine : public LocalEngine {
 public:
  CannedEngine(const pb::WindowState& state, const std::string& name, const std::string& address)
      : state_(state) {
    pb::HostState* h = state_.add_hosts();
    h->set_host(name);
    h->set_address(address);
  }
  pb::WindowState TakeWindow(uint64_t index, bool last) override {
    state_.set_index(index);
    state_.set_last(last);
    return state_;
  }

 private:
  pb::WindowState state_;
};

class SimService final : public pb::Agent::Service {
 public:
  explicit SimService(pb::WindowState state) : state_(std::move(state)) {}

  grpc::Status Run(grpc::ServerContext* ctx, const pb::QueryRequest* req,
                   grpc::ServerWriter<pb::WindowState>* writer) override {
    if (req->version() != kProtocolVersion)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "protocol version");
    std::string name = "sim-" + req->address().substr(req->address().rfind(':') + 1);
    CannedEngine engine(state_, name, req->address());
    std::atomic<bool> stop{false};
    auto cancelled = [&] { return ctx->IsCancelled() || g_stop.load(); };
    if (req->subtree_size() > 0) {
      NodeOptions no;
      no.request = *req;
      no.tls.insecure = true;
      no.self_address = req->address();
      bool ok = RunNode(
          no, &engine, [&](const pb::WindowState& ws) { return writer->Write(ws); }, cancelled,
          stop);
      return ok ? grpc::Status::OK : grpc::Status(grpc::StatusCode::CANCELLED, "ended");
    }
    // A leaf: its state at each window's end, as a real agent sends it.
    for (uint64_t i = req->first_window();; ++i) {
      uint64_t end = WindowEnd(*req, i);
      while (RealtimeNs() < end) {
        if (cancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "ended");
        // Up to a whole window: a thousand threads waking every few ms would cost the
        // simulator more CPU than the agents it stands for.
        uint64_t left = end - RealtimeNs();
        std::this_thread::sleep_for(
            std::chrono::nanoseconds(std::min<uint64_t>(left, 1'000'000'000)));
      }
      bool last = IsLastWindow(*req, i);
      if (!writer->Write(engine.TakeWindow(i, last))) return grpc::Status::OK;
      if (last) return grpc::Status::OK;
    }
  }

  grpc::Status Stop(grpc::ServerContext*, const pb::StopRequest*, pb::StopReply*) override {
    return grpc::Status::OK;
  }

 private:
  pb::WindowState state_;
};

// Seeds for tests/fuzz/corpus/cluster (tests/fuzz/make_corpus.sh): states and requests as a
// real peer sends them.
int Dump(const std::string& dir) {
  auto write = [&](const std::string& name, const google::protobuf::Message& m) {
    FILE* f = fopen((dir + "/" + name).c_str(), "wb");
    if (!f) return false;
    std::string bytes = m.SerializeAsString();
    bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    return fclose(f) == 0 && ok;
  };
  pb::WindowState small = MakeState(3, 1), empty;
  small.set_index(2);
  pb::HostState* h = small.add_hosts();
  h->set_host("h1");
  h->set_address("h1:1");
  empty.set_version(kProtocolVersion);
  *empty.add_hosts() = *h;
  empty.mutable_hosts(0)->set_error("deadline");
  pb::QueryRequest req;
  req.set_version(kProtocolVersion);
  req.set_query_id("0123456789abcdef");
  req.set_query("syscall:* | where host == \"h1\" | count(), hist(latency) by comm, host");
  for (const char* a : {"h2:1", "h3:1", "h4:1", "h5:1", "h6:1"}) req.add_subtree(a);
  req.set_fanout(2);
  req.set_start_unix_ns(1'800'000'000ull * 1'000'000'000);
  req.set_every_ns(1'000'000'000);
  req.set_for_ns(5'000'000'000);
  req.set_deadline_ns(500'000'000);
  req.set_address("h1:1");
  bool ok = write("state-3-keys.pb", small) && write("state-20-keys.pb", MakeState(20, 2)) &&
            write("state-error.pb", empty) && write("request-tree.pb", req);
  if (!ok) fmt::print(stderr, "cluster_sim: cannot write into {}\n", dir);
  return ok ? 0 : 1;
}

int Main(int argc, char** argv) {
  int base = 0, agents = 0, keys = 200;
  uint32_t seed = 1;
  if (argc == 3 && std::string(argv[1]) == "--dump") return Dump(argv[2]);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--port") base = std::atoi(argv[i + 1]);
    if (a == "--agents") agents = std::atoi(argv[i + 1]);
    if (a == "--keys") keys = std::atoi(argv[i + 1]);
    if (a == "--seed") seed = static_cast<uint32_t>(std::atoi(argv[i + 1]));
  }
  if (base <= 0 || agents <= 0 || base + agents > 65536) {
    fmt::print(stderr, "usage: cluster_sim --port BASE --agents N [--keys K] [--seed S]\n");
    return 2;
  }
  SimService service(MakeState(keys, seed));
  grpc::ServerBuilder b;
  std::vector<int> bound(agents, 0);
  for (int i = 0; i < agents; ++i)
    b.AddListeningPort(fmt::format("127.0.0.1:{}", base + i), grpc::InsecureServerCredentials(),
                       &bound[i]);
  ConfigureServer(&b);
  // Every agent's stream holds a thread of the synchronous server for the whole query.
  grpc::ResourceQuota quota("cluster_sim");
  quota.SetMaxThreads(4 * agents + 64);
  b.SetResourceQuota(quota);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  for (int i = 0; i < agents; ++i)
    if (!server || bound[i] == 0) {
      fmt::print(stderr, "cluster_sim: cannot listen on 127.0.0.1:{}\n", base + i);
      return 1;
    }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  fmt::print("listening on {} ports\n", agents);
  fflush(stdout);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace
}  // namespace fay::cluster

int main(int argc, char** argv) {
  return fay::cluster::Main(argc, argv);
}
