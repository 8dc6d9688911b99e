"""W2 sequential read: a 1 GiB file read from the page cache in 4 KiB blocks, every byte through
a user buffer and into a checksum (bench/workloads/src/seqread.c)."""

import os

from benchlib.model import Workload
from benchlib.rules import CAPTURE_FLOOR, STORAGE_FLOOR, ebpf_acceptance, record_rule
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
