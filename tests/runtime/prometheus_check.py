#!/usr/bin/env python3
"""A real Prometheus scraping a fay agent's standing query (tests/runtime/cases/prometheus.test).

  prometheus_check.py FAY TESTPROGS

The agent runs `calls = uprobe:COPY:fay_hot | count() as n, hist(arg0) as h, lhist(arg0, 0, 4, 1)
as lh, quantile(arg0, 0.5) as med by arg1 | every 1s` over a copy of hammer (the uprobe sits on
the copy's inode: no other test's hammer counts), then `COPY 1 1000` calls fay_hot(i % 4, 0) a
thousand times: arg0 is 0, 1, 2 and 3, 250 times each. Prometheus (its own port and data
directory, loopback only) scrapes every second; the values are read back through its HTTP API
and printed, one per line, for the case to compare. Every process started is killed on exit;
the whole run is bounded (60 s).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def main():
    fay, testprogs = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="fay-prom-")
    procs = []
    deadline = time.monotonic() + 60
    try:
        prog = os.path.join(work, "prom_hammer")
        shutil.copy(os.path.join(testprogs, "hammer"), prog)
        standing = os.path.join(work, "standing.txt")
        with open(standing, "w") as f:
            f.write("# the test's standing queries\n\n"
                    f"calls = uprobe:{prog}:fay_hot | count() as n, hist(arg0) as h, "
                    "lhist(arg0, 0, 4, 1) as lh, quantile(arg0, 0.5) as med by arg1 | every 1s\n"
                    f"tabs = uprobe:{prog}:fay_hot | (count() as n by arg1), (count() as c by arg0)"
                    " | every 1s\n")
        agent_port, metrics_port, prom_port = free_port(), free_port(), free_port()
        agent = subprocess.Popen([fay, "agent", "--listen", f"127.0.0.1:{agent_port}", "--insecure",
                                  "--standing", standing, "--metrics",
                                  f"127.0.0.1:{metrics_port}"],
                                 stderr=subprocess.PIPE, text=True)
        procs.append(agent)
        for ln in agent.stderr:
            if "metrics at" in ln:
                break
        else:
            sys.exit("the agent did not start")
        cfg = os.path.join(work, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "scrape_configs:\n  - job_name: fay\n"
                    f"    static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]\n")
        prom = subprocess.Popen(["prometheus", f"--config.file={cfg}",
                                 f"--storage.tsdb.path={work}/data",
                                 f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=error"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(prom)
        if subprocess.run([prog, "1", "1000"]).returncode != 0:
            sys.exit("prom_hammer failed")

        def query(q):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            return json.loads(get(url))["data"]["result"]

        # Until the window with the calls has ended and been scraped (the first scrape can take
        # about 6 s after Prometheus starts).
        while time.monotonic() < deadline:
            try:
                r = query('fay_calls_n_total{arg1="0"}')
                if r and r[0]["value"][1] == "1000":
                    time.sleep(1.5)  # every series of that scrape is in
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            sys.exit("Prometheus never saw the count")
        print("n", query('fay_calls_n_total{arg1="0"}')[0]["value"][1])
        for metric in ("fay_calls_h_bucket", "fay_calls_lh_bucket"):
            rows = query(metric + '{arg1="0"}')
            buckets = sorted((float(r["metric"]["le"]), r["value"][1]) for r in rows)
            print(metric, " ".join(f"le={le:g}:{v}" for le, v in buckets))
        print("h count", query('fay_calls_h_count{arg1="0"}')[0]["value"][1])
        print("med", query('fay_calls_med{arg1="0",quantile="0.5"}')[0]["value"][1])
        q = query('histogram_quantile(0.9, fay_calls_lh_bucket{arg1="0"})')
        print("promql histogram_quantile(0.9) over lh", q[0]["value"][1] if q else "none")
        om = get(f"http://127.0.0.1:{metrics_port}/metrics")
        # Several tables: the second's metrics are NAME_2's.
        print("tables", query('fay_tabs_n_total{arg1="0"}')[0]["value"][1],
              sorted((r["metric"]["arg0"], r["value"][1]) for r in query("fay_tabs_2_c_total")))
        print("up", query('up{job="fay"}')[0]["value"][1])
        print("text format ends", "without # EOF" if "# EOF" not in om else "with # EOF")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
