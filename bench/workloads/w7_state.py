"""W7 state across probes (issue 28): a join of two events of one thread, in fay's language
(`remember` before ';', read as t[tid]) and as bpftrace writes it (@t[tid] = nsecs; read and
delete), over the same getppid storm, in one interleaved run. Each tool also runs over 0 calls,
so start-up (bpftrace's compile, fay's verifier) is left out of the per-event figure. Its own
section of docs/BENCHMARKS.md: `bench/run --only state`."""

import re

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, command_string, count_within, exit_ok, exited_zero, \
    fay_tool

ORDER = 8
SECTION = "state"
FAY = "fay query (remember, read)"
BPFTRACE = "bpftrace (@t[tid], read, delete)"
QUERY = ("syscall:getppid | remember time as t; "
         "syscall:getppid | count() as n, hist(time - t[tid]) as gap")
# What bpftrace's runqlat does: look the value up, use it, delete it, store the new one.
PROGRAM = ("tracepoint:syscalls:sys_enter_getppid { $t = @t[tid]; if ($t) { @n = count(); "
           "@gap = hist(nsecs - $t); delete(@t[tid]); } @t[tid] = nsecs; }")


def _bpftrace(env, name, loop, lo, hi):
    argv = ["bpftrace", "-e", PROGRAM, "-c", command_string(loop)]

    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        m = re.search(r"^@n: (\d+)", run.stdout, re.M)
        run.events = int(m.group(1)) if m else None
        if lo == 0:
            return None, None
        return count_within("@n", run.events, lo, hi), None
    return Tool(name, "peer", argv, check, needs=["bpftrace"])


def _median(results, name):
    t = next((r for r in results["tools"] if r["tool"] == name), None)
    return t["median_wall_s"] if t and t["status"] == "ok" else None


def _join_rule(results, all_results):
    """fay's join per event, net of its start-up, <= bpftrace's, measured alike."""
    n = results["events"]
    got = {}
    for tool in (FAY, BPFTRACE):
        full, empty = _median(results, tool), _median(results, tool + ", 0 calls")
        if full is None or empty is None:
            return "n/a", f"{tool} (or its 0-call row) did not run"
        got[tool] = (full - empty) / n * 1e9
    base = _median(results, "untraced")
    base_ns = base / n * 1e9 if base else 0
    fay, bt = got[FAY], got[BPFTRACE]
    return ("PASS" if fay <= bt else "FAIL"), (
        f"per event, start-up left out: fay {fay - base_ns:,.0f} ns, bpftrace {bt - base_ns:,.0f} "
        f"ns over the untraced call ({fay / max(bt, 1e-9):.2f}x)")


def workloads(env):
    n = env.scaled(1_000_000)
    loop = [env.testprog("getppid_loop"), str(n)]
    none = [env.testprog("getppid_loop"), "0"]
    empty = env.empty_probe()
    return [Workload(
        "W7-state", "state",
        f"{n:,} getppid calls, each joined with the thread's previous one: {QUERY}", n, [
            Tool("untraced", "untraced", loop, exit_ok),
            Tool("empty eBPF program", "floor",
                 [empty, "-r", "sys_enter", "--"] + loop, exit_ok, needs=[empty]),
            fay_tool(env, FAY, loop, QUERY, None, n - 1, n - 1, "n"),
            Tool(FAY + ", 0 calls", "fay", [env.fay, "query", "--format", "json", "-c",
                                            command_string(none), QUERY], exit_ok,
                 needs=[env.fay]),
            _bpftrace(env, BPFTRACE, loop, n - 1, n - 1),
            _bpftrace(env, BPFTRACE + ", 0 calls", none, 0, 0),
        ],
        acceptance=[("a join costs no more than bpftrace's (issue 28)", _join_rule)],
        section=SECTION)]
