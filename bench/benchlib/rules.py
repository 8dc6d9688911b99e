"""Acceptance rules shared by several workloads."""


def _ok(results, tool):
    t = next((r for r in results["tools"] if r["tool"] == tool), None)
    return t["median_wall_s"] if t and t["status"] == "ok" else None


def record_rule(limit, check_size=True):
    """Issue 4: fay record (ptrace) wall <= limit x strace -f -o FILE, and its trace per syscall
    <= 1/3 of strace's text, from the same run."""
    def rule(results, _all):
        rec, st = _ok(results, "fay record (ptrace)"), _ok(results, "strace -f -o FILE")
        if None in (rec, st):
            return "n/a", "needs fay record (ptrace) and strace -f -o FILE to have succeeded"
        t = {r["tool"]: r for r in results["tools"]}
        size = ""
        bpe = [t[k].get("trace_bytes_per_event") for k in ("fay record (ptrace)", "strace -f -o FILE")]
        size_ok = True
        if check_size and None not in bpe:
            size_ok = bpe[0] <= bpe[1] / 3
            size = f"; trace {bpe[0]:.1f} B/call vs strace {bpe[1]:.1f} B/line (<= 1/3: " \
                f"{'yes' if size_ok else 'no'})"
        ok = rec <= limit * st and size_ok
        return ("PASS" if ok else "FAIL"), f"{rec / st:.2f} x strace (<= {limit}){size}"
    return rule
