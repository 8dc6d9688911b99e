"""The Prometheus exporter (issue 27): a standing query's metrics with 1,000 label sets (count and
a 14-bucket hist(latency) by pid), served by the agent's /metrics endpoint and scraped over HTTP
as Prometheus does (bench/metrics_bench.cc, OpenMetrics). Limits: a scrape answered in <= 20 ms,
and <= 1% of a CPU at a 15 s scrape interval (the windows' updates, every 10 s, included).
Its own section of docs/BENCHMARKS.md: `bench/run --only metrics`.
"""

import os
import re

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, exit_ok

ORDER = 95
SECTION = "metrics"
_LINE = re.compile(r"metrics: (\d+) label sets, scrape median ([\d.]+) ms max ([\d.]+) ms, (\d+) "
                   r"bytes, cpu ([\d.]+) ms a scrape, ([\d.]+) ms a window: ([\d.]+)% of a CPU")
METRICS = [("scrape_ms", "scrape median (ms)", ".2f"), ("scrape_max_ms", "scrape max (ms)", ".2f"),
           ("kbytes", "scrape size (KB)", ".0f"), ("cpu_ms_scrape", "CPU a scrape (ms)", ".2f"),
           ("cpu_ms_window", "CPU a window (ms)", ".2f"), ("cpu_pct", "% of a CPU", ".3f")]
NAME = "1,000 label sets, 50 scrapes"


def _figures(run):
    m = _LINE.search(run.stderr or "")
    if not m:
        return "metrics_bench printed no figures", None
    run.metrics.update(scrape_ms=float(m.group(2)), scrape_max_ms=float(m.group(3)),
                       kbytes=int(m.group(4)) / 1000, cpu_ms_scrape=float(m.group(5)),
                       cpu_ms_window=float(m.group(6)), cpu_pct=float(m.group(7)))
    return None, None


def _rule(key, limit, text):
    def rule(results, _all):
        t = next((t for t in results["tools"] if t["tool"] == NAME and t["status"] == "ok"), None)
        if not t:
            return "n/a", f"{NAME} did not succeed"
        v = t["metrics"][key]
        return ("PASS" if v <= limit else "FAIL"), text.format(v=v, limit=limit, **t["metrics"])
    return rule


def workloads(env):
    prog = os.path.join(env.build, "bench", "metrics_bench")
    tools = [Tool(NAME, "fay", [prog, "1000", "50"], all_of(exit_ok, _figures), needs=[prog])]
    return [Workload("metrics-1000", SECTION,
                     "a standing query's /metrics with 1,000 label sets, scraped over HTTP "
                     "(bench/metrics_bench.cc)", None, tools, metrics=METRICS, section=SECTION,
                     acceptance=[("scrape of 1,000 label sets <= 20 ms (issue 27)",
                                  _rule("scrape_ms", 20,
                                        "median {v:.2f} ms, worst {scrape_max_ms:.2f} ms, "
                                        "{kbytes:.0f} KB (<= {limit} ms)")),
                                 ("exporter <= 1% of a CPU at a 15 s scrape interval (issue 27)",
                                  _rule("cpu_pct", 1.0,
                                        "{v:.3f}% ({cpu_ms_scrape:.2f} ms a scrape, "
                                        "{cpu_ms_window:.2f} ms a 10 s window) (<= {limit}%)"))])]
