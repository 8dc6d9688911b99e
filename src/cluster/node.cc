#include "cluster/node.h"

#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "fay_cluster.grpc.pb.h"

namespace fay::cluster {

uint64_t RealtimeNs() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

uint64_t WindowEnd(const pb::QueryRequest& r, uint64_t index) {
  uint64_t end_all = r.for_ns() ? r.start_unix_ns() + r.for_ns() : UINT64_MAX;
  if (!r.every_ns()) return end_all;
  return std::min(end_all, r.start_unix_ns() + (index + 1) * r.every_ns());
}

Status ValidateRequest(const pb::QueryRequest& r, uint64_t now_ns) {
  constexpr uint64_t kDay = 24ull * 3600 * 1'000'000'000;
  auto bad = [](const std::string& why) {
    return Error(Code::kInvalidArgument, "a request no coordinator sends: " + why);
  };
  uint64_t start = r.start_unix_ns();
  if (start + kDay < now_ns || start > now_ns + kDay)
    return bad(fmt::format("its start is {} s from this host's clock (at most a day)",
                           (static_cast<int64_t>(start - now_ns)) / 1'000'000'000));
  if (r.for_ns() > 366 * kDay) return bad("its length is over a year");
  if (r.deadline_ns() > 60'000'000'000ull) return bad("its deadline is over a minute");
  if (r.subtree_size() > 0 && (r.fanout() < 2 || r.fanout() > 1024))
    return bad(fmt::format("fanout {} (2 to 1024)", r.fanout()));
  if (r.subtree_size() > 100'000) return bad(fmt::format("{} hosts under it", r.subtree_size()));
  if (r.query().size() > 65536) return bad(fmt::format("{} bytes of query", r.query().size()));
  if (r.every_ns() && r.first_window() > (r.for_ns() ? r.for_ns() : 366 * kDay) / r.every_ns())
    return bad(fmt::format("first window {} past its end", r.first_window()));
  return Status::Ok();
}

bool IsLastWindow(const pb::QueryRequest& r, uint64_t index) {
  if (!r.every_ns()) return true;
  return r.for_ns() && WindowEnd(r, index) >= r.start_unix_ns() + r.for_ns();
}

std::vector<std::pair<std::string, std::vector<std::string>>> Layout(
    const std::vector<std::string>& hosts, uint32_t fanout) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  if (fanout < 2) fanout = 2;
  if (hosts.size() <= fanout) {
    for (const std::string& h : hosts) out.push_back({h, {}});
    return out;
  }
  // fanout groups of nearly equal size; each group's first host is its inner agent.
  size_t n = hosts.size(), at = 0;
  for (uint32_t g = 0; g < fanout; ++g) {
    size_t size = n / fanout + (g < n % fanout ? 1 : 0);
    if (!size) continue;
    out.push_back(
        {hosts[at], std::vector<std::string>(hosts.begin() + at + 1, hosts.begin() + at + size)});
    at += size;
  }
  return out;
}

namespace {

// One child's stream, read by gRPC's callback threads into the window table. No thread is held
// per child: a flat coordinator over a thousand hosts would otherwise run a thousand, and their
// wake-ups, not the merging, were most of its CPU.
class Link final : public grpc::ClientReadReactor<pb::WindowState> {
 public:
  Link(std::string address, std::vector<std::string> subtree, WindowTable* table)
      : address(std::move(address)), subtree(std::move(subtree)), table_(table) {}

  void Begin(std::unique_ptr<pb::Agent::Stub> s, pb::QueryRequest r) {
    stub = std::move(s);
    req_ = std::move(r);
    stub->async()->Run(&ctx, &req_, this);
    StartRead(&ws_);
    StartCall();
  }

  // Ended without a call, for a channel that could not be made.
  void Fail(const std::string& why) {
    std::lock_guard ll(mu);
    error = why;
    done = true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (ws_.version() != kProtocolVersion) {
      read_error_ = fmt::format("speaks cluster protocol version {}, this fay {}", ws_.version(),
                                kProtocolVersion);
      ctx.TryCancel();
      return;
    }
    if (!ws_.error().empty()) {
      read_error_ = ws_.error();
      if (ws_.hosts_size() > 0) {
        std::lock_guard ll(mu);
        name = ws_.hosts(0).host();
      }
    } else {
      // A late state is counted by the table; one that does not fit the query ends the link
      // (retried next window) and is said in the window's coverage.
      std::string why;
      if (!table_->Add(ws_, &why) && !why.empty()) {
        read_error_ = why;
        ctx.TryCancel();
        return;
      }
    }
    StartRead(&ws_);
  }

  void OnDone(const grpc::Status& st) override {
    std::string why = read_error_;
    if (why.empty() && !st.ok()) why = Reason(st);
    std::lock_guard ll(mu);
    error = why;
    done = true;
    ended.notify_all();
  }

  // Waits for OnDone, after which gRPC touches this link no more.
  void Join() {
    std::unique_lock ll(mu);
    ended.wait(ll, [&] { return done.load(); });
  }

  const std::string address;
  const std::vector<std::string> subtree;
  grpc::ClientContext ctx;
  std::unique_ptr<pb::Agent::Stub> stub;
  std::atomic<bool> done{false};
  std::mutex mu;
  std::condition_variable ended;
  std::string error;     // why it ended, when it failed
  std::string name;      // the name it gave with an error, when it never answered
  bool handled = false;  // its failure was acted on (retry, re-dispatch)

 private:
  WindowTable* table_;
  pb::QueryRequest req_;
  pb::WindowState ws_;
  std::string read_error_;  // only the reading callback touches it before OnDone
};

class Fanout {
 public:
  Fanout(const NodeOptions& o, WindowTable* table) : o_(o), table_(table) {}
  ~Fanout() { Cancel(); }

  void Dispatch(const std::vector<std::string>& hosts, uint64_t first_window) {
    for (auto& [child, below] : Layout(hosts, o_.request.fanout()))
      Start(child, below, first_window);
  }

  // The reason a host has no word in a window: its link's error, or the failed inner agent
  // above it, or the deadline.
  std::string ErrorFor(const std::string& address,
                       const std::map<std::string, std::string>& names) {
    std::lock_guard lk(mu_);
    for (auto it = links_.rbegin(); it != links_.rend(); ++it) {
      Link& l = **it;
      std::lock_guard ll(l.mu);
      if (l.address == address) return l.error.empty() ? "deadline" : l.error;
      if (std::find(l.subtree.begin(), l.subtree.end(), address) != l.subtree.end() &&
          !l.error.empty())
        return fmt::format("inner agent {}: {}",
                           names.count(l.address) ? names.at(l.address) : l.address, l.error);
    }
    return "deadline";
  }

  // The name a host gave with its refusal, else its address.
  std::string NameFor(const std::string& address) {
    std::lock_guard lk(mu_);
    for (auto it = links_.rbegin(); it != links_.rend(); ++it) {
      std::lock_guard ll((*it)->mu);
      if ((*it)->address == address && !(*it)->name.empty()) return (*it)->name;
    }
    return address;
  }

  // Once a window: a failed child is retried; the hosts under a failed inner agent are
  // reached directly.
  void Maintain(uint64_t next_window) {
    std::vector<std::pair<std::string, std::vector<std::string>>> again;
    {
      std::lock_guard lk(mu_);
      for (auto& l : links_) {
        if (!l->done || l->handled) continue;
        std::lock_guard ll(l->mu);
        if (l->error.empty()) continue;  // it ended normally
        l->handled = true;
        again.push_back({l->address, l->subtree});
      }
    }
    for (auto& [addr, below] : again) {
      Start(addr, {}, next_window);
      if (!below.empty()) Dispatch(below, next_window);
    }
  }

  // Asks every child to end now, with its last window.
  void Stop() {
    std::vector<std::thread> calls;
    std::lock_guard lk(mu_);
    for (auto& l : links_) {
      if (l->done) continue;
      calls.emplace_back([this, stub = l->stub.get()] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
        pb::StopRequest req;
        req.set_version(kProtocolVersion);
        req.set_query_id(o_.request.query_id());
        pb::StopReply rep;
        (void)stub->Stop(&ctx, req, &rep);
      });
    }
    for (auto& t : calls) t.join();
  }

  void Cancel() {
    std::lock_guard lk(mu_);
    for (auto& l : links_)
      if (!l->done) l->ctx.TryCancel();
    for (auto& l : links_) l->Join();
  }

 private:
  void Start(const std::string& address, const std::vector<std::string>& below,
             uint64_t first_window) {
    auto l = std::make_unique<Link>(address, below, table_);
    Link* lp = l.get();
    {
      std::lock_guard lk(mu_);
      links_.push_back(std::move(l));
    }
    auto channel = Connect(address, o_.tls);
    if (!channel.ok()) {
      lp->Fail(channel.status().message());
      return;
    }
    pb::QueryRequest req = o_.request;
    req.clear_subtree();
    for (const std::string& h : below) req.add_subtree(h);
    req.set_first_window(first_window);
    req.set_address(address);
    // Each level closes its windows earlier than the one above, so that its merged state is
    // in before the parent's deadline.
    req.set_deadline_ns(o_.request.deadline_ns() * 3 / 4);
    lp->Begin(pb::Agent::NewStub(*channel), std::move(req));
  }

  const NodeOptions& o_;
  WindowTable* table_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace

bool RunNode(const NodeOptions& o, LocalEngine* local,
             const std::function<bool(const pb::WindowState&)>& emit,
             const std::function<bool()>& cancelled, const std::atomic<bool>& stop) {
  const pb::QueryRequest& r = o.request;
  WindowTable table(o.max_keys, o.shape,
                    r.max_merge_bytes() ? r.max_merge_bytes() : kDefaultMergeBytes);
  Fanout fanout(o, &table);
  std::vector<std::string> below(r.subtree().begin(), r.subtree().end());
  std::vector<std::string> expected = below;
  if (local) expected.push_back(o.self_address);
  fanout.Dispatch(below, r.first_window());
  std::map<std::string, std::string> names;  // address -> the name it answered with
  uint64_t late_reported = 0;
  bool stop_sent = false;
  auto wait_until = [&](uint64_t t, const std::function<bool()>& done) {
    for (uint64_t now = RealtimeNs(); now < t; now = RealtimeNs()) {
      uint64_t seen = table.adds();  // before done(): a state added after it wakes the wait
      if (cancelled()) return false;
      if (done && done()) return true;
      if (stop && !stop_sent) return true;
      if (local) local->Tick();
      // Woken by each state that arrives; at least every 50 ms to see cancel and stop.
      uint64_t left_ms = (t - now) / 1'000'000 + 1;
      table.WaitForAdd(seen, std::chrono::milliseconds(std::min<uint64_t>(left_ms, 50)));
    }
    return !cancelled();
  };
  for (uint64_t i = r.first_window();; ++i) {
    uint64_t end = WindowEnd(r, i);
    if (!wait_until(end, nullptr)) return false;
    bool last = IsLastWindow(r, i);
    if (stop) {
      last = true;
      end = std::min(end, RealtimeNs());
      if (!stop_sent) fanout.Stop();
      stop_sent = true;
    }
    if (local) table.Add(local->TakeWindow(i, last));
    uint64_t close_at = std::max(end, RealtimeNs()) + r.deadline_ns();
    if (!wait_until(close_at, [&] { return table.Heard(i, expected); })) return false;
    pb::WindowState out = table.Close(i);
    // Every host under this node gets a word: its answer, or why there is none.
    std::map<std::string, const pb::HostState*> heard;
    for (const pb::HostState& h : out.hosts()) {
      heard[h.address()] = &h;
      if (h.error().empty()) names[h.address()] = h.host();
    }
    for (const std::string& a : expected) {
      if (heard.count(a)) continue;
      pb::HostState* h = out.add_hosts();
      h->set_address(a);
      h->set_host(names.count(a) ? names[a] : fanout.NameFor(a));
      h->set_error(fanout.ErrorFor(a, names));
    }
    uint64_t late = table.late();
    out.mutable_stats()->set_late(out.stats().late() + late - late_reported);
    late_reported = late;
    out.set_last(last);
    if (!emit(out)) return false;
    if (last) return true;
    fanout.Maintain(i + 1);
  }
}

}  // namespace fay::cluster
