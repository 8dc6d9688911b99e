"""Offline queries: `fay query -i` over a recorded trace of W1's 2,000,000 getppid calls.

The trace is recorded once (setup). Each tool is one offline query; its check reads what
`fay query -v` prints: events per second of wall time, and events per CPU-second of the reading
threads (reading, CRC check, decompression, decoding and evaluation; compiling the query and
printing are outside it). One thread gives the one-core figure; the default, one reader per CPU,
gives the all-cores figure. The untraced baseline is `fay info` over the same file.
"""

import os
import re
import subprocess

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, exit_ok

ORDER = 80
CALLS = 2_000_000
START_UP = 15  # the static test program's fixed calls (tests/testprogs/README.md)

_RATE = re.compile(r"read (\d+) events in [\d.]+ s with (\d+) threads?: ([\d.]+) M events/s; "
                   r"([\d.]+) M events per CPU-second")


def _rates(run):
    m = _RATE.search(run.stderr or "")
    if not m:
        return "fay query -v printed no throughput line", None
    run.events = int(m.group(1))
    run.metrics["threads"] = int(m.group(2))
    run.metrics["M_events_per_s"] = float(m.group(3))
    run.metrics["M_events_per_cpu_s"] = float(m.group(4))
    return None, None


def _rule(tool, floor):
    def rule(results, _all):
        t = next((r for r in results["tools"] if r["tool"] == tool), None)
        if not t or t["status"] != "ok":
            return "n/a", f"{tool} did not succeed"
        per_core = t["metrics"]["M_events_per_cpu_s"]
        every = next((r for r in results["tools"] if r["tool"] == tool.replace("1 core", "all "
                                                                                "cores")), None)
        extra = ""
        if every and every["status"] == "ok":
            extra = (f"; all cores ({every['metrics']['threads']:.0f} threads) "
                     f"{every['metrics']['M_events_per_s']:.1f} M events/s wall")
        return ("PASS" if per_core >= floor else "FAIL"), (
            f"{per_core:.1f} M events per CPU-second on one core (>= {floor}){extra}")
    rule.__doc__ = f"Issue 7: {tool} >= {floor} M events/s on one core."
    return rule


def workloads(env):
    trace = os.path.join(env.data_dir(), "offline-w1.fay")
    calls = env.scaled(CALLS)

    def setup():
        if os.path.exists(trace):
            return None
        prog = env.testprog("getppid_loop")
        r = subprocess.run([env.fay, "record", "-q", "-o", trace, "--", prog, str(calls)],
                           capture_output=True, text=True)
        return None if r.returncode == 0 else f"fay record failed: {r.stderr.strip()[-200:]}"

    def query(name, q, threads):
        argv = [env.fay, "query", "-i", trace, "-v", "--format", "json"]
        if threads:
            argv += ["--threads", str(threads)]
        return Tool(name, "fay", argv + [q], all_of(exit_ok, _rates), needs=[env.fay])

    count = "syscall:* | count() by comm"
    hist = "syscall:* | hist(latency) by probe"
    return [Workload("offline-query", "offline", f"fay query -i over a recording of {calls} "
                     "getppid calls", calls + START_UP, [
                         Tool("fay info (reads the file)", "untraced", [env.fay, "info", trace],
                              exit_ok, needs=[env.fay]),
                         query("count() by comm, 1 core", count, 1),
                         query("count() by comm, all cores", count, 0),
                         query("hist(latency) by probe, 1 core", hist, 1),
                         query("hist(latency) by probe, all cores", hist, 0),
                     ], acceptance=[
                         ("offline count() by comm (issue 7)", _rule("count() by comm, 1 core", 10)),
                         ("offline hist(latency) by probe (issue 7)",
                          _rule("hist(latency) by probe, 1 core", 3)),
                     ], setup=setup)]
