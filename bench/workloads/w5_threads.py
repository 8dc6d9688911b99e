"""W5 threads: 4 threads, each reading its own 256 MiB cached file in 4 KiB blocks (W2 four times
at once; bench/workloads/src/seqread.c with four files), every checksum verified."""

from benchlib.model import Workload
from benchlib.rules import ebpf_acceptance
from benchlib.seqdata import SeqFiles, file_bytes
from benchlib.suite import SLACK, syscall_tools

ORDER = 5
THREADS = 4


def workloads(env):
    size = file_bytes(env, 256 << 20)
    data = SeqFiles(env, env.bench_prog("seqread"), [f"w5-{i}.dat" for i in range(THREADS)],
                    size)
    reads = THREADS * data.blocks()
    argv = [data.prog] + data.paths
    tools = syscall_tools(
        env, argv, data.check, "seqread", (reads, reads + SLACK),
        expect={"read": (reads, reads)},
        file_expect={"openat": (THREADS, THREADS)})
    return [Workload("W5-threads", "W5",
                     f"{THREADS} threads, each reading its own {size / (1 << 20):,.0f} MiB cached "
                     f"file in 4 KiB blocks ({reads:,} reads), checksummed", reads, tools,
                     setup=data.setup, teardown=data.teardown,
                     # Four writers into the ring buffers at once: where a loss would show first.
                     acceptance=[ebpf_acceptance()])]
