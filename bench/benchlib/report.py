"""Markdown tables, the results JSON and the generated section of docs/BENCHMARKS.md."""

import re

BEGIN = "<!-- BEGIN GENERATED: bench/run rewrites everything down to the END marker -->"
END = "<!-- END GENERATED -->"


def _f(v, fmt):
    return "–" if v is None else format(v, fmt)


def _ratio(v):
    if v is None:
        return "–"
    return f"{v:.2f}×" if v < 100 else f"{v:.0f}×"


def workload_table(w):
    if w.get("metric_columns"):
        return metric_table(w)
    lines = [f"#### {w['name']}: {w['title']}", "",
             "| Tool | Runs | Wall (s) | × untraced | Overhead/event | CPU (s) | Peak RSS (MB) "
             "| Events | Events/s | Trace B/event | Status |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for t in w["tools"]:
        if t["status"] != "ok":
            lines.append(f"| {t['tool']} | {len(t['runs'])} | – | – | – | – | – | – | – | – "
                         f"| **failed**: {t['reason']} |")
            continue
        ov = t.get("overhead_ns_per_event")
        status = "; ".join(x for x in ("ok", t.get("capped") and "capped at " + t["capped"],
                                       t.get("note")) if x)
        lines.append(
            f"| {t['tool']} | {len(t['runs'])}{'*' if t.get('capped') else ''} "
            f"| {t['median_wall_s']:.3f} "
            f"| {_ratio(t.get('ratio_untraced'))} | {_f(ov, '.0f') + ' ns' if ov is not None else '–'} "
            f"| {t['median_cpu_s']:.3f} | {t['median_rss_kb'] / 1024:.1f} "
            f"| {_f(t.get('events'), ',.0f')} "
            f"| {_f(t.get('events_per_s'), ',.0f')} | {_f(t.get('trace_bytes_per_event'), '.1f')} "
            f"| {status} |")
    ok = [t for t in w["tools"] if t["status"] == "ok" and t["kind"] != "untraced"]
    if len(ok) > 1:
        lines += ["", "Wall-time ratio, row ÷ column:", "",
                  "| | " + " | ".join(t["tool"] for t in ok) + " |",
                  "|---|" + "--:|" * len(ok)]
        for a in ok:
            cells = [_ratio(a["median_wall_s"] / b["median_wall_s"]) for b in ok]
            lines.append(f"| {a['tool']} | " + " | ".join(cells) + " |")
    for a in w.get("acceptance", []):
        lines += ["", f"**{a['label']}: {a['verdict']}** ({a['detail']})"]
    return "\n".join(lines)


def metric_table(w):
    """A workload measured by its own figures (the cluster's), not by a program's wall time."""
    cols = w["metric_columns"]
    lines = [f"#### {w['name']}: {w['title']}", "",
             "| Setup | Runs | " + " | ".join(c[1] for c in cols) + " | Status |",
             "|---|--:|" + "--:|" * len(cols) + "---|"]
    for t in w["tools"]:
        if t["status"] != "ok":
            lines.append(f"| {t['tool']} | {len(t['runs'])} | " + "– | " * len(cols)
                         + f"**failed**: {t['reason']} |")
            continue
        m = t.get("metrics", {})
        cells = [_f(m.get(key), fmt) for key, _, fmt in cols]
        lines.append(f"| {t['tool']} | {len(t['runs'])} | " + " | ".join(cells) + " | ok |")
    for a in w.get("acceptance", []):
        lines += ["", f"**{a['label']}: {a['verdict']}** ({a['detail']})"]
    return "\n".join(lines)


def machine_lines(m):
    return [f"- Host: {m['host']}, {m['cores']} cores, {m['cpu_model']}, {m['memory_gib']} GiB",
            f"- Kernel {m['kernel']}, {m['os']}",
            f"- fay {m['fay_revision']}; " + "; ".join(
                f"{k}: {v}" for k, v in m["versions"].items() if v)]


def full_report(results, workloads=None):
    r = results
    head = [f"Run {r['date']} on {r['machine']['host']}: mode {r['mode']}, "
            f"{r['warmup']} warm-up + {r['runs']} counted runs per tool (interleaved), "
            f"scale {r['scale']:g}, total {r['elapsed_s']:.0f} s.", ""]
    head += machine_lines(r["machine"]) + [""]
    wls = r["workloads"] if workloads is None else workloads
    return "\n".join(head + ["\n\n".join(workload_table(w) for w in wls)]) + "\n"


def _replace_block(text, begin, end, body, heading):
    if begin not in text or end not in text:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n{begin}\n{end}\n"
    return re.sub(re.escape(begin) + r".*?" + re.escape(end),
                  lambda _: f"{begin}\n\n{body}\n{end}", text, flags=re.S)


def regenerate_doc(path, results, main=True):
    """Replaces the generated sections of docs/BENCHMARKS.md, keeping the prose around them:
    the main one (main=True) with the workloads that have no section of their own, and each
    section's block with its workloads."""
    with open(path) as f:
        text = f.read()
    plain = [w for w in results["workloads"] if not w.get("section")]
    if main:
        text = _replace_block(text, BEGIN, END, full_report(results, plain), "Results")
    for sec in sorted({w["section"] for w in results["workloads"] if w.get("section")}):
        wls = [w for w in results["workloads"] if w.get("section") == sec]
        text = _replace_block(text, f"<!-- BEGIN GENERATED {sec}: bench/run --only {sec} "
                              "rewrites everything down to its END marker -->",
                              f"<!-- END GENERATED {sec} -->", full_report(results, wls),
                              f"Results: {sec}")
    with open(path, "w") as f:
        f.write(text)
