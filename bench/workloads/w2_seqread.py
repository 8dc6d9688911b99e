"""W2 sequential read: a 1 GiB file read from the page cache in 4 KiB blocks, every byte through
a user buffer and into a checksum (bench/workloads/src/seqread.c)."""

from benchlib.model import Workload
from benchlib.rules import ebpf_acceptance, record_rule
from benchlib.seqdata import SeqFiles, file_bytes
from benchlib.suite import SLACK, syscall_tools

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
    return [Workload("W2-seqread", "W2",
                     f"sequential read of a {size / (1 << 20):,.0f} MiB cached file in 4 KiB "
                     f"blocks ({reads:,} reads), checksummed", reads, tools,
                     setup=data.setup, teardown=data.teardown,
                     acceptance=[("fay record vs strace -o, every buffer kept (issue 4)",
                                  record_rule(1.0, check_size=False)),
                                 ebpf_acceptance(2, "every byte read captured, ")])]
