"""W4 real application: Debian's sqlite3 CLI inserts 100,000 rows in 100 transactions into a new
database, then runs a grouped query whose rows are checked exactly."""

import os
import shutil

from benchlib.model import Workload
from benchlib.rules import ebpf_acceptance
from benchlib.suite import syscall_tools

ORDER = 4
ROWS_PER_TX = 1000
GROUPS = 16


def row(i):
    return i % GROUPS, (i * 7919) % 100003, f"row-{i:06d}"


QUERY = ("SELECT grp, count(*), sum(val), min(name), max(name) FROM t "
         "GROUP BY grp ORDER BY grp;")


def script(txs):
    out = ["CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, val INTEGER NOT NULL, "
           "name TEXT NOT NULL);"]
    i = 0
    for _ in range(txs):
        out.append("BEGIN;")
        for _ in range(ROWS_PER_TX):
            g, v, name = row(i)
            out.append(f"INSERT INTO t(grp, val, name) VALUES({g}, {v}, '{name}');")
            i += 1
        out.append("COMMIT;")
    out.append(QUERY)
    return "\n".join(out) + "\n"


def expected_rows(rows):
    agg = {}
    for i in range(rows):
        g, v, name = row(i)
        c, s, lo, hi = agg.get(g, (0, 0, name, name))
        agg[g] = (c + 1, s + v, min(lo, name), max(hi, name))
    return [f"{g}|{c}|{s}|{lo}|{hi}" for g, (c, s, lo, hi) in sorted(agg.items())]


def workloads(env):
    txs = env.scaled(100)
    rows = txs * ROWS_PER_TX
    sql = os.path.join(env.data_dir(), "w4.sql")
    want = expected_rows(rows)
    # An absolute path: bpftrace -c wants one.
    sqlite = shutil.which("sqlite3") or "/usr/bin/sqlite3"
    # -init runs the script, then the CLI reads its stdin, which is /dev/null: it ends there.
    argv = [sqlite, "-init", sql, "{scratch}/w4.db"]

    def setup():
        with open(sql, "w") as f:
            f.write(script(txs))
        return None

    def teardown():
        if os.path.exists(sql):
            os.unlink(sql)

    def check(run):
        got = [ln for ln in run.stdout.splitlines() if ln.count("|") == 4]
        if got != want:
            first = next((f"{g!r} where {w!r} was expected" for g, w in zip(got, want)
                          if g != w), f"{len(got)} rows where {len(want)} were expected")
            return f"wrong query result: {first}", None
        return None, None

    # The syscall count of a real application is what the tracers see; the bounds only reject
    # a run that cannot have committed every transaction (sqlite syncs at least twice a commit).
    tools = syscall_tools(
        env, argv, check, "sqlite3", (10 * txs, None),
        expect={"fdatasync": (2 * txs, None)},
        file_expect={"openat": (2 * txs, None)}, needs=[sqlite])
    return [Workload("W4-sqlite", "W4",
                     f"sqlite3 CLI: {rows:,} INSERTs in {txs} transactions into a new database, "
                     f"then a grouped query", None, tools, setup=setup, teardown=teardown,
                     acceptance=[ebpf_acceptance(1.5)])]
