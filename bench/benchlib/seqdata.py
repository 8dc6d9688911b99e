"""Input files for the sequential-read workloads (W2, W5), made once per bench run."""

import os
import re
import subprocess

BLOCK = 4096


def file_bytes(env, full):
    """full scaled, whole 4 KiB blocks (the reader treats a torn block as an error)."""
    return max(BLOCK, env.scaled(full) // BLOCK * BLOCK)


class SeqFiles:
    """Files written by `seqread -w`, whose checksums every run must reproduce."""

    def __init__(self, env, prog, names, size):
        self.prog = prog
        self.paths = [os.path.join(env.data_dir(), n) for n in names]
        self.size = size
        self.want = {}  # path -> the line `seqread` must print for it

    def setup(self):
        for p in self.paths:
            # Writing fsyncs: the pages stay in the page cache, clean, and no write-back runs
            # under the measurements. The warm-up run then reads them from the cache.
            r = subprocess.run([self.prog, "-w", str(self.size), p], capture_output=True,
                               text=True)
            if r.returncode != 0:
                return (r.stderr.strip() or f"seqread -w exit {r.returncode}")[:200]
            self.want[p] = r.stdout.strip()
        return None

    def teardown(self):
        for p in self.paths:
            if os.path.exists(p):
                os.unlink(p)

    def check(self, run):
        """Every file's byte count and checksum line, exactly, in the run's output."""
        got = {m.group(1): m.group(0) for m in
               re.finditer(r"^(\S+) bytes \d+ sum 0x[0-9a-f]{16}$", run.stdout, re.M)}
        for p, want in self.want.items():
            if got.get(p) != want:
                return f"reader printed {got.get(p)!r}, expected {want!r}", None
        return None, None

    def blocks(self):
        """read() calls per file: one per block and one that returns 0 at the end."""
        return self.size // BLOCK + 1
