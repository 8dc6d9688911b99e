"""W8 flight recorder (issue 29): `fay record --flight 64M --dump-on exit` beside `fay record`
on W1's getppid storm and W3's small files, in one interleaved run. The flight recorder does the
recorder's work and keeps the trace in a ring in memory; the dump at exit writes at most 64 MiB.
Its own section of docs/BENCHMARKS.md: `bench/run --only flight`."""

import os
import re
import subprocess

from benchlib.model import Workload
from benchlib.tools import Tool, exit_ok, exited_zero, fay_record_tool

ORDER = 9
SECTION = "flight"
RING = 64 << 20
FLIGHT = "fay record --flight 64M (ebpf)"
RECORD = "fay record (ebpf)"


def _flight_tool(env, argv):
    cmd = [env.fay, "record", "--backend", "ebpf", "--flight", "64M", "--dump-on", "exit", "-o",
           "{scratch}/trace.fay", "--"] + argv

    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        dump = os.path.join(run.scratch, "trace.fay")
        if not os.path.exists(dump):
            return "the flight recorder wrote no dump", None
        size = os.path.getsize(dump)
        run.metrics["dump_bytes"] = size
        if size > RING:
            return f"the dump has {size} bytes, more than the 64 MiB ring", None
        info = subprocess.run([env.fay, "info", dump], capture_output=True, text=True, timeout=120)
        if info.returncode != 0 or "flight dump:" not in info.stdout:
            return "fay info does not read the dump as a flight dump", None
        m = re.search(r"^syscalls:\s+(\d+)", info.stdout, re.M)
        run.events = int(m.group(1)) if m else None
        return None, None
    return Tool(FLIGHT, "fay", cmd, check, needs=[env.fay], trace_file="trace.fay")


def _median(results, name):
    t = next((r for r in results["tools"] if r["tool"] == name), None)
    return t["median_wall_s"] if t and t["status"] == "ok" else None


def _flight_rule(results, _all):
    """Flight recorder wall <= 1.1 x fay record's, and each dump <= the ring."""
    f, r = _median(results, FLIGHT), _median(results, RECORD)
    if f is None or r is None:
        return "n/a", "needs both recorders to have run"
    t = {x["tool"]: x for x in results["tools"]}
    # Every run's check already failed a dump over the ring; the median says how full it got.
    dump = t[FLIGHT].get("metrics", {}).get("dump_bytes")
    per = t[RECORD].get("trace_bytes_per_event")
    rec = per * results["events"] if per else None
    ok = f <= 1.1 * r and (dump is None or dump <= RING)
    disk = f"; dump {dump / 1048576:.1f} MiB (<= 64 on every run)" if dump is not None else ""
    whole = f" against the whole trace's {rec / 1048576:.1f} MiB" if rec else ""
    return ("PASS" if ok else "FAIL"), f"{f / r:.2f} x fay record (<= 1.1){disk}{whole}"


def workloads(env):
    n = env.scaled(2_000_000)
    loop = [env.testprog("getppid_loop"), str(n)]
    w1 = Workload("W8-flight-W1", "flight", f"{n:,} getppid calls (W1), recorded", n, [
        Tool("untraced", "untraced", loop, exit_ok),
        fay_record_tool(env, "ebpf", loop, expect={"getppid": (n, n)}),
        _flight_tool(env, loop),
    ], acceptance=[("flight recorder vs fay record (issue 29)", _flight_rule)], section=SECTION)
    files_n = env.scaled(10_000)
    files = os.path.join(env.tmpfs_dir(), "w8-files")
    argv = [env.bench_prog("smallfiles"), files, str(files_n)]

    def clean(run):
        err = exited_zero(run)
        if os.path.isdir(files):
            for f in os.listdir(files):
                os.unlink(os.path.join(files, f))
            os.rmdir(files)
        return err, None
    w3 = Workload("W8-flight-W3", "flight", f"{files_n:,} small files (W3), recorded",
                  8 * files_n, [
                      Tool("untraced", "untraced", argv, clean),
                      fay_record_tool(env, "ebpf", argv, also=clean),
                      _flight_tool(env, argv),
                  ], acceptance=[("flight recorder vs fay record (issue 29)", _flight_rule)],
                  section=SECTION)
    return [w1, w3]
