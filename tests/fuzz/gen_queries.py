#!/usr/bin/env python3
"""Generated queries against fay, for the hardening campaign (tests/fuzz/campaign.sh).

  gen_queries.py --fay FAY --trace T.fay [-n N] [--seed S] [--live-every K]
  gen_queries.py --print [-n N] [--seed S]      the queries alone (the fuzz_query seeds)

Builds N random queries from the language's pieces (probes, fields, operators, strings at and
around their boundary lengths, globs, `in` lists of every size, aggregates, stages), valid and
invalid alike, and runs each offline over T.fay (`fay query -i`) and every K-th one live as well
(`fay query -c true`, which compiles, verifies and attaches the eBPF). It fails on a crash (death
by a signal), a run past 20 s, or a query fay blames on itself ("code generation bug",
"internal"). A refused query is fine: it must only be refused with a located message.
"""
import argparse
import random
import subprocess
import sys

COMMON_INT = ["pid", "tid", "uid", "cpu", "ret", "errno", "latency", "time"]
COMMON_STR = ["comm", "probe"]
# Sources, each with the int and string expressions valid on every one of its probes.
SOURCES = [
    ("syscall:openat", ["args.flags", "args.dfd"], ["str(args.filename)", "str(args.filename, 8)",
                                                    "str(args.filename, 256)"]),
    ("syscall:read, syscall:write", ["args.fd", "args.count"], []),
    ("syscall:open, syscall:openat", ["args.flags"], ["str(args.filename)"]),
    ("syscall:newstat, syscall:statx", [], ["str(args.filename, 100)"]),
    ("syscall:mkdir, syscall:openat", [], ["str(coalesce(args.filename, args.pathname))"]),
    ("syscall:execve", [], ["str(args.filename)"]),
    ("syscall:*", [], []),
    ("syscall:read*", ["args.fd"], []),
]
INT_FIELDS = COMMON_INT
STR_FIELDS = COMMON_STR
AGGS = ["count()", "sum({i})", "min({i})", "max({i})", "avg({i})", "hist({i})",
        "lhist({i}, 0, 1000, 100)", "quantile({i}, 0.99)", "distinct({i})", "distinct({s})"]


def lit_string(r):
    n = r.choice([0, 1, 7, 8, 14, 15, 16, 17, 62, 63, 64, 65, 255, 256])
    body = "".join(r.choice("abc/?") for _ in range(n))
    if r.random() < 0.3:
        body = r.choice(["*", "a*", "?", "??*", body + "*"])
    return '"' + body + '"'


def int_expr(r, depth=0):
    if depth > 2 or r.random() < 0.4:
        return r.choice(INT_FIELDS + [str(r.choice([0, 1, -1, 2**31, 2**63 - 1, -2**63]))])
    op = r.choice(["+", "-", "*", "/", "%", "&", "<<", ">>"])
    return "(%s %s %s)" % (int_expr(r, depth + 1), op, int_expr(r, depth + 1))


def cond(r, depth=0):
    k = r.random()
    if depth < 2 and k < 0.2:
        return "(%s %s %s)" % (cond(r, depth + 1), r.choice(["&&", "||"]), cond(r, depth + 1))
    if k < 0.45:
        return "%s %s %s" % (int_expr(r), r.choice(["==", "!=", "<", "<=", ">", ">="]), int_expr(r))
    if k < 0.7:
        return "%s %s %s" % (r.choice(STR_FIELDS), r.choice(["==", "!="]), lit_string(r))
    if k < 0.85:
        n = r.choice([1, 2, 5, 17, 100, 3000])
        return "%s in (%s)" % (int_expr(r), ", ".join(str(r.randint(-5, 40000)) for _ in range(n)))
    n = r.choice([1, 3, 9])
    return "%s in (%s)" % (r.choice(STR_FIELDS), ", ".join(lit_string(r) for _ in range(n)))


def query(r):
    global INT_FIELDS, STR_FIELDS
    src, ints, strs = r.choice(SOURCES)
    INT_FIELDS = COMMON_INT + ints
    STR_FIELDS = COMMON_STR + strs
    q = src
    for _ in range(r.choice([0, 1, 1, 2])):
        q += " | where " + cond(r)
    if r.random() < 0.2:
        q += " | sample " + r.choice(["1%", "50%", "99.9%", "1/3", "5000000000/10000000000"])
    if r.random() < 0.25:
        q += " | select " + ", ".join(r.choice(INT_FIELDS + STR_FIELDS) for _ in range(r.randint(1, 4)))
    else:
        aggs = [r.choice(AGGS).format(i=int_expr(r), s=r.choice(STR_FIELDS))
                for _ in range(r.randint(1, 3))]
        q += " | " + ", ".join(aggs)
        if r.random() < 0.7:
            q += " by " + ", ".join(r.choice(INT_FIELDS + STR_FIELDS + [cond(r)])
                                    for _ in range(r.randint(1, 3)))
        if r.random() < 0.3:
            q += " | top %d" % r.choice([0, 1, 10])
        if r.random() < 0.2:
            q += " | every " + r.choice(["1ns", "1ms", "1s"])
    if r.random() < 0.05:  # damage it
        i = r.randrange(len(q))
        q = q[:i] + r.choice(["", "|", ")", "(", '"', "!", "in"]) + q[i + 1:]
    return q


def run(argv, timeout=20):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", ""
    if p.returncode < 0:
        return "crash (signal %d)" % -p.returncode, p.stderr
    err = p.stderr
    if "code generation bug" in err or "internal" in err.lower():
        return "blames itself", err
    if p.returncode != 0 and "ERROR" not in err and "fay" not in err:
        return "unexplained exit %d" % p.returncode, err
    return "", err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fay")
    ap.add_argument("--trace")
    ap.add_argument("--print", action="store_true",
                    help="print the N queries, one per line, and run nothing (fuzz seeds)")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--live-every", type=int, default=5)
    a = ap.parse_args()
    r = random.Random(a.seed)
    if a.print:
        for _ in range(a.n):
            print(query(r))
        return 0
    if not a.fay or not a.trace:
        ap.error("--fay and --trace are needed unless --print")
    bad = 0
    counts = {"offline": 0, "live": 0, "refused": 0}
    for i in range(a.n):
        q = query(r)
        modes = [("offline", [a.fay, "query", "-i", a.trace, q])]
        if a.live_every and i % a.live_every == 0:
            modes.append(("live", [a.fay, "query", "-c", "true", q + " | for 2s"
                                   if "| for" not in q else q]))
        for mode, argv in modes:
            counts[mode] += 1
            verdict, err = run(argv)
            if "ERROR" in err:
                counts["refused"] += 1
            if verdict:
                bad += 1
                print("FAIL %s [%s]: %s\n  %s" % (mode, verdict, q, err.strip()[-400:]))
    print("queries: %d, runs offline %d, live %d, refused with a location %d, failures %d"
          % (a.n, counts["offline"], counts["live"], counts["refused"], bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
