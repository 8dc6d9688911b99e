"""W6 function storm: 2,000,000 calls of a non-inlined function (tests/testprogs/func_calls),
counted by a uprobe on its entry."""

from benchlib.model import Workload
from benchlib.tools import Tool, all_of, bpftrace_tool, exit_ok, fay_tool

ORDER = 6
SYMBOL = "fay_target"


def workloads(env):
    n = env.scaled(2_000_000)
    prog = env.testprog("func_calls")
    # func_calls exits 1 if the results' sum is wrong, so exit 0 also checks the workload.
    argv = [prog, str(n)]
    empty = env.empty_probe()
    tools = [
        Tool("untraced", "untraced", argv, exit_ok),
        Tool("empty eBPF program", "floor", [empty, "-u", f"{prog}:{SYMBOL}", "--"] + argv,
             all_of(exit_ok), needs=[empty]),
        fay_tool(env, "fay query", argv, f"uprobe:{prog}:{SYMBOL} | count()", None, n, n,
                 "count"),
        bpftrace_tool(env, "bpftrace", argv, f"uprobe:{prog}:{SYMBOL}", None, n, n),
    ]
    return [Workload("W6-functions", "W6",
                     f"{n:,} calls of {SYMBOL} (tests/testprogs/func_calls {n}), uprobe on entry",
                     n, tools)]
