"""W1 syscall storm: 2,000,000 getppid calls, and dd bs=1 (1,000,000 reads + 1,000,000 writes)."""

import shutil

from benchlib.model import Workload
from benchlib.rules import BOTH_HOOKS, ebpf_acceptance, record_rule
from benchlib.tools import (Tool, all_of, bpftrace_tool, exit_ok, fay_record_tool, fay_tool,
                            perf_trace_tool, stderr_has, strace_count_tool, strace_file_tool,
                            strace_seccomp_tool)

# Start-up and exit calls a static test program makes beyond its loop; a dynamic dd makes more.
SLACK = 200
ORDER = 1  # bench/run runs workload modules by ORDER


def _ok(results, tool):
    t = next((r for r in results["tools"] if r["tool"] == tool), None)
    return t["median_wall_s"] if t and t["status"] == "ok" else None


def overhead_rule(results, all_results):
    """Issue 2: (fay - untraced) <= 1.1 x (empty eBPF program - untraced), from the same run.

    Per event: when the start-up workload ran too, each tool's fixed cost (attach, detach, exit)
    measured there is taken out first, so a slow start-up does not pass for per-event cost.
    """
    base, floor, fay = (_ok(results, t) for t in ("untraced", "empty eBPF program", "fay query"))
    if None in (base, floor, fay):
        return "n/a", "needs untraced, the empty program and fay query to have succeeded"
    fo, eo = fay - base, floor - base
    raw = f"whole runs: fay +{fo * 1e3:.1f} ms vs 1.1 x empty +{1.1 * eo * 1e3:.1f} ms"
    st = all_results.get("startup")
    fixed = [_ok(st, t) for t in ("untraced", "empty eBPF program", "fay query")] if st else [None]
    if None in fixed:
        return ("PASS" if fo <= 1.1 * eo else "FAIL"), raw + " (run 'startup' too to net out " \
            "fixed costs)"
    fo_net = fo - (fixed[2] - fixed[0])
    eo_net = eo - (fixed[1] - fixed[0])
    n = results["events"]
    return ("PASS" if fo_net <= 1.1 * eo_net else "FAIL"), (
        f"per event, net of start-up: fay {fo_net / n * 1e9:.0f} ns vs 1.1 x empty "
        f"{1.1 * eo_net / n * 1e9:.0f} ns; {raw}")


def workloads(env):
    n = env.scaled(2_000_000)
    loop = [env.testprog("getppid_loop"), str(n)]
    empty = env.empty_probe()
    exact = (n, n)
    getppid = Workload(
        "W1-getppid", "W1", f"{n:,} getppid calls (tests/testprogs/getppid_loop {n})", n, [
            Tool("untraced", "untraced", loop, exit_ok),
            Tool("empty eBPF program", "floor",
                 [empty, "-t", "syscalls:sys_enter_getppid", "--"] + loop, exit_ok, needs=[empty]),
            # fay's syscall probes attach to the raw tracepoint: its floor, shown beside the
            # issue's (which is the per-syscall tracepoint above).
            Tool("empty raw tracepoint program", "floor",
                 [empty, "-r", "sys_enter", "--"] + loop, exit_ok, needs=[empty]),
            # A recorder that times each call's entry and return runs a program at both: the
            # floor of fay record's probes, beside the limit.
            Tool(BOTH_HOOKS, "floor", [empty, "-r", "sys_enter", "-r", "sys_exit", "--"] + loop,
                 exit_ok, needs=[empty]),
            fay_tool(env, "fay query", loop, "syscall:getppid | count() as n by comm",
                     "getppid_loop", n, n, "n"),
            fay_tool(env, "fay query syscall:*", loop, "syscall:* | count() by comm",
                     "getppid_loop", n, n + SLACK, "count"),
            bpftrace_tool(env, "bpftrace", loop, "tracepoint:syscalls:sys_enter_getppid",
                          "getppid_loop", n, n),
            strace_count_tool(env, "strace -f -c", loop, {"getppid": exact}),
            strace_file_tool(env, "strace -f -o FILE", loop, {"getppid": exact}),
            # getppid is not a %file call: the filter lets every one through without a stop.
            strace_seccomp_tool(env, loop, {"getppid": (0, 0), "execve": (1, 1)}),
            perf_trace_tool(env, "perf trace -s", loop, {"getppid": exact}),
        ] + [fay_record_tool(env, b, loop, expect={"getppid": exact})
             for b in env.record_backends],
        acceptance=[("per-event overhead (issue 2)", overhead_rule),
                    ("fay record vs strace -o (issue 4)", record_rule(0.9)),
                    ebpf_acceptance(3)])

    m = env.scaled(1_000_000)
    # An absolute path: bpftrace -c refuses a name that matches both /bin/dd and /usr/bin/dd.
    dd = [shutil.which("dd") or "/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1", f"count={m}"]
    dd_done = stderr_has(rf"^{m} bytes", f"'{m} bytes' line from dd")
    dd_ok = all_of(exit_ok, dd_done)
    rw = {"read": (m, m + SLACK), "write": (m, m + SLACK)}
    ddw = Workload(
        "W1-dd", "W1", f"dd bs=1 count={m:,}: {m:,} reads and {m:,} writes", 2 * m, [
            Tool("untraced", "untraced", dd, dd_ok),
            Tool("empty eBPF program", "floor",
                 [empty, "-t", "syscalls:sys_enter_read", "-t", "syscalls:sys_enter_write", "--"]
                 + dd, dd_ok, needs=[empty]),
            Tool(BOTH_HOOKS, "floor", [empty, "-r", "sys_enter", "-r", "sys_exit", "--"] + dd,
                 dd_ok, needs=[empty]),
            fay_tool(env, "fay query", dd, "syscall:read, syscall:write | count() by comm",
                     "dd", 2 * m, 2 * m + SLACK, "count"),
            fay_tool(env, "fay query syscall:*", dd, "syscall:* | count() by comm",
                     "dd", 2 * m, 2 * m + SLACK, "count"),
            bpftrace_tool(env, "bpftrace", dd, "tracepoint:syscalls:sys_enter_read,"
                          "tracepoint:syscalls:sys_enter_write", "dd", 2 * m, 2 * m + SLACK),
            strace_count_tool(env, "strace -f -c", dd, rw),
            strace_file_tool(env, "strace -f -o FILE", dd, rw),
            strace_seccomp_tool(env, dd, {"read": (0, 0), "write": (0, 0), "execve": (1, 1)},
                                dd_done),
            perf_trace_tool(env, "perf trace -s", dd, rw),
        ] + [fay_record_tool(env, b, dd, dd_done, expect=rw) for b in env.record_backends],
        acceptance=[("fay record vs strace -o (issue 4)", record_rule(0.9)),
                    ebpf_acceptance(3)])
    return [getppid, ddw]
