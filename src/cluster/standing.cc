#include "cluster/standing.h"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include <bpf/libbpf.h>
#include <fmt/format.h>

#include "cluster/live_engine.h"
#include "common/clock.h"
#include "probes/catalog.h"
#include "query/compile.h"

namespace fay::cluster {
namespace {

constexpr const char* kDefaultEvery = " | every 10s";

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool ValidName(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

Expected<std::vector<StandingQuery>> ReadStandingFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(Code::kNotFound, fmt::format("{}: cannot read the standing queries", path));
  std::vector<StandingQuery> out;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const std::string t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    const size_t eq = t.find('=');
    const std::string name = eq == std::string::npos ? "" : Trim(t.substr(0, eq));
    if (eq == std::string::npos || !ValidName(name))
      return Error(Code::kInvalidArgument,
                   fmt::format("{}:{}: expected NAME = QUERY, NAME a letter or _ then letters, "
                               "digits or _ (e.g. `reads = syscall:read | count() by comm`)",
                               path, line_no));
    for (const StandingQuery& q : out)
      if (q.name == name)
        return Error(Code::kInvalidArgument, fmt::format("{}:{}: {} is already the name of line {}",
                                                         path, line_no, name, q.line));
    std::string text = Trim(t.substr(eq + 1));
    if (text.empty())
      return Error(Code::kInvalidArgument,
                   fmt::format("{}:{}: {} has no query", path, line_no, name));
    out.push_back({name, text, line_no});
  }
  if (out.empty())
    return Error(Code::kInvalidArgument, fmt::format("{}: no standing query in it", path));
  return out;
}

Expected<std::unique_ptr<StandingQueries>> StandingQueries::Start(const std::string& path,
                                                                  const AgentOptions& o,
                                                                  sinks::MetricsRegistry* metrics) {
  FAY_ASSIGN_OR_RETURN(std::vector<StandingQuery> qs, ReadStandingFile(path));
  auto s = std::unique_ptr<StandingQueries>(new StandingQueries());
  s->metrics_ = metrics;
  SystemCatalog catalog;
  for (StandingQuery& q : qs) {
    auto where = [&](const Status& st) {
      return Error(st.code(), fmt::format("{}:{}: {}: {}", path, q.line, q.name, st.message()));
    };
    // Its windows: `every` as written, or 10 s.
    auto plan = CompileQuery(q.text, catalog, PlanOptions{});
    if (!plan.ok()) return where(plan.status());
    if (plan->for_ns)
      return where(Error(Code::kInvalidArgument,
                         "a standing query runs as long as the agent: leave `for` out"));
    if (plan->snapshot_state >= 0)
      return where(Error(Code::kInvalidArgument,
                         "a standing query sends windows: snapshot does not run in one; use "
                         "every"));
    // A further table's metrics are NAME_2, NAME_3: they must not be another query's.
    for (size_t t = 1; t <= plan->tables.size(); ++t)
      for (const StandingQuery& other : qs)
        if (other.name == fmt::format("{}_{}", q.name, t + 1))
          return where(Error(Code::kInvalidArgument,
                             fmt::format("its table {} is exported as {}, the name of line {}",
                                         t + 1, other.name, other.line)));
    if (plan->every_ns == 0) q.text += kDefaultEvery;
    // As many keys as the agent's map memory holds (--max-map-memory), up to its --max-keys:
    // a quantile by comm takes 8 KB a key on each CPU.
    uint64_t per_key = 0;  // every table's map holds as many keys
    for (const Plan* t : AllTables(*plan))
      per_key += static_cast<uint64_t>(t->key_size) +
                 static_cast<uint64_t>(t->value_size) *
                     static_cast<uint64_t>(std::max(1, libbpf_num_possible_cpus()));
    const uint32_t keys = static_cast<uint32_t>(std::min<uint64_t>(
        o.limits.max_keys, o.limits.max_map_bytes / std::max<uint64_t>(per_key, 1)));
    if (keys < 16)
      return where(
          Error(Code::kInvalidArgument,
                fmt::format("its map would hold {} keys in --max-map-memory {} MiB; raise it", keys,
                            o.limits.max_map_bytes >> 20)));
    auto engine = LiveEngine::Start(q.text, o.name, o.listen, keys, o.limits);
    if (!engine.ok()) return where(engine.status());
    if ((*engine)->has_host_key())
      return where(Error(Code::kInvalidArgument,
                         "`by host` in a standing query is this agent's name on every row: "
                         "Prometheus's `instance` label already says it"));
    Running r;
    r.every_ns = (*engine)->plan().every_ns;
    r.engine = std::move(engine).value();
    r.q = q;
    const std::vector<const Plan*> tables = AllTables(r.engine->plan());
    for (size_t t = 0; t < tables.size(); ++t) {
      r.names.push_back(t == 0 ? q.name : fmt::format("{}_{}", q.name, t + 1));
      metrics->AddQuery(r.names.back(), q.text, *tables[t]);
      if (o.sink.empty()) continue;
      auto sink = sinks::ClickHouseSink::Start(sinks::ClickHouseTableUrl(o.sink + "_" + q.name, t),
                                               *tables[t], o.name, o.sink_create);
      if (!sink.ok()) return where(sink.status());
      r.sinks.push_back(std::move(sink).value());
    }
    s->running_.push_back(std::move(r));
  }
  const uint64_t now = ClockNs(CLOCK_MONOTONIC);
  for (Running& r : s->running_) r.next_ns = now + r.every_ns;
  return s;
}

StandingQueries::~StandingQueries() = default;

void StandingQueries::Run(const std::atomic<bool>& stop) {
  while (!stop) {
    const uint64_t now = ClockNs(CLOCK_MONOTONIC);
    for (Running& r : running_) {
      r.engine->Tick();
      if (now < r.next_ns) continue;
      auto tables = r.engine->TakeRows();
      for (size_t t = 0; t < r.names.size(); ++t) {
        if (!tables.ok()) {
          metrics_->NoteError(r.names[t], tables.status().message());
          continue;
        }
        metrics_->Update(r.names[t], (*tables)[t]);
        if (t < r.sinks.size()) r.sinks[t]->Window((*tables)[t]);
      }
      // The next end on the query's grid; windows missed while late are folded into this one.
      while (r.next_ns <= now) r.next_ns += r.every_ns;
    }
    uint64_t next = UINT64_MAX;
    for (const Running& r : running_) next = std::min(next, r.next_ns);
    // Stop is checked, and each engine ticks, every 50 ms.
    const uint64_t wait =
        std::min<uint64_t>(next - std::min(next, ClockNs(CLOCK_MONOTONIC)), 50'000'000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
  }
  for (Running& r : running_)
    for (size_t t = 0; t < r.sinks.size(); ++t)
      fmt::print(stderr, "fay agent: {}: {}\n", r.names[t], r.sinks[t]->Finish(5));
  running_.clear();  // each engine detaches its probes
}

}  // namespace fay::cluster
