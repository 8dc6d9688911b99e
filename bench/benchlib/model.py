"""Workloads and the environment they are built against."""

import atexit
import os
import shutil
import subprocess
import tempfile


class Workload:
    def __init__(self, name, group, title, events, tools, acceptance=None, setup=None,
                 teardown=None, metrics=None, section=None):
        self.name = name          # e.g. W1-getppid
        self.group = group        # e.g. W1 (what --only matches)
        self.title = title
        # Events a tracer of the workload's syscalls sees; None when only a run can tell (a real
        # application): then it is the median of what the full-syscall tracers counted.
        self.events = events
        self.tools = [t for t in tools if t is not None]  # the first is the untraced baseline
        self.acceptance = acceptance or []  # [(label, fn(results) -> (verdict, detail))]
        self.setup = setup        # setup() -> error or None, run once before the first run
        self.teardown = teardown  # teardown(), run once after the last
        self.metrics = metrics or []  # [(key, column title, format)]: medians shown as columns
        # A generated block of docs/BENCHMARKS.md of its own, rewritten whenever the workload
        # runs (`bench/run --only GROUP`), instead of the main block that only full runs write.
        self.section = section


def _is_tmpfs(path):
    try:
        with open("/proc/mounts") as f:
            return any(ln.split()[1] == path and ln.split()[2] == "tmpfs" for ln in f)
    except (OSError, IndexError):
        return False


class Env:
    """Paths to what the harness runs, building the small C pieces it needs on demand."""

    def __init__(self, repo, build, scale):
        self.repo = repo
        self.build = build
        self.scale = scale
        self.fay = os.path.join(build, "fay")
        self.own = os.path.join(build, "bench")  # what the harness builds itself
        self.build_errors = {}
        self._data = None
        self._tmpfs = None
        self.record_backends = ("ptrace", "ebpf")  # `fay record` backends to measure (bench/run --record)

    def data_dir(self):
        """A scratch directory for input files that outlive one run (W2's 1 GiB file), on the
        same file system as the runs' scratch directories; removed when the harness exits."""
        if self._data is None:
            self._data = tempfile.mkdtemp(prefix="fay-bench-data-")
            atexit.register(shutil.rmtree, self._data, True)
        return self._data

    def tmpfs_dir(self):
        """A directory on tmpfs (/dev/shm), or data_dir() where there is none; removed on exit."""
        if self._tmpfs is None:
            base = "/dev/shm" if os.path.isdir("/dev/shm") and _is_tmpfs("/dev/shm") else None
            self._tmpfs = tempfile.mkdtemp(prefix="fay-bench-", dir=base or self.data_dir())
            atexit.register(shutil.rmtree, self._tmpfs, True)
        return self._tmpfs

    def scaled(self, n):
        return max(1, int(n * self.scale))

    def testprog(self, name):
        """The CMake-built test program, or one compiled here from tests/testprogs."""
        built = os.path.join(self.build, "tests", "testprogs", name)
        if os.access(built, os.X_OK):
            return built
        src = os.path.join(self.repo, "tests", "testprogs", name + ".c")
        return self._cc(name, [src], ["-static"], fallback_flags=[])

    def empty_probe(self):
        src = os.path.join(self.repo, "bench", "empty_probe.c")
        return self._cc("empty_probe", [src], ["-lbpf", "-lelf"])

    def capture_floor(self):
        src = os.path.join(self.repo, "bench", "capture_floor.c")
        return self._cc("capture_floor", [src], ["-lbpf", "-pthread"])

    def bench_prog(self, name):
        """A workload program from bench/workloads/src, static like the test programs."""
        src = os.path.join(self.repo, "bench", "workloads", "src", name + ".c")
        return self._cc(name, [src], ["-static", "-pthread"], fallback_flags=["-pthread"])

    def runone(self):
        src = os.path.join(self.repo, "bench", "runone.c")
        return self._cc("runone", [src], ["-static"], fallback_flags=[])

    def _cc(self, name, srcs, flags, fallback_flags=None):
        out = os.path.join(self.own, name)
        newest = max(os.path.getmtime(s) for s in srcs)
        if os.access(out, os.X_OK) and os.path.getmtime(out) >= newest:
            return out
        os.makedirs(self.own, exist_ok=True)
        attempts = [flags] + ([fallback_flags] if fallback_flags is not None else [])
        err = ""
        for fl in attempts:
            r = subprocess.run(["cc", "-O2", "-o", out] + srcs + fl, capture_output=True, text=True)
            if r.returncode == 0:
                return out
            err = r.stderr.strip().splitlines()[-1:] or ["cc failed"]
        self.build_errors[name] = f"cannot build {name}: {err[0]}"
        return out  # the run then fails with a clear 'not found' reason
