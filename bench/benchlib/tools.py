"""The tools compared on each workload, and how each run is checked.

A check returns (error, note): an error makes the run a failure (never a fast time); a note is
printed beside a successful figure (e.g. a peer that lost events). A check that learns how many
events the tool saw stores it in run.events.
"""

import json
import os
import re
import shutil
import subprocess
import sys

# Tool.events for a tool that traces only a subset of the workload's syscalls (strace -e
# trace=%file): its events are the ones it reports, not the workload's.
OBSERVED = "observed"


class Tool:
    def __init__(self, name, kind, argv, check, needs=(), trace_file=None, events=None,
                 before=None):
        self.name = name              # as shown in the tables
        self.kind = kind              # untraced | floor | fay | peer
        self.argv = argv              # list; "{scratch}" is replaced by the run's scratch dir
        self.check = check            # check(run) -> (error or None, note or None)
        self.needs = list(needs)      # executables that must exist
        self.trace_file = trace_file  # relative to the scratch dir: bytes of trace per event
        self.events = events          # None: the workload's count; OBSERVED: what it reported
        self.before = before          # before(scratch): untimed set-up of each run

    def missing(self):
        for exe in self.needs:
            if not (os.path.isabs(exe) and os.access(exe, os.X_OK)) and not shutil.which(exe):
                return f"{exe} not found"
        return None


def exited_zero(run):
    if run.timed_out:
        return "timed out"
    if run.code != 0:
        tail = (run.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        what = f"killed by signal {-run.code}" if run.code < 0 else f"exit status {run.code}"
        return f"{what}: {tail[:160]}"
    return None


def all_of(*checks):
    def check(run):
        notes = []
        for c in checks:
            if c is None:
                continue
            err, note = c(run)
            if err:
                return err, None
            if note:
                notes.append(note)
        return None, "; ".join(notes) or None
    return check


def exit_ok(run):
    return exited_zero(run), None


def stderr_has(pattern, what):
    def check(run):
        if not re.search(pattern, run.stderr, re.M):
            return f"workload did not complete: no {what} on stderr", None
        return None, None
    return check


def count_within(label, got, lo, hi):
    if got is None:
        return f"no {label} count in the output"
    if got < lo or (hi is not None and got > hi):
        want = str(lo) if lo == hi else f"at least {lo}" if hi is None else f"{lo}..{hi}"
        return f"{label} count {got}, expected {want}"
    return None


def command_string(argv):
    """argv as the one string `fay query -c` and `bpftrace -c` take. bpftrace splits it at spaces
    and honours no quotes, so an argument may hold neither (a workload passes files instead)."""
    for a in argv:
        if not a or re.search(r"[\s'\"\\]", a):
            raise ValueError(f"workload argument {a!r} cannot pass through -c")
    return " ".join(argv)


# --- fay ------------------------------------------------------------------------------------


def fay_rows(run):
    rows = []
    for line in run.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def fay_tool(env, name, workload_argv, query, comm, lo, hi, member, also=None, flags=()):
    """fay query -c; the row for comm (any row when comm is None) must hold member in [lo, hi]
    (hi None: at least lo). also: the workload's own check, on the same run. flags: more of fay
    query's options (--uprobes kernel)."""
    argv = [env.fay, "query", "--format", "json", *flags, "-c", command_string(workload_argv),
            query]

    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        got = None
        for row in fay_rows(run):
            if (comm is None or row.get("comm") == comm) and isinstance(row.get(member), int):
                got = row[member]
        run.events = got
        return count_within(f"{comm or 'the'} {member}", got, lo, hi), None
    return Tool(name, "fay", argv, all_of(check, also), needs=[env.fay])


_INFO_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\w+)\s*$")
# `fay info`'s header rows this check reads: "lost events:        3 (cpu0: 1, cpu1: 2)",
# "bytes captured:     1.00 GiB (1073741824 B) in 262145 buffers" ("12 B in 1 buffers" below 1 KiB).
_INFO_LOST = re.compile(r"^lost events:\s+(\d+)(.*)$", re.M)
_INFO_TRUNCATED = re.compile(r"^truncated:\s+(\S+)", re.M)
_INFO_CAPTURED = re.compile(r"^bytes captured:\s+(?:.*\()?(\d+) B\)? in \d+ buffers", re.M)
_INFO_SHORT = re.compile(r"^(truncated buffers|not captured):\s+(\d+)", re.M)
# How a run that lost events fails: the acceptance rules read the count back from the row's reason.
LOST_REASON = re.compile(r"^the trace lost (\d+) events")


def fay_record_tool(env, backend, workload_argv, also=None, expect=None, captured=None):
    """`fay record --backend BACKEND` into a trace file (bytes of trace per event come from it).

    Every run, warm-ups included, fails if `fay info` reports a lost event or a truncated trace:
    a recorder that drops events under load would otherwise pass for a fast one. captured: the
    buffer bytes the trace must hold at least, whole (no buffer truncated or left uncaptured).

    None, with the reason printed once, while that backend cannot record /bin/true: the hook is
    in every syscall workload already, so rows appear as soon as `bench/run --record` asks for a
    backend that works.
    """
    reason = _fay_record_unavailable(env, backend)
    if reason:
        _log_once(f"fay record --backend {backend}: skipped, {reason}")
        return None
    argv = [env.fay, "record", "-o", "{scratch}/trace.fay", "--backend", backend, "--"] \
        + workload_argv

    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        trace = os.path.join(run.scratch, "trace.fay")
        if not os.path.exists(trace):
            return "fay record wrote no trace", None
        # The trace itself must hold the workload: `fay info` counts its calls per syscall.
        info = subprocess.run([env.fay, "info", trace], capture_output=True, text=True, timeout=120)
        if info.returncode != 0:
            return f"fay info failed on the trace: {info.stderr.strip()[-200:]}", None
        lost = _INFO_LOST.search(info.stdout)
        if not lost:
            return "fay info printed no 'lost events' row", None
        run.metrics["lost_events"] = int(lost.group(1))
        if int(lost.group(1)):
            return f"the trace lost {lost.group(1)} events{lost.group(2).rstrip()}", None
        trunc = _INFO_TRUNCATED.search(info.stdout)
        if trunc and trunc.group(1) != "no":
            return "the trace is truncated (fay info)", None
        counts = {}
        for line in info.stdout.splitlines():
            m = _INFO_ROW.match(line)
            if m:
                counts[m.group(3)] = int(m.group(1))
        run.events = sum(counts.values())
        for sc, (lo, hi) in (expect or {}).items():
            got = run.events if sc == "total" else counts.get(sc, 0)
            err = count_within(f"{sc} calls in the trace", got, lo, hi)
            if err:
                return err, None
        if captured is not None:
            m = _INFO_CAPTURED.search(info.stdout)
            got = int(m.group(1)) if m else None
            run.metrics["bytes_captured"] = got
            err = count_within("buffer bytes in the trace", got, captured, None)
            if err:
                return err, None
            for what, n in _INFO_SHORT.findall(info.stdout):
                if int(n):
                    return f"fay info reports {what}: {n} buffers", None
        return None, None
    return Tool(f"fay record ({backend})", "fay", argv, all_of(check, also), needs=[env.fay],
                trace_file="trace.fay")


_record_probe = {}
_logged = set()


def _log_once(msg):
    if msg not in _logged:
        _logged.add(msg)
        print(msg, file=sys.stderr, flush=True)


def _fay_record_unavailable(env, backend):
    if backend in _record_probe:
        return _record_probe[backend]
    reason = None
    try:
        h = subprocess.run([env.fay, "record", "--help"], capture_output=True, text=True,
                           timeout=30)
        # A fay without the subcommand prints its top-level help, and exits 0.
        if h.returncode != 0 or not re.search(r"^Usage: \S+ record\b", h.stdout, re.M):
            reason = "this fay has no `record` subcommand yet"
        else:
            out = os.path.join(env.data_dir(), f"probe-{backend}.fay")
            r = subprocess.run([env.fay, "record", "-o", out, "--backend", backend, "--",
                                "/bin/true"], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                tail = (r.stderr.strip().splitlines() or ["(no stderr)"])[-1]
                reason = f"it cannot record /bin/true: {tail[:120]}"
    except (OSError, subprocess.TimeoutExpired) as e:
        reason = f"cannot run fay: {e}"
    _record_probe[backend] = reason
    return reason


# --- peers ----------------------------------------------------------------------------------


def bpftrace_tool(env, name, workload_argv, probes, comm, lo, hi, also=None):
    """A count by comm (comm None: a plain `@ = count()`, as for a uprobe)."""
    key = "" if comm is None else "[comm]"
    prog = f"{probes} {{ @{key} = count(); }}"
    argv = ["bpftrace", "-e", prog, "-c", command_string(workload_argv)]
    pat = r"^@: (\d+)" if comm is None else r"^@\[" + re.escape(comm) + r"\]: (\d+)"

    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        m = re.search(pat, run.stdout, re.M)
        run.events = int(m.group(1)) if m else None
        return count_within(f"@{key}", run.events, lo, hi), None
    return Tool(name, "peer", argv, all_of(check, also), needs=["bpftrace"])


def strace_summary_calls(text, syscall):
    # strace -c rows: % time, seconds, usecs/call, calls, [errors], syscall
    for line in text.splitlines():
        tok = line.split()
        if len(tok) >= 5 and tok[-1] == syscall and tok[3].isdigit():
            return int(tok[3])
    return None


def strace_count_tool(env, name, workload_argv, expect, also=None):
    """strace -f -c; expect maps syscall -> (lo, hi) call counts ("total": all of them)."""
    argv = ["strace", "-f", "-c", "-o", "{scratch}/strace.summary"] + workload_argv

    def check(run):
        path = os.path.join(run.scratch, "strace.summary")
        if not os.path.exists(path):
            return "strace wrote no summary", None
        text = open(path, errors="replace").read()
        run.events = strace_summary_calls(text, "total")
        for sc, (lo, hi) in expect.items():
            err = count_within(sc, strace_summary_calls(text, sc), lo, hi)
            if err:
                return err, None
        return None, None
    return Tool(name, "peer", argv, all_of(check, also), needs=["strace"])


# One traced call per line: "PID name(" or "name(" (an <unfinished ...> call counts once, on the
# line that starts it; its "<... name resumed>" line and "+++ exited" lines are not calls).
_STRACE_CALL = re.compile(r"^(?:\[?(?:pid\s+)?\d+\]?\s+)?([a-z_][a-z0-9_]*)\(")


def strace_file_tool(env, name, workload_argv, expect, also=None, options=(), events=None):
    """strace -f [options] -o FILE: the full text trace; counts its lines per syscall.

    expect maps syscall -> (lo, hi) lines ("total": every call line)."""
    argv = ["strace", "-f"] + list(options) + ["-o", "{scratch}/strace.out"] + workload_argv

    def check(run):
        path = os.path.join(run.scratch, "strace.out")
        if not os.path.exists(path):
            return "strace wrote no trace", None
        counts = {}
        with open(path, errors="replace") as f:
            for line in f:
                m = _STRACE_CALL.match(line)
                if m:
                    counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        run.events = sum(counts.values())
        for sc, (lo, hi) in expect.items():
            got = run.events if sc == "total" else counts.get(sc, 0)
            err = count_within(f"{sc} lines", got, lo, hi)
            if err:
                return err, None
        return None, None
    return Tool(name, "peer", argv, all_of(check, also), needs=["strace"],
                trace_file="strace.out", events=events)


def strace_seccomp_tool(env, workload_argv, expect, also=None):
    """strace --seccomp-bpf -f -e trace=%file -o FILE: a seccomp filter stops the tracee only on
    the file syscalls, so everything else runs at full speed. Its events are the ones it wrote."""
    return strace_file_tool(env, "strace --seccomp-bpf %file", workload_argv, expect, also,
                            options=["--seccomp-bpf", "-e", "trace=%file"], events=OBSERVED)


# A row of perf trace -s's per-thread summary: "   name   calls  errors  total ...".
_PERF_ROW = re.compile(r"^\s+([a-z_][a-z0-9_]*)\s+(\d+)\s+\d+\s+\d+\.\d+\s", re.M)


def perf_trace_tool(env, name, workload_argv, expect, also=None):
    """perf trace -s. perf trace may drop events under load; that is noted, not hidden."""
    argv = ["perf", "trace", "-s", "-o", "{scratch}/perf.out", "--"] + workload_argv

    def check(run):
        path = os.path.join(run.scratch, "perf.out")
        text = open(path, errors="replace").read() if os.path.exists(path) else ""
        if run.code != 0:
            tail = ((run.stderr + text).strip().splitlines() or ["(no output)"])[-1]
            return f"exit status {run.code}: {tail[:160]}", None
        run.events = sum(int(m.group(2)) for m in _PERF_ROW.finditer(text)) or None
        if run.events is None:
            return "no rows in the perf trace summary", None
        notes = []
        for sc, (lo, hi) in expect.items():
            total = None
            for m in re.finditer(r"^\s*" + sc + r"\s+(\d+)\s", text, re.M):
                total = (total or 0) + int(m.group(1))
            if total is None:
                return f"no {sc} row in the perf trace summary", None
            if hi is not None and total > hi:
                return f"{sc} count {total}, expected at most {hi}", None
            if total < lo:
                notes.append(f"lost {lo - total} {sc} events")
        return None, "; ".join(notes) or None
    return Tool(name, "peer", argv, all_of(check, also), needs=["perf"])
