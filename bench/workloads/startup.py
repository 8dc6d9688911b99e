"""Start-up: a one-probe count query around /bin/true, i.e. exec to probes attached and back."""

import re

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, exit_ok

ORDER = 90

_ATTACHED = re.compile(r"probes attached at CLOCK_MONOTONIC (\d+) ns")


def attach_stamp(run):
    """fay -v stamps the instant its probes are attached; runone notes the instant before it
    forked fay. Their difference is exec-to-attached, without the teardown a whole run includes."""
    m = _ATTACHED.search(run.stderr or "")
    if not m:
        return "fay -v printed no attach stamp", None
    if run.start_ns is None:
        return "no launch stamp (bench/runone missing)", None
    run.metrics["attach_ms"] = (int(m.group(1)) - run.start_ns) / 1e6
    return None, None


def startup_rule(results, _all):
    """Issue 2: exec to probes attached <= 80 ms, peak RSS <= 20 MB, for a one-probe count."""
    t = {r["tool"]: r for r in results["tools"]}
    fay = t.get("fay query")
    if not fay or fay["status"] != "ok":
        return "n/a", "fay query did not succeed"
    attach = (fay.get("metrics") or {}).get("attach_ms")
    if attach is None:
        return "n/a", "no exec-to-attached figure"
    rss_mb = fay["median_rss_kb"] / 1024
    bt = t.get("bpftrace")
    peer = ""
    if bt and bt["status"] == "ok":
        peer = f"; bpftrace whole run {bt['median_wall_s'] * 1e3:.0f} ms, " \
            f"{bt['median_rss_kb'] / 1024:.1f} MB"
    ok = attach <= 80 and rss_mb <= 20
    return ("PASS" if ok else "FAIL"), (
        f"exec to attached {attach:.1f} ms (<= 80), peak RSS {rss_mb:.1f} MB (<= 20); whole run "
        f"{fay['median_wall_s'] * 1e3:.0f} ms including detach{peer}")


def workloads(env):
    true = ["/bin/true"]
    return [Workload("startup", "startup", "one-probe count query around /bin/true", 0, [
        Tool("untraced", "untraced", true, exit_ok),
        Tool("empty eBPF program", "floor", [env.empty_probe(), "--"] + true, exit_ok,
             needs=[env.empty_probe()]),
        Tool("fay query", "fay", [env.fay, "query", "-v", "--format", "json", "-c", "/bin/true",
                                  "syscall:getppid | count()"], all_of(exit_ok, attach_stamp),
             needs=[env.fay]),
        Tool("bpftrace", "peer", ["bpftrace", "-e",
                                  "tracepoint:syscalls:sys_enter_getppid { @ = count(); }",
                                  "-c", "/bin/true"], exit_ok, needs=["bpftrace"]),
    ], acceptance=[("start-up (issue 2)", startup_rule)])]
