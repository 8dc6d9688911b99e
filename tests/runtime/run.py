#!/usr/bin/env python3
"""Runs fay's declarative end-to-end tests (tests/runtime/cases/*.test).

The file format is described in tests/runtime/README.md. Exit status: 0 when every case passed or
was skipped with at least one pass, 1 when any case failed (or a file did not parse), 77 when every
case was skipped (CTest's SKIP_RETURN_CODE).
"""

import argparse
import ctypes
import difflib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TIMEOUT = 30
SKIP_EXIT = 77
MAX_SHOWN_LINES = 40

# Directives that take an argument, and those that may repeat within a case.
DIRECTIVES = {
    "NAME", "RUN", "RUN_SH", "EXPECT", "EXPECT_NOT", "EXPECT_ERR", "EXPECT_ERR_NOT",
    "EXPECT_JSON", "EXPECT_JSON_ALL", "EXPECT_NO_JSON", "EXPECT_ROWS", "EXPECT_EXIT",
    "REQUIRES", "TIMEOUT", "ENV", "SERIAL",
}
REPEATABLE = {
    "EXPECT", "EXPECT_NOT", "EXPECT_ERR", "EXPECT_ERR_NOT", "EXPECT_JSON", "EXPECT_JSON_ALL",
    "EXPECT_NO_JSON", "REQUIRES", "ENV",
}
SUBST = re.compile(r"\{(fay|testprogs|bpftool|tmpdir|runtime|python)\}")


class ParseError(Exception):
    pass


class Directive:
    def __init__(self, kind, arg, line):
        self.kind, self.arg, self.line = kind, arg, line


class Case:
    def __init__(self, path, name, line):
        self.path, self.name, self.line = path, name, line
        self.run = None          # Directive RUN or RUN_SH
        self.checks = []         # Directives, in file order
        self.requires = []
        self.timeout = DEFAULT_TIMEOUT
        self.exit = Directive("EXPECT_EXIT", "0", line)
        self.env = {}
        self.serial = False

    def where(self, d=None):
        return f"{os.path.basename(self.path)}:{(d or self).line}"


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_text(text, path):
    """Splits a .test file into cases. A case starts at each NAME line."""
    cases = []
    cur = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        lineno = i + 1
        raw = lines[i]
        i += 1
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, arg = line.partition(" ")
        arg = arg.strip()
        if kind not in DIRECTIVES:
            raise ParseError(f"{path}:{lineno}: unknown directive '{kind}'")
        if kind == "NAME":
            if not arg:
                raise ParseError(f"{path}:{lineno}: NAME needs a name")
            cur = Case(path, arg, lineno)
            cases.append(cur)
            continue
        if cur is None:
            raise ParseError(f"{path}:{lineno}: '{kind}' before the first NAME")
        if kind == "RUN_SH" and arg.startswith("<<"):
            # Heredoc form: RUN_SH <<END ... END
            end = arg[2:].strip()
            if not end:
                raise ParseError(f"{path}:{lineno}: RUN_SH << needs an end marker")
            body = []
            while i < len(lines) and lines[i].strip() != end:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ParseError(f"{path}:{lineno}: RUN_SH heredoc is missing its '{end}' line")
            i += 1
            arg = "\n".join(body) + "\n"
        if kind not in ("SERIAL",) and not arg:
            raise ParseError(f"{path}:{lineno}: {kind} needs an argument")
        d = Directive(kind, arg, lineno)
        if kind in ("RUN", "RUN_SH"):
            if cur.run is not None:
                raise ParseError(f"{path}:{lineno}: case '{cur.name}' has two RUN lines")
            cur.run = d
        elif kind == "REQUIRES":
            cur.requires.extend(arg.split())
        elif kind == "TIMEOUT":
            try:
                cur.timeout = float(arg)
            except ValueError:
                raise ParseError(f"{path}:{lineno}: TIMEOUT wants seconds, got '{arg}'")
        elif kind == "EXPECT_EXIT":
            if not re.fullmatch(r"-?\d+|nonzero|any", arg):
                raise ParseError(f"{path}:{lineno}: EXPECT_EXIT wants a number, 'nonzero' or 'any'")
            cur.exit = d
        elif kind == "ENV":
            k, eq, v = arg.partition("=")
            if not eq or not k:
                raise ParseError(f"{path}:{lineno}: ENV wants NAME=VALUE")
            cur.env[k] = v
        elif kind == "SERIAL":
            cur.serial = True
        else:
            if kind in ("EXPECT_JSON", "EXPECT_JSON_ALL", "EXPECT_NO_JSON"):
                try:
                    want = json.loads(arg)
                except ValueError as e:
                    raise ParseError(f"{path}:{lineno}: {kind} is not valid JSON: {e}")
                if not isinstance(want, dict):
                    raise ParseError(f"{path}:{lineno}: {kind} wants a JSON object")
            if kind == "EXPECT_ROWS" and not arg.isdigit():
                raise ParseError(f"{path}:{lineno}: EXPECT_ROWS wants a number")
            if _is_regex(arg):
                try:
                    re.compile(arg[1:-1])
                except re.error as e:
                    raise ParseError(f"{path}:{lineno}: bad regex {arg}: {e}")
            cur.checks.append(d)
    for c in cases:
        if c.run is None:
            raise ParseError(f"{path}:{c.line}: case '{c.name}' has no RUN or RUN_SH")
    return cases


def _is_regex(arg):
    return len(arg) >= 2 and arg.startswith("/") and arg.endswith("/")


def parse_file(path):
    with open(path, encoding="utf-8") as f:
        return parse_text(f.read(), path)


# ---------------------------------------------------------------------------------------------
# Capabilities


class Capabilities:
    """Answers REQUIRES lines. Each probe is cheap and cached; each refusal carries its reason."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.cache = {}

    def check(self, cap):
        if cap not in self.cache:
            self.cache[cap] = self._probe(cap)
        return self.cache[cap]  # None when available, else the reason

    def _probe(self, cap):
        if cap == "root":
            return None if os.geteuid() == 0 else "needs root (euid is %d)" % os.geteuid()
        if cap == "bpf":
            return probe_bpf()
        if cap == "tracefs":
            return probe_tracefs()
        if cap == "uprobes":
            if os.path.isdir("/sys/bus/event_source/devices/uprobe"):
                return None
            return "the kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe missing)"
        if cap == "bpftool":
            if self.ctx["bpftool"] and os.access(self.ctx["bpftool"], os.X_OK):
                return None
            return "bpftool not found (apt-get install bpftool)"
        if cap.startswith("cmd:"):
            name = cap[4:]
            return None if shutil.which(name) else f"'{name}' is not on PATH"
        return f"unknown capability '{cap}'"


def probe_bpf():
    """Loads the smallest socket filter (r0 = 0; exit) through bpf(2)."""
    if os.geteuid() != 0:
        return "bpf() needs root or CAP_BPF (euid is %d)" % os.geteuid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as e:
        return f"cannot load libc for the bpf() probe: {e}"
    insns = (ctypes.c_uint64 * 2)(0x00000000000000b7, 0x0000000000000095)
    license_ = ctypes.c_char_p(b"GPL")
    # union bpf_attr for BPF_PROG_LOAD: prog_type, insn_cnt, insns, license, ...
    attr = (ctypes.c_uint8 * 128)()
    ctypes.memmove(ctypes.addressof(attr), ctypes.byref(ctypes.c_uint32(1)), 4)  # SOCKET_FILTER
    ctypes.memmove(ctypes.addressof(attr) + 4, ctypes.byref(ctypes.c_uint32(2)), 4)
    ctypes.memmove(ctypes.addressof(attr) + 8,
                   ctypes.byref(ctypes.c_uint64(ctypes.addressof(insns))), 8)
    ctypes.memmove(ctypes.addressof(attr) + 16,
                   ctypes.byref(ctypes.c_uint64(ctypes.cast(license_, ctypes.c_void_p).value)), 8)
    nr_bpf = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
    if nr_bpf is None:
        return f"no bpf() syscall number known for {os.uname().machine}"
    fd = libc.syscall(ctypes.c_long(nr_bpf), ctypes.c_long(5), attr, ctypes.c_uint(128))
    if fd < 0:
        err = ctypes.get_errno()
        return f"bpf(BPF_PROG_LOAD) refused: {os.strerror(err)}"
    os.close(fd)
    return None


def probe_tracefs():
    path = "/sys/kernel/tracing"
    if os.path.isdir(os.path.join(path, "events")):
        return None
    if os.geteuid() == 0:
        r = subprocess.run(["mount", "-t", "tracefs", "nodev", path], capture_output=True, text=True)
        if r.returncode == 0:
            return None
        return f"tracefs is not mounted and mounting it failed: {r.stderr.strip()}"
    return f"tracefs is not mounted; run: mount -t tracefs nodev {path}"


# ---------------------------------------------------------------------------------------------
# Running and checking


class Result:
    def __init__(self, status, detail=""):
        self.status, self.detail = status, detail  # status: pass | fail | skip


def substitute(text, ctx):
    return SUBST.sub(lambda m: ctx[m.group(1)] or "", text)


def run_command(case, ctx, tmpdir):
    local = dict(ctx, tmpdir=tmpdir)
    env = dict(os.environ)
    # RUN_SH scripts (and tests/runtime/lib.sh) see the same paths as environment variables.
    env.update(FAY=ctx["fay"], FAY_TESTPROGS=ctx["testprogs"], BPFTOOL=ctx["bpftool"] or "bpftool",
               FAY_TMPDIR=tmpdir)
    env.update({k: substitute(v, local) for k, v in case.env.items()})
    body = substitute(case.run.arg, local)
    if case.run.kind == "RUN":
        try:
            argv = shlex.split(body)
        except ValueError as e:
            return None, f"RUN line does not tokenize: {e}", body
    else:
        argv = ["/bin/sh", "-c", body]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                cwd=tmpdir, start_new_session=True, stdin=subprocess.DEVNULL)
    except OSError as e:
        return None, f"cannot start {argv[0]}: {e}", body
    try:
        out, err = proc.communicate(timeout=case.timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        # The whole session: the command may have started background children of its own.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        timed_out = True
    elapsed = time.monotonic() - start
    return dict(code=proc.returncode, out=out.decode("utf-8", "replace"),
                err=err.decode("utf-8", "replace"), timed_out=timed_out,
                elapsed=elapsed), None, body


def json_rows(text):
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict):
            rows.append(v)
    return rows


OPS = {
    "$ge": lambda a, b: _num(a) and a >= b, "$gt": lambda a, b: _num(a) and a > b,
    "$le": lambda a, b: _num(a) and a <= b, "$lt": lambda a, b: _num(a) and a < b,
    "$ne": lambda a, b: a != b,
    "$re": lambda a, b: isinstance(a, str) and re.search(b, a) is not None,
}


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def matches(want, got):
    """Partial match: every member of `want` must be in `got`; lists match element-wise."""
    if isinstance(want, dict) and want and all(k in OPS for k in want):
        return all(OPS[k](got, v) for k, v in want.items())
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and matches(v, got[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and \
            all(matches(w, g) for w, g in zip(want, got))
    if isinstance(want, bool) or isinstance(got, bool):
        return type(want) is type(got) and want == got
    return want == got


def closest_row(want, rows):
    def score(r):
        return sum(1 for k, v in want.items() if k in r and matches(v, r[k]))
    return max(rows, key=score) if rows else None


def explain_json_miss(want, rows):
    lines = [f"  no row among {len(rows)} JSON rows contains {json.dumps(want)}"]
    best = closest_row(want, rows)
    if best is not None:
        lines.append(f"  closest row: {json.dumps(best)}")
        for k, v in want.items():
            if k not in best:
                lines.append(f"  - {k}: {json.dumps(v)}   (member missing)")
            elif not matches(v, best[k]):
                lines.append(f"  - {k}: {json.dumps(v)}")
                lines.append(f"  + {k}: {json.dumps(best[k])}")
    return "\n".join(lines)


def check_text(d, text, stream):
    """EXPECT / EXPECT_ERR and their _NOT forms. Returns an error string or None."""
    negate = d.kind.endswith("_NOT")
    if _is_regex(d.arg):
        found = re.search(d.arg[1:-1], text, re.MULTILINE) is not None
        what = f"regex {d.arg}"
    else:
        found = any(l.strip() == d.arg for l in text.splitlines())
        what = f"line {d.arg!r}"
    if found and negate:
        return f"{stream} must not contain {what}, but it does"
    if not found and not negate:
        msg = f"{stream} has no {what}"
        if not _is_regex(d.arg):
            near = difflib.get_close_matches(d.arg, [l.strip() for l in text.splitlines()], 1, 0.5)
            if near:
                msg += f"\n  - {d.arg}\n  + {near[0]}"
        return msg
    return None


def check_case(case, r, subst_ctx):
    errors = []
    want_exit = case.exit.arg
    if r["timed_out"]:
        errors.append((case.run, f"timed out after {case.timeout:g}s (killed)"))
    elif r["code"] < 0 and want_exit != "any":
        # A crash is never the expected way to fail.
        errors.append((case.exit, f"killed by signal {-r['code']} "
                                  f"({signal.Signals(-r['code']).name}), expected exit {want_exit}"))
    elif want_exit == "nonzero":
        if r["code"] == 0:
            errors.append((case.exit, "exit status is 0, expected non-zero"))
    elif want_exit != "any" and r["code"] != int(want_exit):
        errors.append((case.exit, f"exit status is {r['code']}, expected {want_exit}"))
    rows = None
    for d in case.checks:
        arg = substitute(d.arg, subst_ctx)
        dd = Directive(d.kind, arg, d.line)
        err = None
        if d.kind in ("EXPECT", "EXPECT_NOT"):
            err = check_text(dd, r["out"], "stdout")
        elif d.kind in ("EXPECT_ERR", "EXPECT_ERR_NOT"):
            err = check_text(dd, r["err"], "stderr")
        else:
            if rows is None:
                rows = json_rows(r["out"])
            if d.kind == "EXPECT_ROWS":
                if len(rows) != int(arg):
                    err = f"{len(rows)} JSON rows on stdout, expected {arg}"
            else:
                want = json.loads(arg)
                hits = [row for row in rows if matches(want, row)]
                if d.kind == "EXPECT_JSON" and not hits:
                    err = explain_json_miss(want, rows)
                elif d.kind == "EXPECT_NO_JSON" and hits:
                    err = f"  a row matches {json.dumps(want)} but none may: {json.dumps(hits[0])}"
                elif d.kind == "EXPECT_JSON_ALL":
                    misses = [row for row in rows if not matches(want, row)]
                    if not rows:
                        err = f"  no JSON rows on stdout; every row must contain {json.dumps(want)}"
                    elif misses:
                        err = (f"  {len(misses)} of {len(rows)} rows lack {json.dumps(want)};"
                               f" first: {json.dumps(misses[0])}")
        if err:
            errors.append((d, err))
    return errors


def tail(text, n=MAX_SHOWN_LINES):
    lines = text.rstrip("\n").splitlines()
    if len(lines) > n:
        lines = [f"... ({len(lines) - n} earlier lines not shown)"] + lines[-n:]
    return lines


def run_case(case, ctx, caps):
    for cap in case.requires:
        reason = caps.check(cap)
        if reason:
            return Result("skip", f"requires {cap}: {reason}")
    tmpdir = tempfile.mkdtemp(prefix="fay-runtime-")
    try:
        r, err, body = run_command(case, ctx, tmpdir)
        if r is None:
            return Result("fail", f"{case.where(case.run)}: {err}")
        errors = check_case(case, r, dict(ctx, tmpdir=tmpdir))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if not errors:
        return Result("pass", f"{r['elapsed']:.2f}s")
    report = [f"  command ({case.where(case.run)}):"]
    report += ["    " + l for l in body.rstrip("\n").splitlines()]
    report.append(f"  exit status: {r['code']}   elapsed: {r['elapsed']:.2f}s")
    for d, e in errors:
        report.append(f"  {case.where(d)}: {d.kind} {d.arg.strip()}" if d is not case.run
                      else f"  {case.where(d)}:")
        report += ["  " + l for l in e.splitlines()]
    for name, text in (("stdout", r["out"]), ("stderr", r["err"])):
        report.append(f"  --- {name} ---" + ("" if text.strip() else " (empty)"))
        report += ["  | " + l for l in tail(text)]
    return Result("fail", "\n".join(report))


def run_files(files, ctx, name_filter=None, log=print):
    caps = Capabilities(ctx)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    failed = []
    for path in files:
        try:
            cases = parse_file(path)
        except (ParseError, OSError) as e:
            log(f"[  ERROR   ] {e}")
            counts["fail"] += 1
            failed.append(str(path))
            continue
        for case in cases:
            if name_filter and not re.search(name_filter, case.name):
                continue
            label = f"{os.path.basename(path)}: {case.name}"
            log(f"[ RUN      ] {label}")
            res = run_case(case, ctx, caps)
            counts[res.status] += 1
            if res.status == "pass":
                log(f"[       OK ] {label} ({res.detail})")
            elif res.status == "skip":
                log(f"[  SKIPPED ] {label}: {res.detail}")
            else:
                log(res.detail)
                log(f"[  FAILED  ] {label}")
                failed.append(label)
    log(f"runtime: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    for f in failed:
        log(f"  FAILED: {f}")
    if counts["fail"]:
        return 1
    if counts["skip"] and not counts["pass"]:
        return SKIP_EXIT
    return 0


# ---------------------------------------------------------------------------------------------
# Self-test: the runner must be able to fail.

SELFTEST_CASES = [
    # (expected outcome, case text)
    ("pass", 'NAME json member present\nRUN_SH echo \'{"comm": "x", "n": 3, "window": 1}\'\n'
             'EXPECT_JSON {"comm": "x", "n": 3}\nEXPECT_ROWS 1\n'),
    ("fail", 'NAME json member differs\nRUN_SH echo \'{"comm": "x", "n": 3}\'\n'
             'EXPECT_JSON {"comm": "x", "n": 4}\n'),
    ("fail", 'NAME json member missing\nRUN_SH echo \'{"comm": "x"}\'\nEXPECT_JSON {"n": 3}\n'),
    ("fail", 'NAME bool is not int\nRUN_SH echo \'{"n": true}\'\nEXPECT_JSON {"n": 1}\n'),
    ("fail", 'NAME json rows count\nRUN_SH printf \'{"n":1}\\n{"n":2}\\n\'\nEXPECT_ROWS 1\n'),
    ("pass", 'NAME json all\nRUN_SH printf \'{"n":1,"a":1}\\n{"n":2,"a":1}\\n\'\n'
             'EXPECT_JSON_ALL {"a": 1}\nEXPECT_NO_JSON {"n": 3}\n'),
    ("fail", 'NAME json all misses one\nRUN_SH printf \'{"a":1}\\n{"a":2}\\n\'\n'
             'EXPECT_JSON_ALL {"a": 1}\n'),
    ("fail", 'NAME json all with no rows\nRUN_SH true\nEXPECT_JSON_ALL {"a": 1}\n'),
    ("fail", 'NAME no json matches\nRUN_SH echo \'{"n": 3}\'\nEXPECT_NO_JSON {"n": 3}\n'),
    ("pass", 'NAME json operators\nRUN_SH echo \'{"lat": 1500, "s": "abc"}\'\n'
             'EXPECT_JSON {"lat": {"$ge": 1000, "$lt": 2000}, "s": {"$re": "^a"}}\n'),
    ("fail", 'NAME json operator fails\nRUN_SH echo \'{"lat": 900}\'\n'
             'EXPECT_JSON {"lat": {"$ge": 1000}}\n'),
    ("fail", 'NAME exit status differs\nRUN_SH exit 3\n'),
    ("pass", 'NAME exit status nonzero\nRUN_SH exit 3\nEXPECT_EXIT nonzero\n'),
    ("fail", 'NAME exit nonzero but zero\nRUN true\nEXPECT_EXIT nonzero\n'),
    ("fail", 'NAME a crash is not a clean failure\nRUN_SH kill -SEGV $$\nEXPECT_EXIT nonzero\n'),
    ("pass", 'NAME literal and regex\nRUN_SH printf \'a line\\nquery:1:3-5: ERROR: x\\n  ~~~\\n\' >&2\n'
             'EXPECT_ERR /^query:1:\\d+/\nEXPECT_ERR   ~~~\nEXPECT_NOT /./\n'),
    ("fail", 'NAME literal line missing\nRUN_SH echo hello world\nEXPECT hello\n'),
    ("fail", 'NAME regex missing\nRUN_SH echo hello\nEXPECT /^bye/\n'),
    ("fail", 'NAME stderr is not stdout\nRUN_SH echo hello >&2\nEXPECT hello\n'),
    ("fail", 'NAME forbidden text present\nRUN_SH echo oops\nEXPECT_NOT /oops/\n'),
    ("fail", 'NAME timeout kills\nRUN_SH sleep 5\nTIMEOUT 0.3\n'),
    ("skip", 'NAME missing capability skips\nRUN true\nREQUIRES cmd:fay-no-such-command\n'),
    ("pass", 'NAME substitution\nRUN_SH echo {testprogs}/x\nEXPECT {testprogs}/x\n'),
    ("fail", 'NAME substitution differs\nRUN_SH echo {testprogs}\nEXPECT {testprogs}-not\n'),
    ("pass", 'NAME heredoc and env\nRUN_SH <<END\nx=1\necho "v=$x $FAYSELF"\nEND\n'
             'ENV FAYSELF=ok\nEXPECT v=1 ok\n'),
    ("pass", 'NAME RUN tokenizes like a shell\nRUN /bin/echo \'a  b\' "c d"\nEXPECT a  b c d\n'),
]

SELFTEST_PARSE_ERRORS = [
    "RUN true\n",                                  # directive before NAME
    "NAME x\nEXPECT 1\n",                          # no RUN
    "NAME x\nRUN true\nEXPEKT 1\n",                # unknown directive
    "NAME x\nRUN true\nEXPECT_JSON {bad\n",        # bad JSON
    "NAME x\nRUN true\nEXPECT_EXIT maybe\n",
    "NAME x\nRUN_SH <<END\ntrue\n",                # unterminated heredoc
    "NAME x\nRUN true\nRUN true\n",
]


def selftest():
    ctx = {"fay": "/bin/false", "testprogs": "/tmp/fay-selftest-testprogs", "bpftool": "",
           "runtime": HERE, "python": sys.executable}
    caps = Capabilities(ctx)
    bad = 0
    for want, text in SELFTEST_CASES:
        case = parse_text(text, "<selftest>")[0]
        res = run_case(case, ctx, caps)
        ok = res.status == want
        bad += not ok
        print(f"[{'   OK   ' if ok else ' BROKEN '}] {case.name}: expected {want}, got {res.status}")
        if not ok:
            print(res.detail)
    for text in SELFTEST_PARSE_ERRORS:
        try:
            parse_text(text, "<selftest>")
            print(f"[ BROKEN ] accepted a malformed file: {text!r}")
            bad += 1
        except ParseError as e:
            print(f"[   OK   ] rejected: {e}")
    # The aggregate exit status must reflect a failure, too.
    with tempfile.NamedTemporaryFile("w", suffix=".test", delete=False) as f:
        f.write("NAME fails\nRUN false\n\nNAME passes\nRUN true\n")
    try:
        code = run_files([f.name], ctx, log=lambda *_: None)
    finally:
        os.unlink(f.name)
    if code != 1:
        print(f"[ BROKEN ] a file with a failing case exited {code}, expected 1")
        bad += 1
    print(f"selftest: {'PASSED' if not bad else f'{bad} BROKEN'}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="case files (default: cases/*.test)")
    ap.add_argument("--fay", default=os.environ.get("FAY", ""), help="the fay binary")
    ap.add_argument("--testprogs", default=os.environ.get("FAY_TESTPROGS", ""),
                    help="directory of the built test programs")
    ap.add_argument("--bpftool", default=os.environ.get("BPFTOOL", shutil.which("bpftool") or
                                                       ("/usr/sbin/bpftool" if os.path.exists(
                                                           "/usr/sbin/bpftool") else "")))
    ap.add_argument("--filter", help="only cases whose NAME matches this regex")
    ap.add_argument("--selftest", action="store_true",
                    help="check that the runner itself detects failing expectations")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    if not args.fay or not args.testprogs:
        ap.error("--fay and --testprogs (or FAY and FAY_TESTPROGS) are required")
    ctx = {"fay": os.path.abspath(args.fay), "testprogs": os.path.abspath(args.testprogs),
           "bpftool": args.bpftool, "runtime": HERE, "python": sys.executable}
    if not os.access(ctx["fay"], os.X_OK):
        print(f"runtime: fay binary {ctx['fay']} is missing or not executable", file=sys.stderr)
        return 1
    files = args.files or sorted(
        os.path.join(HERE, "cases", f) for f in os.listdir(os.path.join(HERE, "cases"))
        if f.endswith(".test"))
    return run_files(files, ctx, args.filter)


if __name__ == "__main__":
    sys.exit(main())
