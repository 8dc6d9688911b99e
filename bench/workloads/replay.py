"""Replay rows (issue 6): W3, W4 and W5 recorded once each, then replayed with
`fay replay --prepare --verify` (asap) into a fresh, empty root on the file system the original
ran on, and timed against the original program. Run them alone with `bench/run --only replay`.

W5's files are 32 MiB per thread here rather than 256 MiB: --prepare writes every byte the
trace read back into the root, and the row is there for its verification (four threads, their
orders kept, zero mismatches), not for a time limit.
"""

import os
import shutil

from benchlib.model import Workload
from benchlib.replaying import Recording, replay_rule, replay_tool, verified_rule
from benchlib.seqdata import SeqFiles, file_bytes
from benchlib.tools import Tool, all_of, exit_ok
from workloads import w4_sqlite

ORDER = 90


def w3(env):
    n = env.scaled(10_000)
    tmpfs = env.tmpfs_dir()
    prog = env.bench_prog("smallfiles")
    files = os.path.join(tmpfs, "replay-w3-files")  # the original runs'
    rec = Recording(env, "w3", [prog, os.path.join(tmpfs, "replay-w3-rec", "files"), str(n)],
                    os.path.join(tmpfs, "replay-w3-rec"))
    want = f"files {n} written {4096 * n} read {4096 * n} fsyncs {n // 100} bad 0"

    def check(run):
        ok = want in run.stdout.splitlines()
        left = os.listdir(files) if os.path.isdir(files) else []
        shutil.rmtree(files, ignore_errors=True)
        if not ok:
            return f"smallfiles did not print {want!r}", None
        return (f"{len(left)} files left behind" if left else None), None

    tools = [Tool("untraced", "untraced", [prog, files, str(n)], all_of(exit_ok, check)),
             replay_tool(env, rec, os.path.join(tmpfs, "replay-w3-root"))]
    return Workload("W3-replay", "replay",
                    f"W3 ({n:,} small files) recorded once, replayed with --prepare --verify "
                    f"into an empty root on tmpfs", None, tools, setup=rec.record,
                    teardown=rec.cleanup, acceptance=[replay_rule(1.2)])


def w4(env):
    txs = env.scaled(100)
    sql = os.path.join(env.data_dir(), "replay-w4.sql")
    sqlite = shutil.which("sqlite3") or "/usr/bin/sqlite3"
    want = w4_sqlite.expected_rows(txs * w4_sqlite.ROWS_PER_TX)
    workdir = os.path.join(env.data_dir(), "replay-w4-rec")
    rec = Recording(env, "w4", [sqlite, "-init", sql, os.path.join(workdir, "w4.db")], workdir)

    def setup():
        with open(sql, "w") as f:
            f.write(w4_sqlite.script(txs))
        return rec.record()

    def teardown():
        rec.cleanup()
        if os.path.exists(sql):
            os.unlink(sql)

    def check(run):
        got = [ln for ln in run.stdout.splitlines() if ln.count("|") == 4]
        return (None if got == want else "wrong query result"), None

    tools = [Tool("untraced", "untraced", [sqlite, "-init", sql, "{scratch}/w4.db"],
                  all_of(exit_ok, check), needs=[sqlite]),
             replay_tool(env, rec, "{scratch}/root")]
    return Workload("W4-replay", "replay",
                    f"W4 (sqlite3, {txs * w4_sqlite.ROWS_PER_TX:,} INSERTs in {txs} transactions) "
                    f"recorded once, replayed with --prepare --verify into an empty root",
                    None, tools, setup=setup, teardown=teardown, acceptance=[replay_rule(1.2)])


def w5(env):
    size = file_bytes(env, 32 << 20)
    data = SeqFiles(env, env.bench_prog("seqread"), [f"replay-w5-{i}.dat" for i in range(4)],
                    size)
    # The data files are inputs the replay must find: --prepare rebuilds them from the reads.
    rec = Recording(env, "w5", [data.prog] + data.paths,
                    os.path.join(env.data_dir(), "replay-w5-rec"), cwd=env.data_dir())

    def setup():
        return data.setup() or rec.record()

    def teardown():
        rec.cleanup()
        data.teardown()

    tools = [Tool("untraced", "untraced", [data.prog] + data.paths, all_of(exit_ok, data.check)),
             replay_tool(env, rec, "{scratch}/root")]
    return Workload("W5-replay", "replay",
                    f"W5 (4 threads each reading {size >> 20} MiB) recorded once, replayed with "
                    f"--prepare --verify into an empty root", None, tools, setup=setup,
                    teardown=teardown, acceptance=[verified_rule()])


def workloads(env):
    return [w3(env), w4(env), w5(env)]
