#!/usr/bin/env python3
"""Fidelity test: `fay record` + `fay dump` against strace as the oracle.

For one scenario (a real Debian program run in a fresh scratch directory) this driver:

  1. runs the program under `strace -f -q -o strace.txt` and, separately and from
     an identical starting state, under `fay record -q -o trace.fay`, then `fay dump trace.fay`;
  2. parses both texts into per-thread syscall sequences, joining strace's `<unfinished ...>` /
     `<... resumed>` halves, and names every thread by its place in the process tree (root is
     "0", the second clone of "0" is "0.2", ...) because pids differ from run to run;
  3. compares, per thread, the sequence of syscall names and return values (exact where the
     value is deterministic, by class where it is inherently run-dependent: addresses, pids,
     times);
  4. compares the decoded arguments of file syscalls with strace's rendering after normalising
     pointers, pids and temp-file names, and checks strace's return-column alignment.
Both runs start with ASLR off (setarch -R), so that no call count depends on an address.

Every known, explained difference lives in KNOWN_DIFFERENCES below; anything else fails the test.
README.md next to this file describes the method and each difference.

Usage: fidelity.py --fay PATH SCENARIO [--keep]     or     fidelity.py --selftest
Exit status: 0 pass, 1 failure, 77 skipped (a program the scenario needs is not installed).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# ----------------------------------------------------------------------------------------------
# Scenarios. Each one builds a fixed starting tree in WORK and names the command to run there.
# Both runs (strace and fay) start from a freshly built WORK at the same path, with the same
# environment, so everything but pids, addresses and times is expected to be identical.
# ----------------------------------------------------------------------------------------------

OLD_TIME = 1577836800  # 2020-01-01T00:00:00Z: file times far from "now" (no racy-git re-reads)


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def age_tree(root):
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            os.utime(os.path.join(dirpath, n), (OLD_TIME, OLD_TIME), follow_symlinks=False)
    os.utime(root, (OLD_TIME, OLD_TIME))


def setup_tar(work):
    d = os.path.join(work, "DIR")
    write(os.path.join(d, "a.txt"), "alpha\n" * 10)
    write(os.path.join(d, "b.bin"), "".join(chr(65 + i % 26) for i in range(5000)))
    write(os.path.join(d, "sub", "c.txt"), "gamma\n")
    write(os.path.join(d, "sub", "deeper", "d.sh"), "#!/bin/sh\necho d\n", 0o755)
    os.makedirs(os.path.join(d, "empty"))
    os.symlink("a.txt", os.path.join(d, "link-to-a"))
    age_tree(d)
    return ["tar", "cf", "out.tar", "DIR"], None


SQL_SCRIPT = """\
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL);
BEGIN;
INSERT INTO t(name, score) VALUES ('ada', 1.5);
INSERT INTO t(name, score) VALUES ('brian', 2.25);
INSERT INTO t(name, score) VALUES ('carol', 3.0);
INSERT INTO t(name, score) VALUES ('dennis', 4.75);
COMMIT;
SELECT id, name, score FROM t WHERE score > 2 ORDER BY id;
SELECT count(*), sum(score) FROM t;
"""


def setup_sqlite(work):
    write(os.path.join(work, "script.sql"), SQL_SCRIPT)
    return ["sqlite3", "db.sqlite"], "script.sql"


def setup_gcc(work):
    write(os.path.join(work, "hello.c"),
          '#include <stdio.h>\n\nint main(void) {\n  puts("hello");\n  return 0;\n}\n')
    os.makedirs(os.path.join(work, "tmp"))
    return ["gcc", "-c", "hello.c"], None


PY_SCRIPT = """\
import os, threading
os.mkdir('d')
with open('d/f.txt', 'w') as f:
    f.write('x' * 100)
with open('d/f.txt') as f:
    data = f.read()
os.rename('d/f.txt', 'd/g.txt')
st = os.stat('d/g.txt')
names = sorted(os.listdir('d'))
os.chdir('d')
cwd = os.getcwd()
os.symlink('g.txt', 'h')
target = os.readlink('h')
ok = os.access('g.txt', os.R_OK)
os.unlink('h')
os.unlink('g.txt')
os.chdir('..')
os.rmdir('d')
def worker(i):
    with open('t%d.txt' % i, 'w') as f:
        f.write(str(i) * (i + 1))
t = threading.Thread(target=worker, args=(1,))
t.start()
t.join()
# join() returns before the thread's last calls (rt_sigprocmask, madvise, exit); without a pause
# the process's exit_group may kill it first, more often when the tracer slows it less.
import time; time.sleep(0.2)
os.unlink('t1.txt')
print(len(data), st.st_size, names, os.path.basename(cwd), target, ok)
"""


def setup_python(work):
    return ["/usr/bin/python3", "-c", PY_SCRIPT], None


GIT_SCRIPT = ("git init -q && git add . && "
              "git commit -q -m 'first commit' && git log --oneline")


def setup_git(work):
    repo = os.path.join(work, "repo")
    write(os.path.join(repo, "README"), "fidelity\n")
    write(os.path.join(repo, "src", "main.c"), "int main(void) { return 0; }\n")
    write(os.path.join(repo, "src", "util.h"), "#define UTIL 1\n")
    write(os.path.join(work, ".gitconfig"),
          "[init]\n\tdefaultBranch = main\n[maintenance]\n\tauto = false\n"
          "[gc]\n\tauto = 0\n[core]\n\tpager = cat\n")
    age_tree(repo)
    return ["/bin/sh", "-c", "cd repo && " + GIT_SCRIPT], None


def setup_cp(work):
    # What cp -a copies with calls a replay must execute: file data by copy_file_range, modes
    # by setxattr(system.posix_acl_access), a FIFO by mknodat, a symlink, an xattr.
    d = os.path.join(work, "src")
    for i in range(1, 7):
        write(os.path.join(d, "f%d" % i), "".join(chr(48 + (i * j) % 75) for j in range(i * 3000)))
    write(os.path.join(d, "sub", "x.sh"), "#!/bin/sh\necho x\n", 0o755)
    os.chmod(os.path.join(d, "sub"), 0o755)
    os.mkfifo(os.path.join(d, "fifo"), 0o644)
    os.symlink("f1", os.path.join(d, "link"))
    os.setxattr(os.path.join(d, "f2"), "user.fidelity", b"kept")
    age_tree(d)
    os.makedirs(os.path.join(work, "dst"))
    # Named one by one: cp would list src in the order the file system keeps its entries, which
    # is not the same from one build of the tree to the next (sub holds one file).
    names = ["f%d" % i for i in range(1, 7)] + ["sub", "fifo", "link"]
    return ["cp", "-a"] + ["src/" + n for n in names] + ["dst"], None


def setup_targz(work):
    # tar spawns gzip and pipes the archive to it: two recorded processes joined by a pipe.
    d = os.path.join(work, "DIR")
    for i in range(1, 21):
        write(os.path.join(d, "f%02d" % i), "".join(chr(33 + (i * j * 7) % 90)
                                                     for j in range(i * 4000)))
    age_tree(d)
    return ["tar", "czf", "out.tgz", "DIR"], None


# Names that mkstemp-style code draws at random: replaced by a fixed placeholder in both texts.
RANDOM_NAMES = [
    (re.compile(r"\bcc[A-Za-z0-9]{6}(\.[a-z]+)\b"), r"ccXXXXXX\1"),  # gcc's temp files
    (re.compile(r"\btmp_obj_[A-Za-z0-9]{6}\b"), "tmp_obj_XXXXXX"),  # git's loose objects
    (re.compile(r"(\.git/t)[A-Za-z0-9]{6}\b"), r"\1XXXXXX"),  # git init's symlink probe
]


# Scenarios whose call sequence differs between two runs by construction: only the replay of
# fay's trace is checked, and the reason printed.
REPLAY_ONLY = {
    "targz": "gzip's reads from the pipe return what tar had written by then: their sizes and "
             "count differ from run to run",
}

# Scenarios with more than one thread in a process: futex traffic there is timing-dependent.
THREADED_SCENARIOS = {"python3"}

SCENARIOS = {
    "tar": (setup_tar, {}),
    "cp": (setup_cp, {}),
    "targz": (setup_targz, {"GZIP": "-n"}),
    "sqlite3": (setup_sqlite, {}),
    "gcc": (setup_gcc, {"TMPDIR": "{work}/tmp"}),
    "python3": (setup_python, {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}),
    "git": (setup_git, {
        "GIT_AUTHOR_NAME": "Fay Fidelity", "GIT_AUTHOR_EMAIL": "fidelity@example.org",
        "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_NAME": "Fay Fidelity",
        "GIT_COMMITTER_EMAIL": "fidelity@example.org",
        "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0"}),
}

# ----------------------------------------------------------------------------------------------
# Known, explained differences. Each entry must say why. The test fails on anything not listed
# here, and also fails when an entry no longer matches anything (so the list cannot rot).
#
#   kind "render": an argument/return rendering difference on a file syscall. `syscall` is the
#   name, `strace` and `fay` are regexes that must both match the normalised texts.
# ----------------------------------------------------------------------------------------------

KNOWN_DIFFERENCES = [
]

# File syscalls whose decoded arguments must match strace's rendering.
FILE_SYSCALLS = {
    "open", "openat", "openat2", "creat", "stat", "lstat", "fstat", "newfstatat", "statx",
    "access", "faccessat", "faccessat2", "readlink", "readlinkat", "unlink", "unlinkat", "mkdir",
    "mkdirat", "rmdir", "rename", "renameat", "renameat2", "chdir", "fchdir", "getcwd", "close",
    "read", "write", "pread64", "pwrite64", "lseek", "fcntl", "getdents64", "execve", "execveat",
    "symlink", "symlinkat", "link", "linkat", "chmod", "fchmod", "fchmodat", "chown", "fchown",
    "fchownat", "truncate", "ftruncate", "fsync", "fdatasync", "dup", "dup2", "dup3", "utimensat",
    "statfs", "fstatfs", "flock", "umask",
}
# For these the buffer argument is content, not rendering: compare fd and count only (plus the
# return). The content of what was read/written is compared by strace -s as the text shows it
# only when the scenario's data is deterministic; see CONTENT_VARIES.
COUNT_ONLY = {"read", "write", "pread64", "pwrite64"}

# Syscalls whose return value is inherently run-dependent: compare only success vs errno name.
RET_CLASS_ONLY = {
    "mmap": "address", "mremap": "address", "brk": "address", "shmat": "address",
    "getppid": "pid of the tracer's child (differs per run)", "getpgrp": "pid", "getsid": "pid",
    "getpgid": "pid", "time": "clock", "times": "clock", "clock_gettime": "clock",
    "gettimeofday": "clock",
}
# Return values that are pids of traced threads: compared as thread names.
PID_RETURNS = {"clone", "clone3", "fork", "vfork", "getpid", "gettid", "set_tid_address", "wait4",
               "waitid", "rt_sigreturn"}
# Syscalls with pid arguments: pids in their argument text are compared as thread names.
PID_ARGS = {"wait4", "waitid", "kill", "tkill", "tgkill", "prlimit64", "setpgid", "getpgid",
            "getsid", "sched_getaffinity", "sched_setaffinity", "pidfd_open", "rt_sigqueueinfo",
            "rt_tgsigqueueinfo", "sched_getparam", "sched_getscheduler", "sched_setscheduler",
            "clone3"}  # clone3: its "=> {parent_tid=[N]}"
# Syscalls whose arguments carry run-dependent content (random bytes, clocks, resource use);
# their arguments are not compared at all, only name and return.
CONTENT_VARIES = {"getrandom", "sysinfo", "getrusage", "times", "clock_gettime", "gettimeofday",
                  "clock_nanosleep", "nanosleep", "time"}
# Fields inside otherwise deterministic structs that move between runs.
VARYING_FIELDS = re.compile(r"\b(f_bfree|f_bavail|f_ffree)=\d+")

# ----------------------------------------------------------------------------------------------
# Parsing strace-style text.
# ----------------------------------------------------------------------------------------------

LINE_RE = re.compile(r"^(\d+)\s+(.*)$")
LATENCY_RE = re.compile(r" <\d+\.\d{6}>$")
RESUMED_RE = re.compile(r"^<\.\.\. ([a-z0-9_]+) resumed>\s?(.*)$")
CALL_RE = re.compile(r"^([a-z0-9_]+)\((.*)$")


class Event:
    __slots__ = ("pid", "name", "args_text", "ret_text", "raw", "lineno", "kind")

    def __init__(self, pid, kind, name, args_text="", ret_text="", raw="", lineno=0):
        self.pid, self.kind, self.name = pid, kind, name
        self.args_text, self.ret_text, self.raw, self.lineno = args_text, ret_text, raw, lineno

    def ret_value(self):
        tok = self.ret_text.split(" ", 1)[0]
        return tok

    def errno(self):
        m = re.match(r"^-?\d+ ([A-Z][A-Z0-9_]+) \(", self.ret_text)
        if m:
            return m.group(1)
        m = re.match(r"^\? ([A-Z][A-Z0-9_]+)", self.ret_text)
        return m.group(1) if m else None


def find_return_split(body):
    """Index of the ' = ' that separates the call from its result: first one at bracket depth 0
    outside string literals, after the call's closing parenthesis."""
    depth = 0
    i = 0
    in_str = False
    n = len(body)
    while i < n:
        c = body[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "=" and depth == 0 and body[i - 1] == " " and i + 1 < n and body[i + 1] == " ":
            return i - 1
        elif c == "/" and body.startswith("/*", i):
            end = body.find("*/", i)
            if end > 0:
                i = end + 2
                continue
        i += 1
    return -1


def split_call(body):
    """'name(args) = ret' -> (name, args_text, ret_text, prefix_before_eq)."""
    m = CALL_RE.match(body)
    if not m:
        return None
    eq = find_return_split(body)
    if eq < 0:
        return None
    call = body[:eq].rstrip()
    if not call.endswith(")"):
        return None
    return m.group(1), call[len(m.group(1)) + 1:-1], body[eq + 3:], body[:eq]


def parse_text(text, source):
    """Returns (events, problems). Events come out in completion order per pid."""
    events = []
    pending = {}
    problems = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = LATENCY_RE.sub("", raw)
        m = LINE_RE.match(line)
        if not m:
            problems.append(f"{source}:{lineno}: unparsed line: {raw}")
            continue
        pid, body = int(m.group(1)), m.group(2)
        if body.startswith("+++ "):
            events.append(Event(pid, "exit", "+++", ret_text=body, raw=raw, lineno=lineno))
            continue
        if body.startswith("--- "):
            events.append(Event(pid, "signal", "---", ret_text=body, raw=raw, lineno=lineno))
            continue
        if body.endswith(" <unfinished ...>"):
            pending[pid] = (body[: -len(" <unfinished ...>")], raw, lineno)
            continue
        r = RESUMED_RE.match(body)
        if r:
            if pid not in pending:
                problems.append(f"{source}:{lineno}: resumed without unfinished: {raw}")
                continue
            head, head_raw, head_line = pending.pop(pid)
            body = head + r.group(2)
            raw = head_raw + "  ...  " + raw
            lineno = head_line
        parts = split_call(body)
        if parts is None:
            # Calls that never return print '= ?' and are still complete lines; anything else is
            # a parse failure.
            problems.append(f"{source}:{lineno}: unparsed call: {raw}")
            continue
        name, args, ret, before_eq = parts
        ev = Event(pid, "call", name, args, ret, raw, lineno)
        events.append(ev)
    for pid, (head, raw, lineno) in pending.items():
        # A call still blocked when the process died (e.g. exit_group racing another thread).
        m = CALL_RE.match(head)
        events.append(Event(pid, "call", m.group(1) if m else "?", head, "<unfinished>", raw,
                            lineno))
    return events, problems


def check_alignment(text, source):
    """strace pads 'PID call' to 39 characters and then prints ' = ' (its default -a 40): the
    '=' sits in column 40 whenever the call is short enough."""
    bad = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = LATENCY_RE.sub("", raw)
        if "<unfinished ...>" in line or "resumed>" in line or " = " not in line:
            continue
        m = LINE_RE.match(line)
        if not m:
            continue
        parts = split_call(m.group(2))
        if not parts:
            continue
        prefix_len = len(line) - len(m.group(2))
        call_len = prefix_len + len(parts[0]) + 2 + len(parts[1])
        if call_len < 39:
            col = line.find(" = ", call_len)
            if col != 39:
                bad.append(f"{source}:{lineno}: ' = ' at column {col}, strace puts it at 39: "
                           f"{raw!r}")
    return bad

# ----------------------------------------------------------------------------------------------
# Threads: name each pid by its place in the clone tree.
# ----------------------------------------------------------------------------------------------

CLONE_NAMES = {"clone", "clone3", "fork", "vfork"}


def name_threads(events):
    by_pid = {}
    for ev in events:
        by_pid.setdefault(ev.pid, []).append(ev)
    if not events:
        return {}, by_pid
    root = events[0].pid
    names = {root: "0"}
    todo = [root]
    while todo:
        pid = todo.pop(0)
        k = 0
        for ev in by_pid.get(pid, []):
            if ev.kind == "call" and ev.name in CLONE_NAMES and re.fullmatch(r"\d+",
                                                                          ev.ret_value()):
                k += 1
                child = int(ev.ret_value())
                names[child] = f"{names[pid]}.{k}"
                todo.append(child)
    for pid in by_pid:
        names.setdefault(pid, f"?{pid}")
    return names, by_pid

# ----------------------------------------------------------------------------------------------
# Normalisation.
# ----------------------------------------------------------------------------------------------

# Both runs start with address-space randomisation off (the personality is inherited by the
# tracer's children), so that the number of calls cannot depend on where mmap put something:
# glibc trims a new malloc arena's 64 MiB-aligned mapping with zero, one or two munmap calls
# depending on the address it got.
NO_ASLR = ["setarch", "-R"]
ADDR_RE = re.compile(r"\b0x[0-9a-f]{7,}\b")


# A time the run itself set (a directory's access time that the copy's own listing moved, then
# copied by cp -a): within a day of now, it differs between the two runs by construction.
RECENT_TIME_RE = re.compile(r"\{tv_sec=(\d+), tv_nsec=(\d+)\}( /\* [0-9T:.+-]+ \*/)?")


def recent_time(m):
    return "{RECENT}" if abs(int(m.group(1)) - time.time()) < 86400 else m.group(0)


def normalise_text(s, pidmap, ctx, pids=False):
    """Replace what differs between two runs by construction: addresses, random temp-file
    names, the scratch path and (only where the syscall takes or returns a pid) pids."""
    s = ADDR_RE.sub("0xADDR", s)
    s = RECENT_TIME_RE.sub(recent_time, s)
    for rx, repl in RANDOM_NAMES:
        s = rx.sub(repl, s)
    if pids:
        for pid, name in pidmap.items():
            s = re.sub(rf"(?<![\w.]){pid}(?![\w.])", f"<T{name}>", s)
    return s.replace(ctx["scratch"], "SCRATCH")


def ret_key(ev, pidmap, ctx):
    """What the sequence comparison uses for the return value: the errno name for failures, the
    class for run-dependent values, the thread name for pids, the exact value otherwise."""
    if ev.kind != "call":
        return ev.ret_text
    errno = ev.errno()
    value = ev.ret_value()
    if value == "?":
        return "? " + (errno or "")
    if errno:
        return f"-1 {errno}"
    if ev.name in RET_CLASS_ONLY:
        return "ok"
    if ev.name in PID_RETURNS and re.fullmatch(r"\d+", value):
        v = int(value)
        if v in pidmap:
            return f"<T{pidmap[v]}>"
        if ev.name == "rt_sigreturn":  # the restored result of the interrupted call
            return value
        return "0" if v == 0 else "<pid>"
    return normalise_text(value, pidmap, ctx)


def args_key(ev, pidmap, ctx):
    """Normalised argument text used for the rendering comparison."""
    a = normalise_text(ev.args_text, pidmap, ctx, pids=ev.name in PID_ARGS)
    if ev.name in COUNT_ONLY:
        # fd, <buffer>, count[, offset]: keep all but the buffer contents.
        parts = split_top(a)
        if len(parts) >= 3:
            parts[1] = "BUF"
            a = ", ".join(parts)
    return VARYING_FIELDS.sub(r"\1=N", a)


def full_key(ev, pidmap, ctx):
    a = args_key(ev, pidmap, ctx)
    r = "" if ev.name in RET_CLASS_ONLY else normalise_text(
        ev.ret_text, pidmap, ctx, pids=ev.name in PID_RETURNS)
    return f"{ev.name}({a}) = {r}"


def split_top(s):
    out, depth, cur, in_str, i = [], 0, [], False, 0
    while i < len(s):
        c = s[i]
        if in_str:
            cur.append(c)
            if c == "\\" and i + 1 < len(s):
                cur.append(s[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            cur.append(c)
        elif c in "([{":
            depth += 1
            cur.append(c)
        elif c in ")]}":
            depth -= 1
            cur.append(c)
        elif c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if cur or out:
        out.append("".join(cur).strip())
    return out

# ----------------------------------------------------------------------------------------------
# Running.
# ----------------------------------------------------------------------------------------------


def build_env(work, extra):
    env = {
        "PATH": "/usr/bin:/bin", "HOME": work, "LC_ALL": "C", "LANG": "C", "TZ": "UTC",
        "TERM": "dumb", "USER": "fidelity", "LOGNAME": "fidelity", "SHELL": "/bin/sh",
    }
    for k, v in extra.items():
        env[k] = v.format(work=work)
    return env


def prepare(scratch, scenario):
    work = os.path.join(scratch, "work")
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    setup, extra = SCENARIOS[scenario]
    argv, stdin_name = setup(work)
    # The stdin file lives outside WORK so both runs read the same bytes from the same path.
    stdin_path = "/dev/null"
    if stdin_name:
        stdin_path = os.path.join(scratch, "stdin.txt")
        shutil.copyfile(os.path.join(work, stdin_name), stdin_path)
    return work, argv, stdin_path, build_env(work, extra)


def run(cmd, work, env, stdin_path, out_prefix, timeout=100):
    with open(stdin_path, "rb") as si, open(out_prefix + ".stdout", "wb") as so, \
            open(out_prefix + ".stderr", "wb") as se:
        t0 = time.monotonic()
        p = subprocess.run(cmd, cwd=work, env=env, stdin=si, stdout=so, stderr=se,
                           timeout=timeout)
        return p.returncode, time.monotonic() - t0


# ----------------------------------------------------------------------------------------------
# Comparing.
# ----------------------------------------------------------------------------------------------


class Report:
    def __init__(self):
        self.failures = []
        self.notes = []
        self.infos = []

    def fail(self, msg):
        self.failures.append(msg)

    def note(self, msg):
        self.notes.append(msg)

    def info(self, msg):
        self.infos.append(msg)


def short(ev):
    return ev.raw if len(ev.raw) <= 300 else ev.raw[:300] + "..."


def is_tempname_getrandom(e):
    return e.kind == "call" and e.name == "getrandom" and e.args_text.endswith(
        ", 8, GRND_NONBLOCK")


def program_nondeterminism(evs, scenario):
    """Drops the events whose presence the traced program decides at random, identically for
    both texts (README.md, "Normalisations"):
      - glibc's mkstemp draws its name from the clock and, when rejection sampling refuses the
        value, calls getrandom(8, GRND_NONBLOCK) right before the O_EXCL open, once per refused
        value: a few percent of mkstemp calls have one, fewer have two;
      - in multi-threaded scenarios, futex calls depend on how the threads interleave."""
    out = []
    for i, e in enumerate(evs):
        if e.kind == "signal":
            continue
        if is_tempname_getrandom(e):
            j = i + 1
            while j < len(evs) and is_tempname_getrandom(evs[j]):
                j += 1  # each refused value costs one more call
            nxt = evs[j] if j < len(evs) else None
            if nxt is not None and nxt.kind == "call" and nxt.name in ("openat", "open") and \
                    "O_CREAT|O_EXCL" in nxt.args_text:
                continue
        if e.kind == "call" and e.name == "futex" and scenario in THREADED_SCENARIOS:
            continue
        out.append(e)
    return out


def thread_order(name):
    return [int(x) if x.isdigit() else -1 for x in name.split(".")]


def known_difference(kind, syscall, s_txt, f_txt, scenario):
    for idx, k in enumerate(KNOWN_DIFFERENCES):
        if k["kind"] != kind or scenario not in k["scenarios"]:
            continue
        if k["syscall"] not in ("*", syscall):
            continue
        if kind == "align" or (re.search(k["strace"], s_txt) and re.search(k["fay"], f_txt)):
            return idx
    return None


def sequence_diff(tname, s_pid, f_pid, s_keys, f_keys, s_evs, f_evs, first):
    lines = [f"thread {tname} (strace pid {s_pid}, fay tid {f_pid}): syscall sequences differ "
             f"at position {first} (strace {len(s_keys)} events, fay {len(f_keys)})"]
    for i in range(max(0, first - 3), min(max(len(s_keys), len(f_keys)), first + 4)):
        mark = ">>" if i == first else "  "
        se = f"{s_keys[i][0]} = {s_keys[i][1]}" if i < len(s_keys) else "(end)"
        fe = f"{f_keys[i][0]} = {f_keys[i][1]}" if i < len(f_keys) else "(end)"
        lines.append(f"  {mark} #{i:<5} strace: {se}")
        lines.append(f"  {mark} {'':6} fay:    {fe}")
    if first < len(s_evs):
        lines.append(f"     strace.txt:{s_evs[first].lineno}: {short(s_evs[first])}")
    if first < len(f_evs):
        lines.append(f"     fay.txt:{f_evs[first].lineno}: {short(f_evs[first])}")
    return "\n".join(lines)


def group_diffs(title, diffs, limit=None):
    groups = {}
    for tname, i, se, fe, s_txt, f_txt in diffs:
        groups.setdefault((s_txt, f_txt), []).append((tname, i, se, fe))
    lines = [f"{title}: {len(diffs)} ({len(groups)} distinct)"]
    if limit is not None and len(groups) > limit:
        lines.append(f"  (showing the first {limit} distinct)")
    for (s_txt, f_txt), where in list(groups.items())[:limit]:
        tname, i, se, fe = where[0]
        lines.append(f"  thread {tname} #{i} (x{len(where)}; strace.txt:{se.lineno}, "
                     f"fay.txt:{fe.lineno})")
        lines.append(f"    strace: {s_txt}")
        lines.append(f"    fay:    {f_txt}")
    return "\n".join(lines)


SIG_CODE_RE = re.compile(r"^--- (SIG\w+) \{si_signo=\w+, si_code=(\w+)")
SIG_TIMES_RE = re.compile(r"(si_utime|si_stime)=\d+( /\* [\d.]+ s \*/)?")


def signal_key(ev, pidmap, ctx):
    return SIG_TIMES_RE.sub(r"\1=N", normalise_text(ev.ret_text, pidmap, ctx, pids=True))


def compare_signals(tname, s_all, f_all, s_names, f_names, ctx, report, stats):
    """The signals a thread took, as strace prints them at their delivery stops. Where in
    the thread's calls one lands is timing (an ignored or fatal signal is noted by the eBPF
    recorder when it is sent), so they are compared as a multiset per thread. Two children's
    SIGCHLDs may merge into one while the first is pending, differently in the two runs: the
    texts are asserted where each (signal, code) came as often in both, the kinds always."""
    groups = ({}, {})
    for side, evs, names in ((0, s_all, s_names), (1, f_all, f_names)):
        for e in evs:
            if e.kind != "signal":
                continue
            m = SIG_CODE_RE.match(e.ret_text)
            kind = (m.group(1), m.group(2)) if m else (e.ret_text, "")
            groups[side].setdefault(kind, []).append(signal_key(e, names, ctx))
    s_groups, f_groups = groups
    if set(s_groups) != set(f_groups):
        report.fail(f"thread {tname}: signals differ: strace took "
                    f"{sorted(s_groups)}, fay recorded {sorted(f_groups)}")
        return
    for kind, s_txt in s_groups.items():
        f_txt = f_groups[kind]
        stats["signals"] = stats.get("signals", 0) + len(f_txt)
        if len(s_txt) != len(f_txt):
            report.info(f"thread {tname}: {kind[0]} {kind[1]} {len(s_txt)} times under strace, "
                        f"{len(f_txt)} under fay (pending signals merge)")
            continue
        if sorted(s_txt) != sorted(f_txt):
            report.fail(f"thread {tname}: signal rendering differs:\n  strace: "
                        + "\n          ".join(sorted(s_txt)) + "\n  fay:    "
                        + "\n          ".join(sorted(f_txt)))


def compare(strace_events, fay_events, ctx, report):
    """Per-thread comparison. Returns (stats, indexes of KNOWN_DIFFERENCES that occurred)."""
    scenario = ctx["scenario"]
    s_names, s_by_pid = name_threads(strace_events)
    f_names, f_by_pid = name_threads(fay_events)
    s_threads = {s_names[p]: p for p in s_by_pid}
    f_threads = {f_names[p]: p for p in f_by_pid}
    if sorted(s_threads, key=thread_order) != sorted(f_threads, key=thread_order):
        report.fail("process/thread trees differ:\n  strace: " +
                    " ".join(sorted(s_threads, key=thread_order)) + "\n  fay:    " +
                    " ".join(sorted(f_threads, key=thread_order)))
    used = set()
    file_diffs, other_diffs = [], []
    stats = {"threads": 0, "events": 0, "file_args": 0, "other_args": 0}
    for tname in sorted(set(s_threads) & set(f_threads), key=thread_order):
        s_evs = program_nondeterminism(s_by_pid[s_threads[tname]], scenario)
        f_evs = program_nondeterminism(f_by_pid[f_threads[tname]], scenario)
        stats["threads"] += 1
        s_keys = [(e.name, ret_key(e, s_names, ctx)) for e in s_evs]
        f_keys = [(e.name, ret_key(e, f_names, ctx)) for e in f_evs]
        n = min(len(s_keys), len(f_keys))
        first = next((i for i in range(n) if s_keys[i] != f_keys[i]), None)
        if first is None and len(s_keys) != len(f_keys):
            first = n
        if first is not None:
            report.fail(sequence_diff(tname, s_threads[tname], f_threads[tname], s_keys, f_keys,
                                      s_evs, f_evs, first))
        # Arguments are compared over the part of the sequence that matched.
        for i in range(first if first is not None else n):
            se, fe = s_evs[i], f_evs[i]
            stats["events"] += 1
            if se.kind != "call" or se.name in CONTENT_VARIES:
                continue
            s_txt, f_txt = full_key(se, s_names, ctx), full_key(fe, f_names, ctx)
            is_file = se.name in FILE_SYSCALLS
            stats["file_args" if is_file else "other_args"] += 1
            if s_txt == f_txt:
                continue
            if not is_file:
                other_diffs.append((tname, i, se, fe, s_txt, f_txt))
                continue
            k = known_difference("render", se.name, s_txt, f_txt, scenario)
            if k is not None:
                used.add(k)
                continue
            file_diffs.append((tname, i, se, fe, s_txt, f_txt))
        compare_signals(tname, s_by_pid[s_threads[tname]], f_by_pid[f_threads[tname]],
                        s_names, f_names, ctx, report, stats)
    if file_diffs:
        report.fail(group_diffs("file-syscall rendering differences from strace", file_diffs))
    if other_diffs:
        # Outside the file syscalls the issue asks for no rendering match; these are printed
        # for the schema owner, not asserted.
        report.info(group_diffs("other rendering differences (not asserted)", other_diffs,
                                limit=12))
    return stats, used


def _st(pid, call, ret=None, lat=""):
    """One strace-style line, padded the way strace pads it."""
    head = f"{pid:<5} {call}"
    if ret is None:
        return head + "\n"
    return f"{head:<39} = {ret}{lat}\n"


SELFTEST_CALLS = [
    (100, 'execve("/bin/x", ["x"], 0x7ffc00001000 /* 3 vars */)', "0"),
    (100, "clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, "
          "child_tidptr=0x7f0000000a10)", "101"),
    (100, "wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL)", "101"),
    (101, 'openat(AT_FDCWD, "/tmp/s/work/a = b", O_RDONLY)', "3"),
    (101, 'read(3, "x = (y", 6)', "6"),
    (101, "exit_group(0)", "?"),
    (101, "+++ exited with 0 +++", None),
    (100, "--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=101, si_uid=0, si_status=0, "
          "si_utime=1 /* 0.01 s */, si_stime=0} ---", None),
    (100, "mmap(NULL, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0)", "0x7f1234567000"),
    (100, 'getrandom("\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08", 8, GRND_NONBLOCK)', "8"),
    (100, 'getrandom("\\x09\\x02\\x03\\x04\\x05\\x06\\x07\\x08", 8, GRND_NONBLOCK)', "8"),
    (100, 'openat(AT_FDCWD, "/tmp/s/work/ccAb12Cd.s", O_RDWR|O_CREAT|O_EXCL, 0600)', "4"),
    (100, "exit_group(0)", "?"),
    (100, "+++ exited with 0 +++", None),
]


def selftest_texts():
    """The strace text splits wait4 around the child's lines, as strace -f does; the fay text
    has other pids and addresses, a different temp name, latencies, and no mkstemp getrandom."""
    st = []
    for pid, call, ret in SELFTEST_CALLS:
        if call.startswith("wait4"):
            st.append(_st(pid, "wait4(-1,  <unfinished ...>"))
            continue
        st.append(_st(pid, call, ret))
        if pid == 101 and call.startswith("+++"):
            st.append(_st(100, "<... wait4 resumed>[{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, "
                               "NULL)", "101"))
    fy = []
    for pid, call, ret in SELFTEST_CALLS:
        if call.startswith("getrandom"):
            continue
        pid = {100: 4000, 101: 4321}[pid]
        call = call.replace("0x7ffc00001000", "0x7ffd00002000").replace("ccAb12Cd", "ccQ9z8Yx")
        call = call.replace("si_pid=101", "si_pid=4321").replace("si_utime=1 /* 0.01 s */",
                                                                 "si_utime=0")
        ret = {"101": "4321", "0x7f1234567000": "0x7f7654321000"}.get(ret, ret)
        fy.append(_st(pid, call, ret, "" if ret in (None, "?") else " <0.000010>"))
    return "".join(st), "".join(fy)


def selftest():
    """Checks the harness itself: parsing, thread naming, normalisation, and that a real
    difference is reported."""
    errors = []

    def expect(cond, what):
        if not cond:
            errors.append(what)

    s_text, f_src = selftest_texts()
    s_ev, s_prob = parse_text(s_text, "selftest-strace")
    f_ev, f_prob = parse_text(f_src, "selftest-fay")
    expect(not s_prob and not f_prob, f"parse problems: {s_prob + f_prob}")
    wait = [e for e in s_ev if e.name == "wait4"]
    expect(len(wait) == 1 and wait[0].args_text.startswith("-1, [{WIFEXITED") and
           wait[0].ret_text == "101", "unfinished/resumed wait4 not joined")
    rd = [e for e in s_ev if e.name == "read"][0]
    expect(rd.args_text == '3, "x = (y", 6' and rd.ret_text == "6",
           f"' = ' inside a string split the call: {rd.args_text!r} / {rd.ret_text!r}")
    names, _ = name_threads(s_ev)
    expect(names == {100: "0", 101: "0.1"}, f"thread names {names}")
    ctx = {"scratch": "/tmp/s", "scenario": "selftest"}
    rep = Report()
    compare(s_ev, f_ev, ctx, rep)
    expect(not rep.failures, "identical-up-to-normalisation traces reported: " +
           "\n".join(rep.failures))
    # A changed return value, a changed errno, a changed flag and a missing call must each fail.
    mutations = [
        ("= 6", "= 5"),
        ('"/tmp/s/work/a = b", O_RDONLY) = 3', '"/tmp/s/work/a = b", O_RDONLY) = -1 ENOENT (No '
                                              'such file or directory)'),
        ("O_RDONLY)", "O_RDONLY|O_CLOEXEC)"),
        ("/* 3 vars */", "/* 4 vars */"),
        ("+++ exited with 0 +++", "+++ exited with 1 +++"),
        ("si_code=CLD_EXITED", "si_code=CLD_KILLED"),
        ("si_status=0,", "si_status=1,"),
        ("--- SIGCHLD", "--- SIGUSR1"),
    ]
    for old, new in mutations:
        mutated = f_src.replace(old, new, 1)
        expect(mutated != f_src, f"mutation {old!r} did not apply")
        m_ev, _ = parse_text(mutated, "selftest-mutant")
        rep = Report()
        compare(s_ev, m_ev, ctx, rep)
        expect(rep.failures, f"mutation {old!r} -> {new!r} went unnoticed")
    dropped = f_src.replace(f_src.splitlines()[4] + "\n", "", 1)
    m_ev, _ = parse_text(dropped, "selftest-dropped")
    rep = Report()
    compare(s_ev, m_ev, ctx, rep)
    expect(rep.failures and "position" in rep.failures[0], "a missing call went unnoticed")
    unsignalled = "".join(l + "\n" for l in f_src.splitlines() if "--- SIG" not in l)
    m_ev, _ = parse_text(unsignalled, "selftest-unsignalled")
    rep = Report()
    compare(s_ev, m_ev, ctx, rep)
    expect(rep.failures and "signals differ" in rep.failures[0], "a missing signal went unnoticed")
    # Alignment rule: strace's own lines pass, a line with '=' one column late fails.
    expect(not check_alignment(s_text, "s") and not check_alignment(f_src, "f"),
           "alignment rule rejects strace text")
    expect(check_alignment("100   exit(0)                            = ?\n", "f"),
           "alignment rule accepts '=' in column 41")
    for e in errors:
        print("selftest FAIL: " + e)
    if not errors:
        print("selftest PASS")
    return 1 if errors else 0


REPLAY_LINES = re.compile(r"^(verified|mismatches|end state|interrupted|not replayed):.*$", re.M)


def replay_check(fay, trace, scratch, report):
    root = os.path.join(scratch, "replay-root")
    os.makedirs(root)
    p = subprocess.run([fay, "replay", trace, "--root", root, "--prepare", "--verify",
                        "--no-progress"], capture_output=True, text=True, errors="replace",
                       timeout=100)
    summary = [m.group(0) for m in REPLAY_LINES.finditer(p.stdout)]
    print("  replay: " + "; ".join(summary))
    end = re.search(r"^end state:  (\d+) of (\d+) changed paths as recorded", p.stdout, re.M)
    if p.returncode != 0 or not re.search(r"^mismatches: 0$", p.stdout, re.M) or not end \
            or end.group(1) != end.group(2):
        listed = "\n".join(l for l in p.stdout.splitlines() if "mismatch" in l)[:2000]
        report.fail(f"replay --prepare --verify into a fresh root exited {p.returncode}:\n"
                    f"{listed}\n{p.stderr.strip()[:500]}")


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fay", required=True)
    ap.add_argument("--backend", default="ptrace", choices=["ptrace", "ebpf"],
                    help="fay record's backend (default ptrace)")
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    opts = ap.parse_args()

    for tool in ("strace", "setarch"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} is not installed")
            return 77
    scratch = tempfile.mkdtemp(prefix=f"fay-fidelity-{opts.scenario}-")
    ctx = {"scratch": scratch, "scenario": opts.scenario}
    report = Report()
    try:
        # 1. strace.
        work, argv, stdin_path, env = prepare(scratch, opts.scenario)
        if not shutil.which(argv[0], path=env["PATH"]):
            print(f"SKIP: {argv[0]} is not installed")
            return 77
        strace_txt = os.path.join(scratch, "strace.txt")
        strace_cmd = ["strace", "-f", "-q", "-o", strace_txt, "--"]
        s_rc, s_time = run(NO_ASLR + strace_cmd + argv, work, env, stdin_path,
                           os.path.join(scratch, "strace"))
        s_stdout = open(os.path.join(scratch, "strace.stdout"), "rb").read()
        # 2. fay, from a fresh copy of the same starting tree at the same path.
        work, argv, stdin_path, env = prepare(scratch, opts.scenario)
        trace = os.path.join(scratch, "trace.fay")
        fay_cmd = [opts.fay, "record", "-q", "--backend", opts.backend, "-o", trace, "--"]
        f_rc, f_time = run(NO_ASLR + fay_cmd + argv, work, env, stdin_path,
                           os.path.join(scratch, "fay"))
        f_stdout = open(os.path.join(scratch, "fay.stdout"), "rb").read()
        dump = subprocess.run([opts.fay, "dump", trace], capture_output=True, text=True,
                              errors="replace", timeout=60)
        fay_txt = os.path.join(scratch, "fay.txt")
        with open(fay_txt, "w") as f:
            f.write(dump.stdout)
        print(f"scenario {opts.scenario}: {' '.join(argv)[:100]}")
        print(f"  strace: exit {s_rc}, {s_time:.2f}s; fay record: exit {f_rc}, {f_time:.2f}s; "
              f"scratch {scratch}")
        if dump.returncode != 0 or dump.stderr.strip():
            report.fail(f"fay dump exited {dump.returncode}: {dump.stderr.strip()}")
        if s_rc != f_rc:
            report.fail(f"exit status: strace run {s_rc}, fay run {f_rc} (fay stderr: "
                        f"{open(os.path.join(scratch, 'fay.stderr')).read().strip()[:500]})")
        if s_rc != 0:
            report.fail(f"the scenario itself failed under strace (exit {s_rc}): "
                        f"{open(os.path.join(scratch, 'strace.stderr')).read().strip()[:500]}")
        if s_stdout != f_stdout:
            report.fail(f"program output differs:\n  strace run: {s_stdout[:300]!r}\n"
                        f"  fay run:    {f_stdout[:300]!r}")

        if opts.scenario in REPLAY_ONLY:
            print(f"  dumps not compared: {REPLAY_ONLY[opts.scenario]}")
            replay_check(opts.fay, trace, scratch, report)
            if report.failures:
                print(f"\nFAIL: {opts.scenario}: " + "\n".join(report.failures))
                opts.keep = True
                return 1
            print(f"PASS: {opts.scenario}")
            return 0
        s_text = open(strace_txt, errors="replace").read()
        s_events, s_problems = parse_text(s_text, "strace.txt")
        f_events, f_problems = parse_text(dump.stdout, "fay.txt")
        for p in s_problems:
            report.fail("harness could not parse strace output: " + p)
        for p in f_problems:
            report.fail("fay dump line is not strace-shaped: " + p)
        for b in check_alignment(s_text, "strace.txt"):
            report.fail("harness alignment rule broken by strace itself: " + b)
        used = set()
        align = check_alignment(dump.stdout, "fay.txt")
        if align:
            k = known_difference("align", "*", "", "", opts.scenario)
            msg = f"{len(align)} fay dump lines are not aligned like strace; first: {align[0]}"
            if k is None:
                report.fail(msg)
            else:
                used.add(k)
                report.note("known difference: " + msg)
        stats, used_render = compare(s_events, f_events, ctx, report)
        used |= used_render
        for i, k in enumerate(KNOWN_DIFFERENCES):
            if opts.scenario in k["scenarios"] and i not in used:
                report.fail(f"known difference #{i} ({k['kind']} {k['syscall']}) no longer "
                            f"occurs in this scenario: remove it from KNOWN_DIFFERENCES and "
                            f"README.md (it was: {k['reason']})")
        print(f"  compared {stats['threads']} threads, {len(s_events)} strace / {len(f_events)} "
              f"fay events; arguments of {stats['file_args']} file syscalls (asserted) and "
              f"{stats['other_args']} others (reported); {stats.get('signals', 0)} signals")
        # 3. The trace replayed into a fresh root, the tree built from the trace alone: every
        # replayed call verifies and the tree left is the recorded one.
        replay_check(opts.fay, trace, scratch, report)
        for n in report.notes:
            print("  note: " + n)
        for n in report.infos:
            print("\n" + n)
        if report.failures:
            print(f"\nFAIL: {opts.scenario}: {len(report.failures)} problem(s)")
            for f in report.failures:
                print("\n" + f)
            print(f"\n(strace text: {strace_txt}, fay dump: {fay_txt})")
            opts.keep = True
            return 1
        print(f"PASS: {opts.scenario}")
        return 0
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: timed out: {e}")
        opts.keep = True
        return 1
    finally:
        if not opts.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
