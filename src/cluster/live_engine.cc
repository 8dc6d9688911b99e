#include "cluster/live_engine.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>

#include <bpf/libbpf.h>
#include <fmt/format.h>

#include "bpf/attach.h"
#include "cluster/host_query.h"
#include "common/clock.h"
#include "probes/tracefs.h"
#include "query/compile.h"

namespace fay::cluster {
namespace {

int NumCpus() {
  static const int n = std::max(1, libbpf_num_possible_cpus());
  return n;
}

}  // namespace

Expected<std::unique_ptr<LiveEngine>> LiveEngine::Start(const std::string& text,
                                                        const std::string& name,
                                                        const std::string& address,
                                                        uint32_t want_keys,
                                                        const AgentLimits& lim) {
  auto e = std::unique_ptr<LiveEngine>(new LiveEngine());
  e->name_ = name;
  e->address_ = address;
  FAY_ASSIGN_OR_RETURN(HostQuery hq, SplitHostQuery(text));
  e->host_keys_ = hq.KeyIndexes();
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
  // The state pipelines' probes and maps count with the query's.
  size_t probes = p.probes.size();
  uint64_t state_bytes = 0;
  for (const auto& sp : p.states) {
    probes += sp->probes.size();
    state_bytes += uint64_t{p.max_keys} * static_cast<uint64_t>(sp->key_size + sp->value_size);
  }
  if (probes > lim.max_probes)
    return Error(Code::kInvalidArgument,
                 fmt::format("the query attaches {} probes; this agent allows {} (--max-probes)",
                             probes, lim.max_probes));
  // The aggregation maps at their fullest, each CPU's values apart (a per-CPU hash), every
  // table's.
  uint64_t map_bytes = state_bytes;
  for (const Plan* t : AllTables(p))
    map_bytes += uint64_t{p.max_keys} *
                 (static_cast<uint64_t>(t->key_size) +
                  static_cast<uint64_t>(t->value_size) * static_cast<uint64_t>(NumCpus()));
  if (map_bytes > lim.max_map_bytes) {
    std::string sizes;  // each table's key + value bytes
    for (const Plan* t : AllTables(p))
      sizes += fmt::format("{}{} + {}", sizes.empty() ? "" : ", ", t->key_size, t->value_size);
    return Error(Code::kInvalidArgument,
                 fmt::format("the query's map takes up to {} MiB ({} keys of {} bytes on "
                             "{} CPUs); this agent allows {} MiB (--max-map-memory)",
                             (map_bytes + (1 << 20) - 1) >> 20, p.max_keys, sizes, NumCpus(),
                             lim.max_map_bytes >> 20));
  }
  // The shape of the states this node merges: its plan's, with the host key where the
  // query has it. Compiled even when the host filter leaves this host out, for its subtree.
  e->shape_ = ShapeOf(p, e->host_keys_);
  if (!e->selected_) return e;  // its host filter leaves this host out: nothing to attach
  bpf::CodegenOptions copt;
  copt.self_tgid = static_cast<uint32_t>(getpid());
  FAY_ASSIGN_OR_RETURN(e->live_, bpf::LiveQuery::Load(e->plan_, copt));
  FAY_RETURN_IF_ERROR(e->live_->Attach());
  return e;
}

pb::WindowState LiveEngine::TakeWindow(uint64_t index, bool last) {
  pb::WindowState out;
  out.set_version(kProtocolVersion);
  out.set_index(index);
  pb::HostState* h = out.add_hosts();
  h->set_host(name_);
  h->set_address(address_);
  if (!selected_) return out;
  auto tables = live_->ReadWindows(RealtimeNs());
  if (!tables.ok()) {
    h->set_error("read: " + tables.status().message());
    return out;
  }
  for (size_t t = 0; t < tables->size(); ++t) {
    const int key = t < host_keys_.size() ? host_keys_[t] : -1;
    std::vector<Row>& rows = (*tables)[t].rows;
    if (key >= 0)
      for (Row& row : rows) row.keys.insert(row.keys.begin() + key, Value{std::string(name_)});
    RowsToGroups(rows, &out, static_cast<uint32_t>(t));
  }
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

void LiveEngine::Tick() {
  if (!live_) return;
  const uint64_t now = ClockNs(CLOCK_MONOTONIC);
  if (now - last_tick_ns_ < 50'000'000) return;  // woken by every child's state: at most this
  last_tick_ns_ = now;
  // The records every 50 ms (a ring read); the stack keys' processes every 200 ms, as a local
  // query reads them (a walk of the maps' keys).
  if (now - last_stacks_ns_ < 200'000'000) {
    live_->DrainMappingRecords();
    return;
  }
  last_stacks_ns_ = now;
  live_->RememberStackProcesses();
}

Expected<std::vector<ResultSet>> LiveEngine::TakeRows() {
  if (!selected_) return std::vector<ResultSet>(plan_.tables.size() + 1);
  return live_->ReadWindows(RealtimeNs());
}

LiveEngine::~LiveEngine() {
  if (live_) live_->Detach();
}

}  // namespace fay::cluster
