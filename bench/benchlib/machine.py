"""The machine description recorded with every result."""

import os
import platform
import re
import subprocess


def _first(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (r.stdout or r.stderr).strip().splitlines()
    return out[0] if out else None


def describe(repo):
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            cpu = m.group(1).strip() if m else None
    except OSError:
        pass
    mem_kb = None
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"^MemTotal:\s+(\d+)", f.read(), re.M)
            mem_kb = int(m.group(1)) if m else None
    except OSError:
        pass
    os_name = None
    try:
        with open("/etc/os-release") as f:
            m = re.search(r'^PRETTY_NAME="?([^"\n]+)', f.read(), re.M)
            os_name = m.group(1) if m else None
    except OSError:
        pass
    rev = _first(["git", "-C", repo, "rev-parse", "--short", "HEAD"])
    dirty = _first(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"])
    return {
        "host": platform.node(),
        "cores": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(mem_kb / 1024 / 1024, 1) if mem_kb else None,
        "kernel": platform.release(),
        "os": os_name,
        "fay_revision": (rev + ("-dirty" if dirty else "")) if rev else None,
        "versions": {
            "bpftrace": _first(["bpftrace", "--version"]),
            "strace": _first(["strace", "-V"]),
            "perf": _first(["perf", "--version"]),
            "python": platform.python_version(),
        },
    }
