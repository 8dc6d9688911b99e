"""Runs one command and measures it: wall time, user+sys CPU and peak RSS from wait4's rusage."""

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time


class Run:
    def __init__(self):
        self.wall = 0.0     # seconds
        self.cpu = 0.0      # user + sys seconds of the command and its waited-for descendants
        self.rss_kb = 0     # peak RSS of the largest process in the tree (ru_maxrss)
        self.code = None    # exit status; negative: killed by that signal
        self.stdout = ""
        self.stderr = ""
        self.scratch = None  # the run's scratch directory (removed after the check)
        self.timed_out = False
        self.events = None   # events the tool reported seeing, when its check could tell
        self.start_ns = None  # CLOCK_MONOTONIC just before the fork (runone only)
        self.metrics = {}     # per-run figures a check extracted, reported as medians

    def to_json(self):
        return {"wall_s": round(self.wall, 6), "cpu_s": round(self.cpu, 6),
                "peak_rss_kb": self.rss_kb, "exit": self.code}


def run_once(argv, timeout, env=None, runone=None, before=None):
    """Runs argv in a fresh scratch directory, output to files (pipes could stall the command).

    With runone (bench/runone.c), the command is forked from that small program, which reports
    its figures; otherwise from here, and peak RSS then includes this interpreter's (ru_maxrss
    survives exec). before(scratch), when given, runs first and is not timed.
    """
    r = Run()
    r.scratch = tempfile.mkdtemp(prefix="fay-bench-")
    out_path = os.path.join(r.scratch, ".stdout")
    err_path = os.path.join(r.scratch, ".stderr")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        argv = [a.replace("{scratch}", r.scratch) for a in argv]
        if before:
            before(r.scratch)
        result_path = os.path.join(r.scratch, ".runone")
        if runone:
            argv = [runone, result_path] + argv
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    cwd=r.scratch, env=env, start_new_session=True)
        except OSError as e:
            r.code = 127
            r.stderr = f"cannot start {argv[0]}: {e}"
            return r
        # A blocking wait4 keeps the wall time exact; a timer kills the session if it hangs.
        def kill():
            r.timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        r.wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    r.code = proc.returncode
    r.cpu = usage.ru_utime + usage.ru_stime
    r.rss_kb = usage.ru_maxrss
    if runone and not r.timed_out:
        try:
            with open(result_path) as f:
                code, wall_ns, user_us, sys_us, rss, start_ns = (int(x) for x in f.read().split())
            r.start_ns = start_ns
            r.code, r.wall, r.cpu, r.rss_kb = code, wall_ns / 1e9, (user_us + sys_us) / 1e6, rss
        except (OSError, ValueError):
            r.code = r.code or 126  # runone itself failed; its stderr says why
    with open(out_path, "r", errors="replace") as f:
        r.stdout = f.read()
    with open(err_path, "r", errors="replace") as f:
        r.stderr = f.read()
    return r


def cleanup(run):
    if run.scratch:
        shutil.rmtree(run.scratch, ignore_errors=True)
        run.scratch = None
