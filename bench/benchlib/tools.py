"""The tools compared on each workload, and how each run is checked.

A check returns (error, note): an error makes the run a failure (never a fast time); a note is
printed beside a successful figure (e.g. a peer that lost events).
"""

import json
import os
import re
import shlex
import shutil


class Tool:
    def __init__(self, name, kind, argv, check, needs=(), trace_file=None, events=None):
        self.name = name              # as shown in the tables
        self.kind = kind              # untraced | floor | fay | peer
        self.argv = argv              # list; "{scratch}" is replaced by the run's scratch dir
        self.check = check            # check(run) -> (error or None, note or None)
        self.needs = list(needs)      # executables that must exist
        self.trace_file = trace_file  # relative to the scratch dir: bytes of trace per event
        self.events = events          # events this tool traces (None: the workload's count)

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
    if not lo <= got <= hi:
        want = str(lo) if lo == hi else f"{lo}..{hi}"
        return f"{label} count {got}, expected {want}"
    return None


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


def fay_tool(env, name, workload_argv, query, comm, lo, hi, member):
    argv = [env.fay, "query", "--format", "json", "-c", shlex.join(workload_argv), query]

    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        got = None
        for row in fay_rows(run):
            if row.get("comm") == comm and isinstance(row.get(member), int):
                got = row[member]
        return count_within(f"{comm} {member}", got, lo, hi), None
    return Tool(name, "fay", argv, check, needs=[env.fay])


# --- peers ----------------------------------------------------------------------------------


def bpftrace_tool(env, name, workload_argv, probes, comm, lo, hi):
    prog = f"{probes} {{ @[comm] = count(); }}"
    argv = ["bpftrace", "-e", prog, "-c", shlex.join(workload_argv)]

    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        m = re.search(r"^@\[" + re.escape(comm) + r"\]: (\d+)", run.stdout, re.M)
        return count_within(f"@[{comm}]", int(m.group(1)) if m else None, lo, hi), None
    return Tool(name, "peer", argv, check, needs=["bpftrace"])


def strace_summary_calls(text, syscall):
    # strace -c rows: % time, seconds, usecs/call, calls, [errors], syscall
    for line in text.splitlines():
        tok = line.split()
        if len(tok) >= 5 and tok[-1] == syscall and tok[3].isdigit():
            return int(tok[3])
    return None


def strace_count_tool(env, name, workload_argv, expect):
    """strace -f -c; expect maps syscall -> (lo, hi) call counts."""
    argv = ["strace", "-f", "-c", "-o", "{scratch}/strace.summary"] + workload_argv

    def check(run):
        path = os.path.join(run.scratch, "strace.summary")
        if not os.path.exists(path):
            return "strace wrote no summary", None
        text = open(path, errors="replace").read()
        for sc, (lo, hi) in expect.items():
            err = count_within(sc, strace_summary_calls(text, sc), lo, hi)
            if err:
                return err, None
        return None, None
    return Tool(name, "peer", argv, check, needs=["strace"])


def strace_file_tool(env, name, workload_argv, expect):
    """strace -f -o FILE: the full text trace; counts lines per syscall."""
    argv = ["strace", "-f", "-o", "{scratch}/strace.out"] + workload_argv

    def check(run):
        path = os.path.join(run.scratch, "strace.out")
        if not os.path.exists(path):
            return "strace wrote no trace", None
        counts = dict.fromkeys(expect, 0)
        pats = {sc: re.compile(r"(^|\] |\s)" + sc + r"\(") for sc in expect}
        with open(path, errors="replace") as f:
            for line in f:
                for sc, pat in pats.items():
                    if pat.search(line):
                        counts[sc] += 1
                        break
        for sc, (lo, hi) in expect.items():
            err = count_within(f"{sc} lines", counts[sc], lo, hi)
            if err:
                return err, None
        return None, None
    return Tool(name, "peer", argv, check, needs=["strace"], trace_file="strace.out")


def perf_trace_tool(env, name, workload_argv, expect):
    """perf trace -s. perf trace may drop events under load; that is noted, not hidden."""
    argv = ["perf", "trace", "-s", "-o", "{scratch}/perf.out", "--"] + workload_argv

    def check(run):
        path = os.path.join(run.scratch, "perf.out")
        text = open(path, errors="replace").read() if os.path.exists(path) else ""
        if run.code != 0:
            tail = ((run.stderr + text).strip().splitlines() or ["(no output)"])[-1]
            return f"exit status {run.code}: {tail[:160]}", None
        notes = []
        for sc, (lo, hi) in expect.items():
            total = None
            for m in re.finditer(r"^\s*" + sc + r"\s+(\d+)\s", text, re.M):
                total = (total or 0) + int(m.group(1))
            if total is None:
                return f"no {sc} row in the perf trace summary", None
            if total > hi:
                return f"{sc} count {total}, expected at most {hi}", None
            if total < lo:
                notes.append(f"lost {lo - total} {sc} events")
        return None, "; ".join(notes) or None
    return Tool(name, "peer", argv, check, needs=["perf"])
