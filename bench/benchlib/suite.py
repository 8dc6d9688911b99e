"""The standard set of tools for a workload measured at the system-call level (W2-W5).

Every tool runs the same command, and every run is checked twice: the tracer's own count, and the
workload's output (the `also` check), so a tracer that broke the workload cannot pass.
"""

from benchlib.tools import (Tool, all_of, bpftrace_tool, exit_ok, fay_record_tool, fay_tool,
                            perf_trace_tool, strace_count_tool, strace_file_tool,
                            strace_seccomp_tool)

# Start-up, exit and stdio calls a static program makes beyond the ones a workload counts.
SLACK = 200

FAY_SYSCALL_QUERY = "syscall:* | count() by comm"
BPFTRACE_SYSCALL_PROBE = "tracepoint:raw_syscalls:sys_enter"
FLOOR_TRACEPOINT = "raw_syscalls:sys_enter"


def syscall_tools(env, argv, also, comm, total, expect, file_expect, needs=(),
                  record_captured=None):
    """argv: the workload; also: its output check; comm: what a count by comm keys it by.

    total: (lo, hi) of all the syscalls the workload makes (hi None: no upper bound, for a real
    application whose count only a run can tell); expect / file_expect: syscall -> (lo, hi) for
    the per-syscall tracers, and the %file subset for strace --seccomp-bpf. record_captured:
    the buffer bytes each fay record trace must hold at least.
    """
    lo, hi = total
    with_total = dict(expect, total=total)
    tools = [
        Tool("untraced", "untraced", argv, all_of(exit_ok, also)),
        Tool("empty eBPF program", "floor", [env.empty_probe(), "-t", FLOOR_TRACEPOINT, "--"]
             + argv, all_of(exit_ok, also), needs=[env.empty_probe()]),
        fay_tool(env, "fay query syscall:*", argv, FAY_SYSCALL_QUERY, comm, lo, hi, "count",
                 also),
        bpftrace_tool(env, "bpftrace", argv, BPFTRACE_SYSCALL_PROBE, comm, lo, hi, also),
        strace_count_tool(env, "strace -f -c", argv, with_total, also),
        strace_file_tool(env, "strace -f -o FILE", argv, with_total, also),
        strace_seccomp_tool(env, argv, file_expect, also),
        perf_trace_tool(env, "perf trace -s", argv, expect, also),
    ]
    # fay record rows: one per backend that `bench/run --record` names and that can record.
    tools += [fay_record_tool(env, b, argv, also, expect=with_total, captured=record_captured)
              for b in env.record_backends]
    for t in tools:
        if t is not None:
            t.needs += list(needs)
    return tools
