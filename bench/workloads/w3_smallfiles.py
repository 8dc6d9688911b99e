"""W3 small files: 10,000 files created, written (4 KiB), fsynced every 100, closed, stat'ed,
reopened, read back, compared and unlinked in a scratch directory
(bench/workloads/src/smallfiles.c).

The scratch directory is on tmpfs. On ext4 (this kernel, 6.18) every create scans past the
inodes deleted in the last 5 to 35 seconds (recently_deleted() in find_inode_bit), so a run
that follows another one's 10,000 unlinks took 0.6 to 5.5 s depending only on how recently
that was: noise from the run order, not from the tracer. On tmpfs the fsyncs return at once,
so W3 measures the syscall path, not the disk (W4 keeps a disk in the loop).
"""

import os
import shutil

from benchlib.model import Workload
from benchlib.rules import ebpf_acceptance
from benchlib.suite import SLACK, syscall_tools

ORDER = 3
SIZE = 4096


def workloads(env):
    n = env.scaled(10_000)
    fsyncs = n // 100
    # One directory for every run: each run must leave it empty, and the check removes it, so
    # the next run starts by creating it again.
    files = os.path.join(env.tmpfs_dir(), "w3-files")
    argv = [env.bench_prog("smallfiles"), files, str(n)]
    want = f"files {n} written {SIZE * n} read {SIZE * n} fsyncs {fsyncs} bad 0"

    def check(run):
        if want not in run.stdout.splitlines():
            return f"smallfiles did not print {want!r}", None
        if not os.path.isdir(files):
            return "the scratch directory is gone", None
        left = os.listdir(files)
        if left:
            shutil.rmtree(files, ignore_errors=True)
            return f"{len(left)} files left in the scratch directory, e.g. {left[0]}", None
        os.rmdir(files)
        return None, None

    # Per file: openat x2, write, close x2, newfstatat, read, unlink; plus the fsyncs.
    calls = 8 * n + fsyncs
    tools = syscall_tools(
        env, argv, check, "smallfiles", (calls, calls + SLACK),
        expect={"openat": (2 * n, 2 * n), "read": (n, n), "unlink": (n, n),
                "fsync": (fsyncs, fsyncs)},
        file_expect={"openat": (2 * n, 2 * n), "unlink": (n, n), "newfstatat": (n, n + 1)})
    return [Workload("W3-smallfiles", "W3",
                     f"{n:,} files: create, write 4 KiB, fsync every 100, close, stat, reopen, "
                     f"read, unlink", calls, tools,
                     acceptance=[ebpf_acceptance(1.5)])]
