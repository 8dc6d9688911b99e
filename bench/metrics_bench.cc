// The Prometheus exporter's cost (issue 27): a standing query with LABELS label sets (count and
// hist(latency) by pid, each histogram 12 buckets wide) served by the agent's MetricsServer and
// scraped over HTTP SCRAPES times, as Prometheus does. Prints, on stderr, one line the bench
// parses: each scrape's wall time (median and max), its size, the CPU a scrape and a window's
// update cost this process, and what that makes at a 15 s scrape interval with 10 s windows.
//
//   metrics_bench LABELS SCRAPES
#include <httplib.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probes/catalog.h"
#include "query/compile.h"
#include "sinks/metrics.h"
#include "sinks/metrics_server.h"

namespace {

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fay;
  const int labels = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int scrapes = argc > 2 ? std::atoi(argv[2]) : 50;
  SystemCatalog catalog;
  auto plan =
      CompileQuery("syscall:getppid | count() as n, hist(latency) as lat by pid | every 10s",
                   catalog, PlanOptions{});
  if (!plan.ok()) {
    std::fprintf(stderr, "metrics_bench: %s\n", plan.status().message().c_str());
    return 1;
  }
  ResultSet window;
  for (int i = 0; i < labels; ++i) {
    Row r;
    r.keys.push_back(Value{int64_t{1000 + i}});
    for (const AggSlot& a : plan->aggs) {
      AggState s(SpecOf(*a.item));
      for (int64_t v = 1; v < (1 << 12); v = v * 2 + 1) s.Update(v + i);
      r.aggs.push_back(s);
    }
    window.rows.push_back(std::move(r));
  }
  sinks::MetricsRegistry reg;
  reg.AddQuery("calls", "syscall:getppid | count() as n, hist(latency) as lat by pid", *plan);
  // Windows: the update a standing query makes every `every`.
  const int windows = 20;
  double c0 = CpuSeconds();
  for (int w = 0; w < windows; ++w) reg.Update("calls", window);
  const double update_ms = (CpuSeconds() - c0) / windows * 1e3;

  auto server = sinks::MetricsServer::Start("127.0.0.1:0", &reg);
  if (!server.ok()) {
    std::fprintf(stderr, "metrics_bench: %s\n", server.status().message().c_str());
    return 1;
  }
  httplib::Client cli("127.0.0.1", (*server)->port());
  httplib::Headers om = {{"Accept", "application/openmetrics-text; version=1.0.0"}};
  std::vector<double> wall;
  size_t bytes = 0;
  c0 = CpuSeconds();
  for (int i = 0; i < scrapes; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto res = cli.Get("/metrics", om);
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!res || res->status != 200) {
      std::fprintf(stderr, "metrics_bench: scrape failed\n");
      return 1;
    }
    bytes = res->body.size();
  }
  // Both ends are this process: the client's parsing is in the figure, so it is an upper bound.
  const double scrape_cpu_ms = (CpuSeconds() - c0) / scrapes * 1e3;
  std::sort(wall.begin(), wall.end());
  const double pct = (scrape_cpu_ms / 15000 + update_ms / 10000) * 100;
  std::fprintf(
      stderr,
      "metrics: %d label sets, scrape median %.2f ms max %.2f ms, %zu bytes, cpu %.2f ms "
      "a scrape, %.2f ms a window: %.3f%% of a CPU at a 15 s scrape interval, 10 s windows\n",
      labels, wall[wall.size() / 2], wall.back(), bytes, scrape_cpu_ms, update_ms, pct);
  return 0;
}
