"""Workloads and the environment they are built against."""

import os
import subprocess


class Workload:
    def __init__(self, name, group, title, events, tools, acceptance=None):
        self.name = name          # e.g. W1-getppid
        self.group = group        # e.g. W1 (what --only matches)
        self.title = title
        self.events = events      # events a tracer of the workload's syscalls sees
        self.tools = tools        # [Tool]; the first is the untraced baseline
        self.acceptance = acceptance or []  # [(label, fn(results) -> (verdict, detail))]


class Env:
    """Paths to what the harness runs, building the small C pieces it needs on demand."""

    def __init__(self, repo, build, scale):
        self.repo = repo
        self.build = build
        self.scale = scale
        self.fay = os.path.join(build, "fay")
        self.own = os.path.join(build, "bench")  # what the harness builds itself
        self.build_errors = {}

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
        return self._cc("empty_probe", [src], ["-lbpf"])

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
