// The cluster's messages as a hostile peer could send them: arbitrary bytes parsed as the
// protobuf a child streams up (WindowState) and as the request a parent sends down
// (QueryRequest), then everything fay's own code does with them: the shape check against a
// query's plan, decoding every aggregate state, merging into a window (twice, so a state meets
// itself), closing the window and decoding it again, and the request's validation, host split
// and tree layout. Every input ends in a refusal with a reason or a merged window; nothing
// crashes, leaks or reads past a buffer.
#include <cstdint>
#include <string>

#include "cluster/host_query.h"
#include "cluster/node.h"
#include "cluster/window_table.h"

namespace {

using namespace fay;
using namespace fay::cluster;

// `count(), hist(latency) by comm`: the shape the bench's states have, as two tables (a group
// names its table: one past them is refused).
QueryShape BenchShape() {
  GroupShape g;
  g.keys = {pb::Value::kS};
  AggSpec c, h;
  c.func = AggFunc::kCount;
  h.func = AggFunc::kHist;
  g.aggs = {c, h};
  return {g, g};
}

void Window(const pb::WindowState& ws) {
  static const QueryShape shape = BenchShape();
  for (bool shaped : {true, false}) {
    WindowTable t(64, shaped ? std::optional<QueryShape>(shape) : std::nullopt);
    std::string why;
    bool a = t.Add(ws, &why);
    if (!a && why.empty() && ws.index() == 0) __builtin_trap();  // refused without a reason
    t.Add(ws);
    (void)t.Heard(ws.index(), {"h1:1"});
    pb::WindowState out = t.Close(ws.index());
    std::vector<Row> rows;
    for (uint32_t table : {0u, 1u})  // merged into something bad
      if (a && !GroupsToRows(out, &rows, table).ok()) __builtin_trap();
    for (const Row& r : rows)
      for (const AggState& s : r.aggs) (void)s.Count();
  }
}

void Request(const pb::QueryRequest& r) {
  uint64_t now = 1'800'000'000ull * 1'000'000'000;
  if (!ValidateRequest(r, now).ok()) return;
  (void)SplitHostQuery(r.query());
  (void)HostSelected(r.query(), "h1");
  std::vector<std::string> hosts(r.subtree().begin(), r.subtree().end());
  size_t covered = 0;
  for (auto& [child, below] : Layout(hosts, r.fanout())) covered += 1 + below.size();
  if (covered != hosts.size()) __builtin_trap();  // a host lost or doubled by the layout
  for (uint64_t i = r.first_window(); i < r.first_window() + 4; ++i) {
    (void)WindowEnd(r, i);
    if (IsLastWindow(r, i)) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A window state is at most 64 MiB on the wire; a few hundred KB reach every path.
  if (size > (1 << 20)) return 0;
  pb::WindowState ws;
  if (ws.ParseFromArray(data, static_cast<int>(size))) Window(ws);
  pb::QueryRequest req;
  if (req.ParseFromArray(data, static_cast<int>(size))) Request(req);
  return 0;
}
