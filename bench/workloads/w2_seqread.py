"""W2 sequential read: a 1 GiB file read from the page cache in 4 KiB blocks, every byte through
a user buffer and into a checksum (bench/workloads/src/seqread.c)."""

import os
import re

from benchlib.model import Workload
from benchlib.rules import (CAPTURE_FLOOR, NO_STORAGE, STORAGE_FLOOR, ebpf_acceptance,
                            record_rule)
from benchlib.seqdata import SeqFiles, file_bytes
from benchlib.suite import SLACK, syscall_tools
from benchlib.tools import Tool, all_of, exit_ok, exited_zero

ORDER = 2


def workloads(env):
    size = file_bytes(env, 1 << 30)
    data = SeqFiles(env, env.bench_prog("seqread"), ["w2.dat"], size)
    reads = data.blocks()
    argv = [data.prog] + data.paths
    tools = syscall_tools(
        env, argv, data.check, "seqread", (reads, reads + SLACK),
        expect={"read": (reads, reads)},
        file_expect={"openat": (1, 1)}, record_captured=size)
    tools.append(Tool(CAPTURE_FLOOR, "floor",
                      [env.capture_floor(), "--"] + argv, all_of(exit_ok, data.check),
                      needs=[env.capture_floor()]))
    tools.append(storage_floor(data.paths[0], size))
    tools.append(without_storage(env, argv, data.check, reads, size))
    return [Workload("W2-seqread", "W2",
                     f"sequential read of a {size / (1 << 20):,.0f} MiB cached file in 4 KiB "
                     f"blocks ({reads:,} reads), checksummed", reads, tools,
                     setup=data.setup, teardown=data.teardown,
                     acceptance=[("fay record vs strace -o, every buffer kept (issue 4)",
                                  record_rule(1.0, check_size=False)),
                                 ebpf_acceptance(2, "every byte read captured, ")])]


def storage_floor(path, size):
    """The bytes the program reads, written once to the file system the traces go to by dd
    (O_DIRECT, 4 MiB at a time), and nothing else: what this machine's storage alone costs. A
    recorder that keeps every byte has at least this much to write; one that overlaps its writes
    with the program (fay's writer thread does) may finish a little sooner than dd, no more."""
    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        got = os.path.getsize(os.path.join(run.scratch, "copy"))
        return (None if got == size else f"dd wrote {got} bytes, expected {size}"), None
    return Tool(STORAGE_FLOOR, "floor",
                ["dd", f"if={path}", "of={scratch}/copy", "bs=4M", "oflag=direct", "status=none"],
                check, needs=["dd"])


_SUMMARY = re.compile(r"fay: recorded (\d+) syscalls .*?, ([\d.]+) KiB of buffers\)")


def without_storage(env, argv, check_output, reads, size):
    """fay's eBPF recorder doing all of its work (probes, consumer, hashing, chunks, CRCs) but
    writing the trace to /dev/null: the recorder's own cost, apart from the disk's. Its summary
    line must count every read, every byte of buffers, and no loss."""
    def check(run):
        err = exited_zero(run)
        if err:
            return err, None
        m = _SUMMARY.search(run.stderr)
        if not m:
            return "fay record printed no summary line", None
        if "lost" in run.stderr:
            return "fay record lost events: " + run.stderr.strip().splitlines()[-1][:160], None
        run.events = int(m.group(1))
        if run.events < reads:
            return f"fay record counted {run.events} calls, expected at least {reads}", None
        if float(m.group(2)) * 1024 < size - 1024:  # the summary rounds to a tenth of a KiB
            return f"fay record kept {m.group(2)} KiB of buffers, expected {size / 1024:.0f}", None
        return None, None
    return Tool(NO_STORAGE, "floor",
                [env.fay, "record", "-o", "/dev/null", "--backend", "ebpf", "--"] + argv,
                all_of(check, check_output), needs=[env.fay])
