"""W6 in the process (issue 26): the same function storm as W6, on the dynamically linked build
of func_calls, so that fay's runtime can patch it. Each query runs in-process (fay's default
for -c) and through the kernel's uprobe (--uprobes kernel), beside bpftrace and the empty
kernel uprobe, in one interleaved run. Its own section of docs/BENCHMARKS.md:
`bench/run --only inprocess`."""

import re
import shlex

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, bpftrace_tool, exit_ok, fay_tool

ORDER = 7
SECTION = "inprocess"
SYMBOL = "fay_target"
IN_PROCESS = "fay query (in-process)"
KERNEL = "fay query (kernel uprobe)"
# The same query over 0 calls: fay's start, the verifier and the runtime's patching, which the
# per-call figure leaves out (at 2,000,000 calls it was most of the in-process row's time).
STARTUP = "fay query (in-process), 0 calls"


def _per_call_rule(limit, kernel_workload):
    """The in-process row's cost per call <= limit ns, beside the kernel path's and bpftrace's
    (measured in `kernel_workload`, over fewer calls: each costs 5 us there)."""
    def rule(results, by_name):
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
        kernel = by_name.get(kernel_workload, {"tools": []})
        krows = {t["tool"]: t for t in kernel["tools"]}
        for name in (KERNEL, "bpftrace", "empty kernel uprobe"):
            t = krows.get(name)
            if t and t["status"] == "ok" and t.get("overhead_ns_per_event"):
                peers.append(f"{name} {t['overhead_ns_per_event']:,.0f} ns "
                             f"({t['overhead_ns_per_event'] / max(ns, 1e-9):.0f}x)")
        return ("PASS" if ns <= limit else "FAIL"), \
            f"{ns:,.0f} ns a call in the process{fixed} (<= {limit}); " + ", ".join(peers)
    return rule


def workloads(env):
    # The in-process rows make 10x the calls of the kernel's: at 2,000,000 calls a 50 ns probe
    # adds 100 ms, less than fay's start and its noise; the kernel path's 5 us a call would
    # make 20,000,000 calls take two minutes a run.
    n = env.scaled(2_000_000)
    n_in = 10 * n
    prog = env.testprog("func_calls_dyn")
    empty = env.empty_probe()
    fn = f"{prog}:{SYMBOL}"

    def untraced(calls):
        return Tool("untraced", "untraced", [prog, str(calls)], exit_ok)

    def inproc_rows(query, member, lo):
        inproc = ["--uprobes", "inprocess"]
        return [untraced(n_in),
                fay_tool(env, IN_PROCESS, [prog, str(n_in)], query, None, lo, lo, member,
                         flags=inproc),
                Tool(STARTUP, "fay", [env.fay, "query", "--format", "json", *inproc, "-c",
                                      f"{prog} 0", query], exit_ok, needs=[env.fay])]

    def kernel_row(query, member, lo):
        return fay_tool(env, KERNEL, [prog, str(n)], query, None, lo, lo, member,
                        flags=["--uprobes", "kernel"])

    argv = [prog, str(n)]
    floor = Tool("empty kernel uprobe", "floor", [empty, "-u", fn, "--"] + argv, all_of(exit_ok),
                 needs=[empty])
    out = []
    # arg0 = i % 8: eight keys, each calls / 8 (a multiple of 8 at every scale used).
    for key, title, query, member, per, limit, extra in (
            ("count", "`uprobe | count()`", f"uprobe:{fn} | count()", "count", 1, 30,
             [floor, bpftrace_tool(env, "bpftrace", argv, f"uprobe:{fn}", None, n, n)]),
            ("by-arg0", "`uprobe | count() by arg0` (8 keys)", f"uprobe:{fn} | count() by arg0",
             "count", 8, 50, []),
            ("latency", "`uretprobe | count(), hist(latency)`",
             f"uretprobe:{fn} | count() as n, hist(latency)", "n", 1, 120, [])):
        kernel_name = f"W6-inprocess-{key}-kernel"
        label = {"count": "count()", "by-arg0": "count() by arg0",
                 "latency": "uretprobe hist(latency)"}[key]
        out.append(Workload(
            f"W6-inprocess-{key}", "inprocess",
            f"{n_in:,} calls of {SYMBOL} (func_calls_dyn {n_in}), in the process: {title}", n_in,
            inproc_rows(query, member, n_in // per),
            acceptance=[(f"{label} in the process <= {limit} ns a call (issue 26)",
                         _per_call_rule(limit, kernel_name))],
            section=SECTION))
        out.append(Workload(
            kernel_name, "inprocess",
            f"{n:,} calls of {SYMBOL} (func_calls_dyn {n}), the kernel's uprobe: {title}", n,
            [untraced(n), kernel_row(query, member, n // per)] + extra,
            section=SECTION))
    out.append(_attach_workload(env))
    return out


_LOADED = re.compile(r"in-process runtime loaded into \d+ in ([0-9.]+) ms")


def _attach_stamp(run):
    """fay -v says how long the runtime took to go into the running process: every thread held,
    the library loaded, the functions patched, all let go."""
    m = _LOADED.search(run.stderr or "")
    if not m:
        return "fay -v printed no load time (not attached in the process?)", None
    run.metrics["attach_ms"] = float(m.group(1))
    return None, None


def _attach_rule(results, _all):
    """Issue 26: attaching to a running process takes <= 50 ms."""
    t = {r["tool"]: r for r in results["tools"]}
    fay = t.get(ATTACH)
    if not fay or fay["status"] != "ok":
        return "FAIL", f"{ATTACH} did not run: {fay and fay.get('reason')}"
    ms = (fay.get("metrics") or {}).get("attach_ms")
    if ms is None:
        return "FAIL", "no attach time"
    return ("PASS" if ms <= 50 else "FAIL"), (
        f"the runtime went into a running 2-thread process and patched it in {ms:.1f} ms (<= 50); "
        f"the whole -p run, 200 ms of it counting, {fay['median_wall_s'] * 1e3:.0f} ms")


ATTACH = "fay query -p (in-process)"


def _attach_workload(env):
    # A 2-thread hammer that runs until killed, fay attached to it 200 ms in, for 200 ms.
    # The CMake-built hammer: dynamically linked, so the runtime can go into it.
    hammer = env.testprog("hammer")
    query = shlex.quote(f"uprobe:{hammer}:fay_hot | count() | for 200ms")
    script = (f"{shlex.quote(hammer)} 2 4000000000 & pid=$!; sleep 0.3; "
              f"{shlex.quote(env.fay)} query -v --uprobes inprocess -p $pid {query}; rc=$?; "
              f"kill $pid; wait $pid 2>/dev/null; exit $rc")
    return Workload(
        "W6-inprocess-attach", "inprocess",
        "fay -p into a running 2-thread process (hammer), in-process `uprobe | count()` for 200 ms",
        None, [Tool(ATTACH, "fay", ["sh", "-c", script], all_of(exit_ok, _attach_stamp),
                 needs=[env.fay, hammer])],
        metrics=[("attach_ms", "attach (ms)", ".1f")],
        acceptance=[("attach to a running process <= 50 ms (issue 26)", _attach_rule)],
        section=SECTION)
