#!/usr/bin/env python3
"""Two real ClickHouse servers as two shards of fay's windows (tests/runtime/cases/clickhouse.test).

  clickhouse_check.py FAY TESTPROGS

Each server (Debian's clickhouse-server, loopback ports and a data directory of its own) gets
one fay query's windows through `--sink clickhouse://127.0.0.1:PORT/faytest.calls --sink-create`:
shard A from `hammer 2 1000` (arg1 0 and 1, 1000 calls each), shard B from `hammer 3 600` (arg1
0, 1, 2, 600 each); arg0 is i % 4 in every call. A Distributed table over both then answers
what the two live runs answered together, merged by ClickHouse: printed from both sides, one
line per arg1, for the case to compare. Then a sink whose server is killed mid-query: fay ends
on time and counts the windows it could not write. Every process started is killed on exit;
the run is bounded (90 s).
"""

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

QUERY = ("uprobe:{prog}:fay_hot | count() as n, sum(arg0) as s, min(arg0) as lo, max(arg0) as hi, "
         "avg(arg0) as mean, hist(arg0) as h, lhist(arg0, 0, 4, 1) as lh, quantile(arg0, 0.5) as med, "
         "distinct(arg0) as d by arg1")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sql(port, text):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=text.encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def start_server(work, name, http, tcp, shards):
    d = os.path.join(work, name)
    os.makedirs(d)
    replicas = "".join(f"<shard><replica><host>127.0.0.1</host><port>{p}</port></replica></shard>"
                       for p in shards)
    with open(os.path.join(d, "config.xml"), "w") as f:
        f.write(f"""<?xml version="1.0"?><yandex>
<logger><level>error</level><console>true</console></logger>
<http_port>{http}</http_port><tcp_port>{tcp}</tcp_port><listen_host>127.0.0.1</listen_host>
<path>{d}/data/</path><tmp_path>{d}/tmp/</tmp_path><user_files_path>{d}/uf/</user_files_path>
<format_schema_path>{d}/fs/</format_schema_path>
<users_config>users.xml</users_config><default_profile>default</default_profile>
<default_database>default</default_database><mark_cache_size>268435456</mark_cache_size>
<remote_servers><fay_shards>{replicas}</fay_shards></remote_servers></yandex>""")
    with open(os.path.join(d, "users.xml"), "w") as f:
        f.write("""<?xml version="1.0"?><yandex><profiles><default/></profiles>
<users><default><password></password><networks><ip>127.0.0.1</ip></networks>
<profile>default</profile><quota>default</quota></default></users><quotas><default/></quotas>
</yandex>""")
    p = subprocess.Popen(["clickhouse-server", f"--config-file={d}/config.xml"], cwd=d,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            if sql(http, "SELECT 1").strip() == "1":
                return p
        except OSError:
            time.sleep(0.1)
    sys.exit(f"clickhouse {name} did not start")


def run_fay(fay, prog, args, sink, extra=()):
    out = subprocess.run([fay, "query", "--format", "json", "--sink", sink, "--sink-create", *extra,
                          "-c", f"{prog} {args}", QUERY.format(prog=prog)],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"fay failed: {out.stderr}")
    return [json.loads(l) for l in out.stdout.splitlines()], out.stderr


def hll_estimate(regs):
    """AggState::DistinctEstimate over merged registers."""
    m = len(regs)
    e = 0.7213 / (1 + 1.079 / m) * m * m / sum(2.0 ** -r for r in regs)
    zeros = sum(1 for r in regs if r == 0)
    if e <= 2.5 * m and zeros:
        e = m * math.log(m / zeros)
    return round(e)


def main():
    fay, testprogs = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="fay-ch-")
    procs = []
    try:
        prog = os.path.join(work, "ch_hammer")
        shutil.copy(os.path.join(testprogs, "hammer"), prog)
        http = [free_port(), free_port()]
        tcp = [free_port(), free_port()]
        for i, name in enumerate(("a", "b")):
            procs.append(start_server(work, name, http[i], tcp[i], tcp))
        rows_a, _ = run_fay(fay, prog, "2 1000", f"clickhouse://127.0.0.1:{http[0]}/faytest.calls")
        rows_b, err_b = run_fay(fay, prog, "3 600", f"clickhouse://127.0.0.1:{http[1]}/faytest.calls")
        print("sink:", [l for l in err_b.splitlines() if "clickhouse:" in l][0].split("fay: ")[1])

        # The live answer of both runs together, merged here the way fay merges.
        live = {}
        for r in rows_a + rows_b:
            m = live.setdefault(r["arg1"], {"n": 0, "s": 0, "lo": None, "hi": None, "h": {}, "lh": {}})
            m["n"] += r["n"]
            m["s"] += r["s"]
            m["lo"] = r["lo"] if m["lo"] is None else min(m["lo"], r["lo"])
            m["hi"] = r["hi"] if m["hi"] is None else max(m["hi"], r["hi"])
            for k in ("h", "lh"):
                for b in r[k]:
                    m[k][b["lo"]] = m[k].get(b["lo"], 0) + b["count"]
        for a in sorted(live):
            m = live[a]
            print(f"live arg1={a} n={m['n']} s={m['s']} lo={m['lo']} hi={m['hi']} "
                  f"mean={m['s'] / m['n']:g} h={sorted(m['h'].items())} lh={sorted(m['lh'].items())}")

        sql(http[0], "CREATE TABLE faytest.calls_all AS faytest.calls "
                     "ENGINE = Distributed(fay_shards, faytest, calls)")
        out = sql(http[0], """
            SELECT arg1, sumMerge(n), sumMerge(s), minMerge(lo), maxMerge(hi),
                   sumMerge(mean__sum) / sumMerge(mean__n), sumMapMerge(h), sumMapMerge(lh),
                   sumMapMerge(med), maxForEachMerge(d)
            FROM faytest.calls_all GROUP BY arg1 ORDER BY arg1 FORMAT JSONCompact""")
        for row in json.loads(out)["data"]:
            a, n, s, lo, hi, mean, h, lh, med, regs = row
            hk = list(zip([int(x) for x in h[0]], [int(x) for x in h[1]]))
            lk = list(zip([int(x) for x in lh[0]], [int(x) for x in lh[1]]))
            print(f"dist arg1={a} n={n} s={s} lo={lo} hi={hi} mean={mean:g} h={hk} lh={lk}")
            print(f"dist arg1={a} distinct {hll_estimate(regs)}")
        # Each shard's own result view, and a where on a key (the README's example).
        print("result view n(arg1=0) shard a:",
              sql(http[0], "SELECT sum(n) FROM faytest.calls_result WHERE arg1 = 0").strip(),
              "shard b:", sql(http[1], "SELECT sum(n) FROM faytest.calls_result WHERE arg1 = 0").strip())
        print("result view med, d (shard b, arg1=2):",
              sql(http[1], "SELECT med, d FROM faytest.calls_result WHERE arg1 = 2").strip())

        # An agent's standing query writes its windows too, to TABLE_NAME.
        standing = os.path.join(work, "standing.txt")
        with open(standing, "w") as f:
            f.write(f"calls = uprobe:{prog}:fay_hot | count() as n by arg1 | every 1s\n")
        agent = subprocess.Popen([fay, "agent", "--listen", f"127.0.0.1:{free_port()}", "--insecure",
                                  "--name", "agent1", "--standing", standing, "--sink",
                                  f"clickhouse://127.0.0.1:{http[0]}/faytest.agent", "--sink-create",
                                  "--metrics", f"127.0.0.1:{free_port()}"],
                                 stderr=subprocess.PIPE, text=True)
        procs.append(agent)
        for ln in agent.stderr:
            if "metrics at" in ln:
                break
        subprocess.run([prog, "1", "500"], check=True)
        got = ""
        for _ in range(60):
            got = sql(http[0], "SELECT host, sum(n) FROM faytest.agent_calls_result GROUP BY host").strip()
            if got.endswith("\t500"):
                break
            time.sleep(0.25)
        print("agent standing query in clickhouse:", got)

        # Several tables: the first into TABLE, the second into TABLE_2, each with its columns.
        tabs = subprocess.run([fay, "query", "--sink", f"clickhouse://127.0.0.1:{http[0]}/faytest.tabs",
                               "--sink-create", "-c", f"{prog} 2 700",
                               f"uprobe:{prog}:fay_hot | (count() as n by arg1), (sum(arg1) as s by tid)"],
                              capture_output=True, text=True, timeout=60)
        print("tables:", [l.split("fay: ")[1] for l in tabs.stderr.splitlines() if "clickhouse:" in l])
        print("tables in clickhouse:",
              sql(http[0], "SELECT arg1, n FROM faytest.tabs_result ORDER BY arg1").strip().replace("\n", " "),
              "|", sql(http[0], "SELECT count(), sum(s) FROM faytest.tabs_2_result").strip())

        # A server that dies mid-query: fay does not stall, and says what it could not write.
        t0 = time.monotonic()
        p = subprocess.Popen([fay, "query", "--sink", f"clickhouse://127.0.0.1:{http[1]}/faytest.late",
                              "--sink-create", "syscall:getppid | count() | every 100ms | for 2s"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        procs[1].kill()
        procs[1].wait()
        err = p.communicate(timeout=30)[1]
        took = time.monotonic() - t0
        line = [l for l in err.splitlines() if "clickhouse:" in l][0]
        print("server killed: fay exit", p.returncode, "within 10 s:", took < 10)
        print("server killed: windows dropped:", " 0 dropped" not in line)
        # A rejected insert reports ClickHouse's own message: a table of another shape.
        sql(http[0], "CREATE TABLE faytest.other_input (x UInt8) ENGINE = Null")
        bad = subprocess.run([fay, "query", "--sink", f"clickhouse://127.0.0.1:{http[0]}/faytest.other",
                              "syscall:getppid | count() | for 300ms"],
                             capture_output=True, text=True, timeout=30)
        refused = [l for l in bad.stderr.splitlines() if "clickhouse:" in l]
        print("rejected insert:", refused[0] if refused else bad.stderr.strip())
        missing = subprocess.run([fay, "query", "--sink", f"clickhouse://127.0.0.1:{http[0]}/faytest.none",
                                  "syscall:getppid | count() | for 100ms"], capture_output=True, text=True, timeout=30)
        print("missing table: exit", missing.returncode, missing.stderr.strip())
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
