#!/usr/bin/env python3
"""One run of a cluster benchmark (bench/workloads/cluster.py); its figures on stderr.

  cluster_run.py sim  --fay F --sim S --agents 1000 --fanout 32 --seconds 5
  cluster_run.py real --fay F --agents 16 --seconds 3
  cluster_run.py idle --fay F --seconds 10

sim: cluster_sim serves the agents; the coordinator (`fay query --hosts-file`) runs
`syscall:* | count(), hist(latency) by comm | every 1s` over them. real: that many `fay agent`
processes on loopback, each attaching `syscall:getppid | count() by host`. Both print

  cluster: windows W, C complete, hosts A of E in the worst, first window at T s, close
  latency median M ms max X ms,
  coordinator CPU per window C ms, coordinator RSS R MB

where a window's close latency is its arrival at the coordinator's output less its end, and
the CPU per window is the coordinator's between its first window and its last, per window (its
start-up, the query's compilation against the local kernel, is left out and printed apart).
idle: one agent with no query; its CPU over --seconds and its RSS.
Every process it starts is killed on every exit path. Loopback only.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) / 1024
    return 0.0


def wait_line(p, want, timeout):
    """Reads p's stdout (or stderr) until a line holds `want`."""
    end = time.monotonic() + timeout
    stream = p.stdout if p.stdout else p.stderr
    while time.monotonic() < end:
        ln = stream.readline()
        if not ln:
            return False
        if want in ln:
            return True
    return False


def start_sim(sim, agents):
    for _ in range(5):
        # Below Linux's ephemeral range (32768-60999), so no outgoing connection holds a port.
        base = random.randrange(20000, 32000 - agents)
        p = subprocess.Popen([sim, "--port", str(base), "--agents", str(agents)],
                             stdout=subprocess.PIPE, text=True)
        if wait_line(p, "listening on", 60):
            return p, [f"127.0.0.1:{base + i}" for i in range(agents)]
        p.kill()
        p.wait()
    sys.exit("cluster_run: cluster_sim could not bind its ports")


def start_agents(fay, n):
    procs, hosts = [], []
    base = random.randrange(20000, 32000 - n)
    for i in range(n):
        addr = f"127.0.0.1:{base + i}"
        p = subprocess.Popen([fay, "agent", "--listen", addr, "--name", f"r{i}", "--insecure"],
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        procs.append(p)
        hosts.append(addr)
    for p in procs:
        if not wait_line(p, "listening", 20):
            sys.exit("cluster_run: an agent did not start")
    return procs, hosts


def coordinate(fay, hosts, fanout, query, expect_windows):
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
        f.write("\n".join(hosts) + "\n")
        hosts_file = f.name
    argv = [fay, "query", "--insecure", "--hosts-file", hosts_file, "--fanout", str(fanout),
            "--format", "json", query]
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    windows = []  # (window end ns, arrival s, coordinator CPU s then, answered, expected)
    try:
        for ln in p.stdout:
            now = time.time()
            row = json.loads(ln)
            if windows and windows[-1][0] == row["window"]:
                continue
            windows.append((row["window"], now, cpu_s(p.pid), row.get("hosts_answered"),
                            row.get("hosts_expected")))
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if p.poll() is None:
            p.kill()
        os.unlink(hosts_file)
    err = p.stderr.read()
    if not windows:
        sys.exit(f"cluster_run: no window came (exit {p.returncode}): {err.strip()[-300:]}")
    lat = [arr - end / 1e9 for end, arr, *_ in windows]
    per_window = ((windows[-1][2] - windows[0][2]) / (len(windows) - 1)
                  if len(windows) > 1 else float("nan"))
    total_cpu = ru.ru_utime + ru.ru_stime
    answered = min(w[3] or 0 for w in windows)
    expected = windows[0][4] or len(hosts)
    complete = sum(1 for w in windows if (w[3] or 0) == expected)
    print(f"cluster: windows {len(windows)} of {expect_windows}, {complete} complete, hosts "
          f"{answered} of {expected} in the worst, "
          f"first window at {windows[0][1] - t0:.3f} s, close latency median "
          f"{statistics.median(lat) * 1000:.1f} ms max {max(lat) * 1000:.1f} ms, coordinator CPU "
          f"per window {per_window * 1000:.1f} ms, coordinator start {windows[0][2] * 1000:.0f} "
          f"ms CPU, total {total_cpu:.3f} s, coordinator RSS {ru.ru_maxrss / 1024:.1f} MB, "
          f"exit {p.returncode}", file=sys.stderr)
    # A partial window is a figure here (the worst window's hosts), not a failed run.
    return 0 if p.returncode in (0, 3) and len(windows) == expect_windows else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("sim", "real", "idle"))
    ap.add_argument("--fay", required=True)
    ap.add_argument("--sim")
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--fanout", type=int, default=32)
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    procs = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if a.mode == "idle":
            agents, _ = start_agents(a.fay, 1)
            procs += agents
            time.sleep(1)
            pid = agents[0].pid
            c0, t0 = cpu_s(pid), time.monotonic()
            time.sleep(a.seconds)
            c1, t1 = cpu_s(pid), time.monotonic()
            print(f"idle agent: CPU {(c1 - c0) / (t1 - t0) * 100:.3f}% of one CPU over "
                  f"{t1 - t0:.1f} s, RSS {rss_mb(pid):.1f} MB", file=sys.stderr)
            return 0
        if a.mode == "sim":
            sim, hosts = start_sim(a.sim, a.agents)
            procs.append(sim)
            query = f"syscall:* | count(), hist(latency) by comm | every 1s | for {a.seconds}s"
        else:
            agents, hosts = start_agents(a.fay, a.agents)
            procs += agents
            query = f"syscall:getppid | count() by host | every 1s | for {a.seconds}s"
        return coordinate(a.fay, hosts, a.fanout, query, a.seconds)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


if __name__ == "__main__":
    sys.exit(main())
