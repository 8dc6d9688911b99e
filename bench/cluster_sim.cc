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
#include <condition_variable>
#include <mutex>
#include <random>
#include <set>
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

// Every leaf's state is written at its window's end from one thread: a thousand streams held
// by a thousand threads, each waking to write, cost the simulator more CPU than the agents it
// stands for. gRPC's callback API lets a stream wait without a thread. No lock is held across a
// gRPC call, since gRPC may run a reaction inline.
class Leaf final : public grpc::ServerWriteReactor<pb::WindowState> {
 public:
  Leaf(const pb::QueryRequest& req, const pb::WindowState& state, const std::string& name)
      : req_(req),
        out_(CannedEngine(state, name, req.address()).TakeWindow(0, false)),
        next_(req.first_window()) {}

  // Writes the next window once it has ended, one write at a time.
  void Tick(uint64_t now) {
    bool last;
    {
      std::lock_guard lk(mu_);
      if (finished_ || writing_ || cancelled_ || WindowEnd(req_, next_) > now) return;
      last = IsLastWindow(req_, next_);
      // The same state every window, its index and flag set in place: a copy of 200 groups per
      // leaf per window was a tenth of the simulator's CPU.
      out_.set_index(next_++);
      out_.set_last(last);
      writing_ = true;
      finished_ = last;
    }
    if (last)
      StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
    else
      StartWrite(&out_);
  }

  void OnWriteDone(bool ok) override {
    bool finish;
    {
      std::lock_guard lk(mu_);
      writing_ = false;
      finish = !finished_ && (!ok || cancelled_);
      finished_ = finished_ || finish;
    }
    if (finish) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "ended"));
  }
  void OnCancel() override {
    bool finish;
    {
      std::lock_guard lk(mu_);
      cancelled_ = true;
      finish = !finished_ && !writing_;  // else OnWriteDone finishes
      finished_ = finished_ || finish;
    }
    if (finish) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "ended"));
  }
  // gRPC is done with it; the ticker frees it.
  void OnDone() override { done = true; }

  std::atomic<bool> done{false};

 private:
  pb::QueryRequest req_;
  pb::WindowState out_;
  uint64_t next_;
  std::mutex mu_;
  bool writing_ = false, finished_ = false, cancelled_ = false;
};

// Owns the leaves: ticks them every 2 ms and frees those gRPC is done with.
class Ticker {
 public:
  Leaf* Add(std::unique_ptr<Leaf> l) {
    std::lock_guard lk(mu_);
    leaves_.push_back(std::move(l));
    return leaves_.back().get();
  }
  void Run() {  // until g_stop
    while (!g_stop) {
      {
        uint64_t now = RealtimeNs();
        std::lock_guard lk(mu_);
        std::erase_if(leaves_, [](const std::unique_ptr<Leaf>& l) { return l->done.load(); });
        for (auto& l : leaves_) l->Tick(now);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Leaf>> leaves_;
};

// An inner agent: the real RunNode on a thread of its own (one per inner node, 32 in all), each
// merged window written and waited for before the next.
class Inner final : public grpc::ServerWriteReactor<pb::WindowState> {
 public:
  Inner(const pb::QueryRequest& req, const pb::WindowState& state, const std::string& name)
      : engine_(state, name, req.address()) {
    no_.request = req;
    no_.tls.insecure = true;
    no_.self_address = req.address();
    thread_ = std::thread([this] {
      std::atomic<bool> stop{false};
      bool ok = RunNode(
          no_, &engine_, [this](const pb::WindowState& ws) { return Write(ws); },
          [this] { return cancelled_.load() || g_stop.load(); }, stop);
      Finish(ok ? grpc::Status::OK : grpc::Status(grpc::StatusCode::CANCELLED, "ended"));
    });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lk(mu_);
    write_ok_ = ok;
    writing_ = false;
    cv_.notify_all();
  }
  void OnCancel() override { cancelled_ = true; }
  // Self-owned, as gRPC's callback reactors are: freed when gRPC is done with it. Finish may run
  // this inline on the query's own thread, which then cannot join itself.
  void OnDone() override {
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
    delete this;
  }

 private:
  // Waits for the write, so ws outlives it and needs no copy.
  bool Write(const pb::WindowState& ws) {
    {
      std::lock_guard lk(mu_);
      writing_ = true;
    }
    StartWrite(&ws);
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !writing_; });
    return write_ok_;
  }

  NodeOptions no_;
  CannedEngine engine_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool writing_ = false, write_ok_ = true;
  std::thread thread_;
};

class SimService final : public pb::Agent::CallbackService {
 public:
  SimService(pb::WindowState state, Ticker* ticker) : state_(std::move(state)), ticker_(ticker) {}

  grpc::ServerWriteReactor<pb::WindowState>* Run(grpc::CallbackServerContext*,
                                                 const pb::QueryRequest* req) override {
    if (req->version() != kProtocolVersion) {
      struct Refused : grpc::ServerWriteReactor<pb::WindowState> {
        Refused() { Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "version")); }
        void OnDone() override { delete this; }
      };
      return new Refused;
    }
    std::string name = "sim-" + req->address().substr(req->address().rfind(':') + 1);
    if (req->subtree_size() > 0) return new Inner(*req, state_, name);
    return ticker_->Add(std::make_unique<Leaf>(*req, state_, name));
  }

  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* ctx, const pb::StopRequest*,
                                 pb::StopReply*) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  pb::WindowState state_;
  Ticker* ticker_;
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
  Ticker ticker;
  SimService service(MakeState(keys, seed), &ticker);
  grpc::ServerBuilder b;
  std::vector<int> bound(agents, 0);
  for (int i = 0; i < agents; ++i)
    b.AddListeningPort(fmt::format("127.0.0.1:{}", base + i), grpc::InsecureServerCredentials(),
                       &bound[i]);
  ConfigureServer(&b);
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
  ticker.Run();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace fay::cluster

int main(int argc, char** argv) {
  return fay::cluster::Main(argc, argv);
}
