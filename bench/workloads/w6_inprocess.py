"""W6 in the process (issue 26): the same function storm as W6, on the dynamically linked build
of func_calls, so that fay's runtime can patch it. Each query runs in-process (fay's default
for -c) and through the kernel's uprobe (--uprobes kernel), beside bpftrace and the empty
kernel uprobe, in one interleaved run. Its own section of docs/BENCHMARKS.md:
`bench/run --only inprocess`."""

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, bpftrace_tool, exit_ok, fay_tool

ORDER = 7
SECTION = "inprocess"
SYMBOL = "fay_target"
IN_PROCESS = "fay query (in-process)"
KERNEL = "fay query (kernel uprobe)"
# The same query over 0 calls: fay's start, the verifier and the runtime's patching, which the
# per-call figure leaves out (at 2,000,000 calls it is most of the in-process row's time).
STARTUP = "fay query (in-process), 0 calls"


def _per_call_rule(limit):
    """The in-process row's cost per call <= limit ns, with the kernel path's and bpftrace's."""
    def rule(results, _all):
        rows = {t["tool"]: t for t in results["tools"]}
        mine = rows.get(IN_PROCESS)
        if not mine or mine["status"] != "ok" or mine.get("overhead_ns_per_event") is None:
            return "FAIL", f"{IN_PROCESS} did not run: {mine and mine.get('reason')}"
        ns = mine["overhead_ns_per_event"]
        start = rows.get(STARTUP)
        fixed = ""
        if start and start["status"] == "ok" and mine.get("median_wall_s") is not None:
            ns = (mine["median_wall_s"] - start["median_wall_s"]) / results["events"] * 1e9
            fixed = f" (fay's start, {start['median_wall_s'] * 1e3:.0f} ms, left out)"
        peers = []
        for name in (KERNEL, "bpftrace", "empty kernel uprobe"):
            t = rows.get(name)
            if t and t["status"] == "ok" and t.get("overhead_ns_per_event"):
                peers.append(f"{name} {t['overhead_ns_per_event']:,.0f} ns "
                             f"({t['overhead_ns_per_event'] / max(ns, 1e-9):.0f}x)")
        return ("PASS" if ns <= limit else "FAIL"), \
            f"{ns:,.0f} ns a call in the process{fixed} (<= {limit}); " + ", ".join(peers)
    return rule


def workloads(env):
    n = env.scaled(2_000_000)
    prog = env.testprog("func_calls_dyn")
    argv = [prog, str(n)]
    empty = env.empty_probe()
    fn = f"{prog}:{SYMBOL}"

    def row(label, query, member, lo):
        inproc = ["--uprobes", "inprocess"]
        return [fay_tool(env, IN_PROCESS, argv, query, None, lo, lo, member, flags=inproc),
                Tool(STARTUP, "fay", [env.fay, "query", "--format", "json", *inproc, "-c",
                                      f"{prog} 0", query], exit_ok, needs=[env.fay]),
                fay_tool(env, KERNEL, argv, query, None, lo, lo, member,
                         flags=["--uprobes", "kernel"])]

    out = []
    base = [Tool("untraced", "untraced", argv, exit_ok)]
    floor = Tool("empty kernel uprobe", "floor", [empty, "-u", fn, "--"] + argv, all_of(exit_ok),
                 needs=[empty])
    out.append(Workload(
        "W6-inprocess-count", "inprocess",
        f"{n:,} calls of {SYMBOL} (func_calls_dyn {n}): `uprobe | count()`", n,
        base + [floor] + row("count", f"uprobe:{fn} | count()", "count", n) +
        [bpftrace_tool(env, "bpftrace", argv, f"uprobe:{fn}", None, n, n)],
        acceptance=[("count() in the process <= 30 ns a call (issue 26)", _per_call_rule(30))],
        section=SECTION))
    # arg0 = i % 8: eight keys, each n / 8 calls (n is a multiple of 8 at every scale used).
    out.append(Workload(
        "W6-inprocess-by-arg0", "inprocess",
        f"{n:,} calls of {SYMBOL}: `uprobe | count() by arg0` (8 keys)", n,
        base + row("by arg0", f"uprobe:{fn} | count() by arg0", "count", n // 8),
        acceptance=[("count() by arg0 in the process <= 50 ns a call (issue 26)",
                     _per_call_rule(50))],
        section=SECTION))
    out.append(Workload(
        "W6-inprocess-latency", "inprocess",
        f"{n:,} calls of {SYMBOL}: `uretprobe | count(), hist(latency)`", n,
        base + row("latency", f"uretprobe:{fn} | count() as n, hist(latency)", "n", n),
        acceptance=[("uretprobe hist(latency) in the process <= 120 ns a call (issue 26)",
                     _per_call_rule(120))],
        section=SECTION))
    return out
