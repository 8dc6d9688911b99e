#include "cluster/coordinator.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "cluster/channel.h"
#include "cluster/host_query.h"
#include "cluster/node.h"
#include "engine/offline/table_catalog.h"
#include "engine/offline/trace_catalog.h"
#include "engine/output/sink.h"
#include "fay_cluster.grpc.pb.h"
#include "probes/catalog.h"
#include "probes/tracefs.h"
#include "query/compile.h"
#include "query/parser.h"

namespace fay::cluster {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}

int Fail(const fay::Status& st) {
  bool located = st.message().rfind("query:", 0) == 0;
  fmt::print(stderr, "{}{}\n", located ? "" : "fay: ", st.message());
  return 1;
}

}  // namespace

std::vector<std::string> SplitHosts(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    if (comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

Expected<std::vector<std::string>> ReadHostsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return Error(Code::kInvalidArgument, fmt::format("--hosts-file {}: cannot read it", path));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) out.push_back(line.substr(b, e - b + 1));
  }
  return out;
}

int RunClusterQuery(const ClusterQueryOptions& o) {
  if (o.hosts.empty()) return Fail(Error(Code::kInvalidArgument, "--hosts names no host"));
  if (fay::Status st = CheckTls(o.tls); !st.ok()) return Fail(st);
  auto hq = SplitHostQuery(o.query);
  if (!hq.ok()) return Fail(hq.status());
  // The plan, for the output only: its keys and aggregates as the agents will send them. The
  // local kernel's catalog when this machine has tracefs, else fay's syscall table.
  SyscallTableCatalog table;
  TraceCatalog offline(table);
  SystemCatalog system;
  bool live = EnsureTracefs().ok();
  auto plan = live ? CompileQuery(hq->local, system) : CompileQuery(hq->local, offline);
  if (!plan.ok()) return Fail(plan.status());
  if (plan->mode != PlanMode::kAggregate)
    return Fail(Error(Code::kInvalidArgument,
                      "only aggregating queries run across hosts (select is local only)"));
  if (plan->snapshot_state >= 0)
    return Fail(Error(Code::kInvalidArgument,
                      "snapshot does not run across hosts yet: each host's trigger fires on its "
                      "own; use every, or query one host"));
  Plan& p = *plan;
  // The shape the states cross in, taken before host goes back among the output keys.
  const QueryShape shape = ShapeOf(p, hq->KeyIndexes());
  auto put_host = [](Plan* t, const HostKey& k) {
    if (k.index < 0) return;
    Slot host;
    host.name = k.name;
    host.type = Type::Str(64);
    t->keys.insert(t->keys.begin() + k.index, host);
  };
  put_host(&p, {hq->host_key, hq->key_name});
  for (size_t t = 0; t < p.tables.size() && t < hq->tables.size(); ++t)
    put_host(p.tables[t].get(), hq->tables[t]);
  // when and cluster act on the merged rows, here, with host among their columns.
  auto full = ParseQuery(o.query);
  if (!full.ok()) return Fail(full.status());
  if (fay::Status st = ApplyOutputStages(**full, &p); !st.ok()) return Fail(st);

  NodeOptions no;
  pb::QueryRequest& r = no.request;
  r.set_version(kProtocolVersion);
  std::random_device rd;
  r.set_query_id(fmt::format("{:016x}", (uint64_t{rd()} << 32) | rd()));
  r.set_query(o.query);
  for (const std::string& h : o.hosts) r.add_subtree(h);
  r.set_fanout(o.fanout);
  r.set_start_unix_ns(RealtimeNs());
  r.set_every_ns(p.every_ns);
  r.set_for_ns(p.for_ns);
  r.set_deadline_ns(o.deadline_ns);
  r.set_max_keys(o.max_keys);
  r.set_max_merge_bytes(o.max_merge_bytes);
  no.tls = o.tls;
  no.max_keys = o.max_merged_keys;
  no.shape = shape;

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);

  std::unique_ptr<OutputSink> sink =
      o.format == "json" ? MakeJsonSink(stdout) : MakeTextSink(stdout);
  bool partial = false, any_answer = false;
  std::vector<std::string> last_missing;
  RunStats total;
  uint64_t late = 0;
  auto emit = [&](const pb::WindowState& ws) {
    Coverage c;
    c.expected = static_cast<uint32_t>(o.hosts.size());
    for (const pb::HostState& h : ws.hosts()) {
      if (h.error().empty())
        ++c.answered;
      else
        c.missing.push_back(fmt::format("{}: {}", h.host(), h.error()));
    }
    c.truncated = ws.truncated();
    partial |= c.answered < c.expected || c.truncated;
    any_answer |= c.answered > 0;
    // Every table's window, the query's own first. JSON rows each carry the window's coverage;
    // the text says it once, after the last table.
    for (size_t t = 0; t <= p.tables.size(); ++t) {
      ResultSet rs;
      rs.window_end_ns = std::min(WindowEnd(r, ws.index()), RealtimeNs());
      if (fay::Status st = GroupsToRows(ws, &rs.rows, static_cast<uint32_t>(t)); !st.ok()) {
        fmt::print(stderr, "fay: window {}: {}\n", ws.index(), st.message());
        partial = true;
      }
      if (o.format == "json" || t == p.tables.size()) rs.coverage = c;
      sink->Window(t == 0 ? p : *p.tables[t - 1], rs);
    }
    sink->Flush();
    total.events_seen += ws.stats().events_seen();
    total.events_matched += ws.stats().events_matched();
    total.dropped += ws.stats().dropped();
    total.map_full += ws.stats().map_full();
    total.read_errors += ws.stats().read_errors();
    late += ws.stats().late();
    last_missing = c.missing;
    return true;
  };
  uint64_t t0 = RealtimeNs();
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!g_stop && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop = true;
  });
  RunNode(
      no, nullptr, emit, [] { return false; }, stop);
  stop = true;
  watcher.join();
  fflush(stdout);
  PrintSummary(stderr, total, (RealtimeNs() - t0) / 1e9);
  if (late)
    fmt::print(stderr, "fay: {} late states dropped (past their window's deadline)\n", late);
  if (!any_answer) {
    fmt::print(stderr, "fay: no host answered{}\n",
               last_missing.empty() ? "" : " (" + last_missing.front() + ", ...)");
    return 1;
  }
  return partial ? kExitPartial : 0;
}

int PrintClusterStatus(const std::string& hosts, const TlsFiles& tls) {
  int bad = 0;
  for (const std::string& h : SplitHosts(hosts)) {
    auto ch = Connect(h, tls);
    if (!ch.ok()) return Fail(ch.status()) + 1;
    auto stub = pb::Agent::NewStub(*ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    pb::StatusRequest req;
    req.set_version(kProtocolVersion);
    pb::StatusReply rep;
    grpc::Status st = stub->Status(&ctx, req, &rep);
    if (!st.ok()) {
      fmt::print("{}: unreachable: {}\n", h, Reason(st));
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
}

}  // namespace fay::cluster
