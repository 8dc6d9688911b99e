"""Start-up: a one-probe count query around /bin/true, i.e. exec to probes attached and back."""

from benchlib.model import Workload
from benchlib.tools import Tool, exit_ok

ORDER = 90


def startup_rule(results, _all):
    """Issue 2: start-up <= 80 ms with peak RSS <= 20 MB (the whole run bounds exec-to-attach)."""
    t = {r["tool"]: r for r in results["tools"]}
    fay = t.get("fay query")
    if not fay or fay["status"] != "ok":
        return "n/a", "fay query did not succeed"
    wall_ms, rss_mb = fay["median_wall_s"] * 1e3, fay["median_rss_kb"] / 1024
    ok = wall_ms <= 80 and rss_mb <= 20
    return ("PASS" if ok else "FAIL"), f"{wall_ms:.1f} ms (<= 80), {rss_mb:.1f} MB (<= 20)"


def workloads(env):
    true = ["/bin/true"]
    return [Workload("startup", "startup", "one-probe count query around /bin/true", 0, [
        Tool("untraced", "untraced", true, exit_ok),
        Tool("empty eBPF program", "floor", [env.empty_probe(), "--"] + true, exit_ok,
             needs=[env.empty_probe()]),
        Tool("fay query", "fay", [env.fay, "query", "--format", "json", "-c", "/bin/true",
                                  "syscall:getppid | count()"], exit_ok, needs=[env.fay]),
        Tool("bpftrace", "peer", ["bpftrace", "-e",
                                  "tracepoint:syscalls:sys_enter_getppid { @ = count(); }",
                                  "-c", "/bin/true"], exit_ok, needs=["bpftrace"]),
    ], acceptance=[("start-up (issue 2)", startup_rule)])]
