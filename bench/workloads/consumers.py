"""Consumers: the eBPF recorder's consumer threads apart from the traced program.

On two CPUs a live recording cannot show whether a second consumer adds throughput: the program
and its probes need a CPU, so a second consumer has none. bench/consumer_bench.cc feeds prepared
ring records (those of 8 threads, each thread's to ring tid % N as the probes route them) through
N consumer threads, each with the recorder's Assembler and a lane of one trace Writer, into
/dev/null, and prints its rate measured inside: consumed events per second of wall time.
Two mixes: W1's whole calls without buffers (2,000,000), and W5's reads of 4 KiB (262,144, every
buffer different, so each is hashed, stored and written).
"""

import os
import re

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, exit_ok

ORDER = 85
CONSUMERS = (1, 2)
_RATE = re.compile(r"consumed (\d+) events \((\d+) bytes of buffers\) in ([\d.]+) s with (\d+) "
                   r"consumers: ([\d.]+) M events/s, (\d+) MB/s")


def _rate(run):
    m = _RATE.search(run.stderr or "")
    if not m:
        return "consumer_bench printed no rate line", None
    run.events = int(m.group(1))
    run.metrics["M_events_per_s"] = float(m.group(5))
    run.metrics["MB_per_s"] = float(m.group(6))
    return None, None


def _name(mix, n):
    return f"{n} consumer{'s' if n > 1 else ''}, {mix}"


def _scaling(mix, floor):
    def rule(results, _all):
        rates = {}
        for n in CONSUMERS:
            t = next((r for r in results["tools"] if r["tool"] == _name(mix, n)), None)
            if not t or t["status"] != "ok":
                return "n/a", f"{_name(mix, n)} did not succeed"
            rates[n] = t["metrics"]["M_events_per_s"]
        ratio = rates[2] / rates[1]
        return ("PASS" if ratio >= floor else "FAIL"), (
            f"2 consumers {ratio:.2f}x 1 consumer (>= {floor}): {rates[1]:.2f} -> {rates[2]:.2f} "
            f"M events/s on {os.cpu_count()} CPUs")
    rule.__doc__ = f"Issue 5: consumer throughput on {mix} scales with the consumer threads."
    return rule


def workloads(env):
    prog = os.path.join(env.build, "bench", "consumer_bench")
    out = []
    for mix, calls, what in (("calls", env.scaled(2_000_000), "W1's whole calls"),
                             ("buffers", env.scaled(262_144), "W5's 4 KiB reads")):
        tools = [Tool(_name(mix, n), "untraced" if n == 1 else "fay",
                      [prog, mix, str(n), str(calls)], all_of(exit_ok, _rate), needs=[prog])
                 for n in CONSUMERS]
        out.append(Workload(f"consumers-{mix}", "consumers",
                            f"the recorder's consumers alone on {calls:,} of {what} "
                            "(bench/consumer_bench.cc)", calls, tools,
                            acceptance=[(f"consumer threads scale, {mix} (issue 5)",
                                         _scaling(mix, 1.3))]))
    return out
