"""Acceptance rules shared by several workloads."""

from benchlib.tools import LOST_REASON


def _row(results, tool):
    return next((r for r in results["tools"] if r["tool"] == tool), None)


def _ok(results, tool):
    t = _row(results, tool)
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


# W2's rows for the least a recorder that keeps every byte must do (workloads/w2_seqread.py):
# copy each read's bytes through a ring to user space (bench/capture_floor.c), and write them
# once to the traces' file system.
CAPTURE_FLOOR = "capture floor: each read's bytes into a ring, nothing stored"
STORAGE_FLOOR = "storage alone: dd of the bytes read to the trace's disk"
NO_STORAGE = "fay record (ebpf) without storage: the trace to /dev/null"
BOTH_HOOKS = "empty raw tracepoint programs on sys_enter and sys_exit"


def ebpf_record_rule(limit=None):
    """Issue 5: fay record (ebpf) wall <= limit x untraced (limit None: no time limit), and no
    event lost in any run. Beside the figure: perf trace -s's and strace -f -o FILE's ratios to
    untraced from the same run, and the recorder's cost per event."""
    def rule(results, _all):
        rec, base = _row(results, "fay record (ebpf)"), _row(results, "untraced")
        if rec is None:
            return "n/a", "fay record (ebpf) did not run (bench/run --record)"
        if rec["status"] != "ok":
            # A lost event fails the run (tools.fay_record_tool), so the count is in the reason.
            m = LOST_REASON.match(rec.get("reason") or "")
            lost = f"events lost: {m.group(1)}; " if m else ""
            return "FAIL", f"{lost}fay record (ebpf) failed: {rec.get('reason')}"
        lost = rec.get("metrics", {}).get("lost_events")
        if lost is None:
            return "FAIL", "fay info reported no lost-event count"
        parts = [f"events lost: {lost:.0f} (fay info on every run)"]
        captured = rec.get("metrics", {}).get("bytes_captured")
        if captured is not None:
            parts.append(f"{captured:,.0f} buffer bytes in the trace, none truncated")
        ratio = None
        if base and base["status"] == "ok":
            ratio = rec["median_wall_s"] / base["median_wall_s"]
            head = f"{ratio:.2f} x untraced" + (f" (<= {limit:g})" if limit is not None else "")
            peers = []
            for peer in ("perf trace -s", "strace -f -o FILE"):
                p = _row(results, peer)
                if p and p["status"] == "ok":
                    peers.append(f"{peer} {p['median_wall_s'] / base['median_wall_s']:.2f} x")
                elif p:
                    peers.append(f"{peer} failed")
            if peers:
                head += "; " + ", ".join(peers)
            for label, name in (("capturing the bytes alone (a bare ring copy)", CAPTURE_FLOOR),
                                ("writing them alone (dd, O_DIRECT)", STORAGE_FLOOR),
                                ("fay with the trace to /dev/null", NO_STORAGE),
                                ("both syscall hooks with empty programs", BOTH_HOOKS)):
                floor = _row(results, name)
                if floor and floor["status"] == "ok":
                    head += f"; {label} {floor['median_wall_s'] / base['median_wall_s']:.2f} x"
            n = rec.get("events") or results.get("events")
            if n:
                cost = (rec["median_wall_s"] - base["median_wall_s"]) / n * 1e9
                head += f"; {cost:.0f} ns/event over {n:,.0f} events"
            parts.insert(0, head)
        elif limit is not None:
            return "n/a", "needs untraced to have succeeded; " + parts[0]
        ok = lost == 0 and (limit is None or ratio <= limit)
        return ("PASS" if ok else "FAIL"), "; ".join(parts)
    return rule


def ebpf_acceptance(limit=None, also=""):
    """The (label, rule) pair of issue 5 for a workload's acceptance list."""
    bound = f"<= {limit:g} x untraced, " if limit is not None else ""
    return f"fay record (ebpf): {bound}{also}no event lost (issue 5)", ebpf_record_rule(limit)
