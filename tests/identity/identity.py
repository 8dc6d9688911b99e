#!/usr/bin/env python3
"""Identity test: the ptrace and eBPF backends of `fay record` must decode the same syscalls.

For one deterministic workload this driver:

  1. records it twice from the same starting state, once with `--backend ptrace` (the reference)
     and once with `--backend ebpf`: `setarch -R fay record -o OUT -- setarch x86_64 -R CMD`.
     The outer setarch turns ASLR off for fay and, by inheritance, for everything it runs, so
     the inner setarch's own start-up (dynamic loader, libc) is deterministic and is compared
     too; the inner one is the usual way to run a workload without ASLR and execvp()s CMD through
     PATH, so failing execve calls are part of every trace;
  2. dumps both traces with `fay dump -s` large enough for every buffer;
  3. names every thread by its place in the tree (root "0", the second thread or process that
     "0.1" creates is "0.1.2"), replaces pids in the text by those names, drops the durations;
  4. compares the two traces thread by thread: same threads, and in each thread the same lines
     (names, arguments, return values, buffer contents) in the same order. Interleaving between
     threads is not compared: it depends on the scheduler, not on the backend.

The workloads are chosen so that two runs of the same program make the same calls with the same
values. The only field that is normalised is the one that cannot be made equal: the bytes that
getrandom returns.

Usage: identity.py --fay PATH --testprogs DIR --smallfiles PATH WORKLOAD [--keep]
       identity.py --list
Exit status: 0 identical, 1 different (or a run failed), 77 fay is not built.
"""

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

REFERENCE = "ptrace"
BACKENDS = [REFERENCE, "ebpf"]

# Both runs hand fay the same environment. A directory that does not exist comes first in PATH so
# that every execvp() by name makes at least one failing execve before the one that succeeds.
MISSING_DIR = "/nonexistent/fay-identity"

# Large enough for the biggest buffer of any workload below, so the dump shows whole buffers.
STRING_LIMIT = 1 << 24

# ----------------------------------------------------------------------------------------------
# Workloads. Each gives the command run under the inner setarch (a bare testprog name is found
# through PATH), the exit status fay must hand on, and the exact number of some syscalls in the
# reference trace, so that two empty or truncated traces cannot pass as identical.
# ----------------------------------------------------------------------------------------------


class Workload:
    def __init__(self, argv, status=0, counts=None, stdout=None, setup=None, check=None,
                 count_from=2):
        self.argv = argv
        self.status = status
        self.counts = counts or {}
        self.count_from = count_from  # counts start at the root's n-th successful execve
        self.stdout = stdout  # exact stdout of the workload, when it prints anything
        self.setup = setup  # setup(work) before each run
        self.check = check  # check(work) after each run: an error message or None


W3_FILES = 200


def w3_argv(ctx):
    # The same directory for both runs, so every path in the two traces is the same.
    return [ctx["smallfiles"], os.path.join(ctx["work"], "w3"), str(W3_FILES)]


def w3_setup(work):
    shutil.rmtree(os.path.join(work, "w3"), ignore_errors=True)


def w3_check(work):
    d = os.path.join(work, "w3")
    left = os.listdir(d) if os.path.isdir(d) else None
    if left is None:
        return "smallfiles did not create its directory"
    if left:
        return f"smallfiles left {len(left)} files, e.g. {left[0]}"
    return None


WORKLOADS = {
    "getppid_loop": Workload(["getppid_loop", "20"], counts={"getppid": 20}),
    "open_missing": Workload(["open_missing", "5"], counts={"openat": 5}),
    # K = 4096 + 17: more than a page, not a multiple of anything.
    "write_n": Workload(["write_n", "4", "4113"], counts={"write": 4, "openat": 1}),
    # T = 1: with two or more threads the barrier's futex calls (who waits, who wakes, how many
    # were woken) depend on which thread gets there first, so they differ from run to run. The
    # main thread must reach pthread_join's futex wait before the reader exits, or there is no
    # wait: the reader spins until main sets a flag just before pthread_join, then does its
    # thousands of reads (the scheduler alone did not ensure it on a loaded machine).
    "threads_read": Workload(lambda ctx: ["taskset", "-c", str(min(os.sched_getaffinity(0))),
                                          "threads_read", "1", "5000"],
                             counts={"read": 5000, "clone3": 1}, count_from=3),
    # C = 1: with two children of one parent, wait4 returns them in the order they finish.
    "fork_tree": Workload(["fork_tree", "1", "5", "3"], counts={"getppid": 15, "wait4": 3}),
    "exit_status": Workload(["exit_status", "3"], status=3, counts={"exit_group": 1}),
    "exit_signal": Workload(["exit_status", "0", "15"], status=128 + 15,
                            counts={"getpid": 1, "kill": 1}),
    "write_random": Workload(["write_random", "3", "5000", "7"], counts={"write": 3}),
    "sleep_then": Workload(["sleep_then", "20", "write_n", "2", "100"],
                           counts={"clock_nanosleep": 1, "write": 2}),
    "func_calls": Workload(["func_calls", "1000", "3", "100"], counts={"exit_group": 1}),
    # Composite buffers: iovec arrays (writev, readv) and struct msghdr (sendmsg, recvmsg).
    "iovec_rw": Workload(["iovec_rw", "iovec.out"],
                         counts={"writev": 1, "readv": 1, "sendmsg": 1, "recvmsg": 1}),
    # An exec from a thread that is not the leader: it returns with the leader's id, and the
    # leader, blocked in pthread_join, never returns from its futex wait.
    "thread_exec": Workload(["thread_exec", "5", "7"],
                            counts={"getppid": 12, "clone3": 1, "execve": 2}),
    "w3_smallfiles": Workload(
        w3_argv, stdout=f"files {W3_FILES} written {4096 * W3_FILES} read {4096 * W3_FILES} "
        f"fsyncs {W3_FILES // 100} bad 0\n",
        counts={"openat": 2 * W3_FILES, "unlink": W3_FILES, "read": W3_FILES,
                "fsync": W3_FILES // 100},
        setup=w3_setup, check=w3_check),
}

# ----------------------------------------------------------------------------------------------
# Parsing and normalising `fay dump` text.
# ----------------------------------------------------------------------------------------------

LINE_RE = re.compile(r"^(\d+) +(.*)$")
DURATION_RE = re.compile(r" <\d+\.\d{6}>$")
NAME_RE = re.compile(r"^([a-z0-9_]+)\(")
NUMBER_RE = re.compile(r"(?<![\w.])\d+(?![\w.])")
# Calls whose arguments or return value carry a pid or tid.
PID_CALLS = {"--- signal", "clone", "clone3", "fork", "vfork", "getpid", "gettid", "getppid", "getpgid",
             "getsid", "setpgid", "set_tid_address", "wait4", "waitid", "kill", "tkill", "tgkill",
             "pidfd_open", "prlimit64", "sched_setaffinity", "sched_getaffinity",
             "sched_setscheduler", "sched_getscheduler", "sched_setparam", "sched_getparam",
             "sched_setattr", "sched_getattr", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
             # pthread_join waits on the thread's tid, which CLONE_CHILD_CLEARTID clears.
             "futex"}
# Calls whose return value in the parent is the new thread or process.
CREATORS = {"clone", "clone3", "fork", "vfork"}


def split_strings(text):
    """Splits text into (is_string_literal, piece) runs, so pids are never looked for inside
    buffer contents."""
    out = []
    i, start, n = 0, 0, len(text)
    while i < n:
        if text[i] == '"':
            if start < i:
                out.append((False, text[start:i]))
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append((True, text[i:j + 1]))
            i = start = j + 1
        else:
            i += 1
    if start < n:
        out.append((False, text[start:]))
    return out


def return_split(body):
    """Index of the ' = ' before the return value: the last one outside string literals. The
    dump pads the call out to column 40 before it, and the padding depends on the pid's width,
    so it is collapsed."""
    pos, best = 0, -1
    for is_str, piece in split_strings(body):
        if not is_str:
            k = piece.rfind(" = ")
            if k >= 0:
                best = pos + k
        pos += len(piece)
    return best


def canonical_sigchld(lines):
    """A child's SIGCHLD reaches a parent blocked in wait4 when wait4 returns, and one that has
    not called it yet at once: which of the two a run sees is up to the scheduler, not the
    recorder. A SIGCHLD right after a wait4 is put before it, so both runs read the same."""
    for i in range(1, len(lines)):
        if lines[i].startswith("--- SIGCHLD") and lines[i - 1].startswith("wait4("):
            lines[i - 1], lines[i] = lines[i], lines[i - 1]


class Trace:
    def __init__(self, text, recorder_pid, source, count_from=2):
        self.problems = []
        self.threads = {}  # name -> list of normalised lines
        self.order = []  # thread names in order of first appearance
        self.counts = {}  # syscall name -> count
        root = None
        children = {}  # tid -> the tids its clone/fork calls returned, in its own order
        root_execs = 0
        parsed = []
        for lineno, raw in enumerate(text.splitlines(), 1):
            m = LINE_RE.match(raw)
            if not m:
                self.problems.append(f"{source}:{lineno}: unparsed line: {raw[:200]}")
                continue
            tid, body = int(m.group(1)), DURATION_RE.sub("", m.group(2))
            root = tid if root is None else root
            name = NAME_RE.match(body)
            call = name.group(1) if name else None
            eq = return_split(body) if call else -1
            if body.startswith("--- SIG"):
                call = "--- signal"  # its si_pid is a pid; never counted as a call
            if call and eq >= 0:
                body = body[:eq].rstrip(" ") + body[eq:]
                eq = return_split(body)
                ret = body[eq + 3:].split(" ", 1)[0]
                if call in CREATORS and ret.isdigit() and int(ret) > 0:
                    children.setdefault(tid, []).append(int(ret))
                if tid == root and call == "execve" and ret == "0":
                    root_execs += 1
                # Counted from the workload's own execve on: the start-up of setarch (and of
                # taskset) is not in the expected counts.
                if tid != root or root_execs >= count_from:
                    self.counts[call] = self.counts.get(call, 0) + 1
            parsed.append((tid, call, body))
        # Names come from the tree, not from the order of lines: a trace lists a call when it
        # returns, so a child's first call can come before the parent's clone.
        names = {recorder_pid: "R"}  # fay is the parent of the root: getppid there returns it
        todo = [root] if root is not None else []
        if todo:
            names[root] = "0"
        while todo:
            tid = todo.pop(0)
            for k, child in enumerate(children.get(tid, []), 1):
                if child not in names:
                    names[child] = f"{names[tid]}.{k}"
                    todo.append(child)
        for tid, call, body in parsed:
            if tid not in names:
                # A thread that no clone in the trace created: named by appearance, and shows
                # up as a difference.
                names[tid] = f"?{len(names)}"
        for tid, call, body in parsed:
            body = self.normalise(call, body, names)
            t = names[tid]
            if t not in self.threads:
                self.threads[t] = []
                self.order.append(t)
            self.threads[t].append(body)
        for lines in self.threads.values():
            canonical_sigchld(lines)

    @staticmethod
    def normalise(call, body, names):
        pieces = []
        first_string = True
        for is_str, piece in split_strings(body):
            if is_str:
                if call == "getrandom" and first_string:
                    # The kernel's random bytes: the one value that cannot be made equal between
                    # two runs. Length, flags and return are still compared.
                    piece = '"<random>"'
                first_string = False
                pieces.append(piece)
                continue
            # Pids differ between runs: in the calls that take or return one, every decimal
            # number outside strings that is the pid of a traced thread (or of fay) becomes that
            # thread's name. Elsewhere a number is a number, even one that happens to equal a
            # pid (mprotect's 16384 in a run whose root pid was 16384).
            if call not in PID_CALLS:
                pieces.append(piece)
                continue
            pieces.append(NUMBER_RE.sub(
                lambda m: f"<{names[int(m.group(0))]}>" if int(m.group(0)) in names
                else m.group(0), piece))
        return "".join(pieces)


# ----------------------------------------------------------------------------------------------
# Running.
# ----------------------------------------------------------------------------------------------


def record(fay, backend, wl, argv, ctx):
    work = ctx["work"]
    # The first execve's envp points into fay's own stack, whose layout depends on the length of
    # fay's argv: the output name is padded so that both command lines are equally long.
    pad = max(len(b) for b in BACKENDS) - len(backend)
    out = os.path.join(work, backend + "_" * (2 * pad) + ".fay")
    stdout_path = os.path.join(work, f"stdout-{backend}")
    if wl.setup:
        wl.setup(work)
    # --consumers goes to both backends (ptrace has one writer whatever it says), so that the two
    # command lines stay equally long.
    more = [f"--consumers={ctx['consumers']}"] if ctx.get("consumers") else []
    cmd = (["setarch", "x86_64", "-R", fay, "record", "-q", "--backend", backend] + more +
           ["-o", out, "--", "setarch", "x86_64", "-R"] + argv)
    with open(stdout_path, "wb") as so, open(os.path.join(work, f"stderr-{backend}"), "wb") as se:
        # setarch execs fay in place, so this pid is fay's: the parent the root's getppid sees.
        p = subprocess.Popen(cmd, cwd=work, env=ctx["env"], stdin=subprocess.DEVNULL, stdout=so,
                             stderr=se)
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = "timeout"
    errors = []
    with open(os.path.join(work, f"stderr-{backend}"), errors="replace") as f:
        err = f.read().strip()
    if rc != wl.status:
        errors.append(f"{backend}: fay record exited {rc}, want {wl.status}"
                      + (f"; stderr: {err[:2000]}" if err else ""))
    elif err:
        errors.append(f"{backend}: fay record wrote to stderr: {err[:2000]}")
    if wl.stdout is not None:
        with open(stdout_path, errors="replace") as f:
            got = f.read()
        if got != wl.stdout:
            errors.append(f"{backend}: the workload printed {got[:300]!r}, want {wl.stdout!r}")
    if wl.check:
        e = wl.check(work)
        if e:
            errors.append(f"{backend}: {e}")
    if not os.path.exists(out):
        errors.append(f"{backend}: fay record wrote no trace")
        return None, errors
    d = subprocess.run([fay, "dump", "-s", str(STRING_LIMIT), out], capture_output=True)
    if d.returncode != 0 or d.stderr.strip():
        errors.append(f"{backend}: fay dump exited {d.returncode}: "
                      f"{d.stderr.decode(errors='replace').strip()[:2000]}")
    text = d.stdout.decode("utf-8", errors="surrogateescape")
    with open(os.path.join(work, f"{backend}.txt"), "w", errors="surrogateescape") as f:
        f.write(text)
    return Trace(text, p.pid, backend, wl.count_from), errors


# ----------------------------------------------------------------------------------------------
# Comparing and reporting.
# ----------------------------------------------------------------------------------------------

MAX_REPORT_LINES = 60
CLIP = 240


def clip(line):
    return line if len(line) <= CLIP else f"{line[:CLIP]}...[{len(line) - CLIP} more chars]"


def first_difference(a, b):
    """Both lines around the first column where they differ: long buffers differ far from the
    start of the line, past what the diff shows."""
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    lo = max(0, i - 60)
    return i, a[lo:i + 60], b[lo:i + 60]


def compare(ref, other, other_name):
    """Returns the report lines (empty when identical)."""
    out = []
    ref_threads, other_threads = set(ref.threads), set(other.threads)
    if ref_threads != other_threads:
        out.append(f"threads differ: {REFERENCE} has {sorted(ref_threads)}, "
                   f"{other_name} has {sorted(other_threads)}")
    budget = MAX_REPORT_LINES
    for t in ref.order + [t for t in other.order if t not in ref_threads]:
        a, b = ref.threads.get(t, []), other.threads.get(t, [])
        if a == b:
            continue
        out.append(f"thread {t}: {REFERENCE} {len(a)} lines, {other_name} {len(b)} lines")
        sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
        replaced = [op for op in sm.get_opcodes() if op[0] == "replace"]
        for tag, i1, i2, j1, j2 in replaced[:3]:
            col, x, y = first_difference(a[i1], b[j1])
            out.append(f"  line {i1 + 1} vs {j1 + 1} first differs at column {col}:")
            out.append(f"    {REFERENCE}: ...{x}...")
            out.append(f"    {other_name}: ...{y}...")
        diff = list(difflib.unified_diff(a, b, f"{REFERENCE} thread {t}",
                                         f"{other_name} thread {t}", n=2, lineterm=""))
        for line in diff[:budget]:
            out.append("  " + clip(line))
        if len(diff) > budget:
            out.append(f"  ... {len(diff) - budget} more diff lines")
        budget = max(10, budget - len(diff))
    return out


SELFTEST_DUMP = """\
{p0}   execve("/usr/bin/setarch", ["setarch"], 0x7fffffffed78 /* 2 vars */) = 0 <0.000500>
{p0}   getrandom("{rnd}", 2, GRND_NONBLOCK) = 2 <0.000010>
{p0}   execve("/bin/prog", ["prog"], 0x7fffffffedb8 /* 2 vars */) = 0 <0.000100>
{p0}   clone(child_stack=NULL, flags=SIGCHLD, child_tidptr=0x4af650) = {p1} <0.000066>
{p1}   getppid()                         = {p0} <0.000001>
{p1}   write(1, "pid 100", 7)            = 7 <0.000001>
{p0}   getppid()                         = {r} <0.000002>
{p1}   exit_group(0)                     = ?
{p0}   wait4(-1, [{{WIFEXITED(s) && WEXITSTATUS(s) == 0}}], 0, NULL) = {p1} <0.000089>
{p1}   +++ exited with 0 +++
"""
SELFTEST_A = SELFTEST_DUMP.format(p0=100, p1=101, r=99, rnd="\\x01\\x02")


def selftest():
    """Checks the normalisation and the comparison on made-up dumps."""
    a = Trace(SELFTEST_A, 99, "a")
    # Other pids (of another width, so other padding), other durations, other random bytes,
    # another interleaving of the two processes: all the same to the comparison.
    lines = SELFTEST_DUMP.format(p0=12000, p1=12001, r=11999, rnd="\\xff\\xfe").splitlines()
    lines.insert(4, lines.pop(6).replace("<0.000002>", "<0.000123>"))
    # A trace lists a call when it returns: the child's first call can precede the clone.
    lines.insert(3, lines.pop(5))
    b = Trace("\n".join(lines) + "\n", 11999, "b")
    problems = []
    if a.problems or b.problems:
        problems.append(f"parse problems: {a.problems + b.problems}")
    if compare(a, b, "b"):
        problems.append("equal traces compare different:\n" + "\n".join(compare(a, b, "b")))
    if a.threads.get("0.1", [None])[0] != "getppid() = <0>":
        problems.append(f"thread 0.1 is {a.threads.get('0.1')}")
    if '"pid 100"' not in a.threads["0.1"][1]:
        problems.append(f"a pid inside a buffer was replaced: {a.threads['0.1'][1]}")
    if a.counts != {"execve": 1, "clone": 1, "getppid": 2, "write": 1, "exit_group": 1, "wait4": 1}:
        problems.append(f"counts after the second execve: {a.counts}")
    # A constant that equals a pid in one run is still a constant outside the pid-carrying calls.
    m = Trace("100   mprotect(0x7f00, 100, PROT_READ) = 0\n", 99, "m")
    if "mprotect(0x7f00, 100, PROT_READ) = 0" not in sum(m.threads.values(), []):
        problems.append(f"a constant equal to a pid was renamed: {m.threads}")
    # One byte of one buffer, one pointer: both must be reported.
    for old, new in [('"pid 100"', '"pid 10X"'), ("0x4af650", "0x4af658")]:
        c = Trace(SELFTEST_A.replace(old, new), 99, "c")
        report = compare(a, c, "c")
        if not report or not any(new in line for line in report):
            problems.append(f"changing {old} to {new} was not reported: {report}")
    for p in problems:
        print(f"FAIL: {p}")
    print("selftest " + ("failed" if problems else "passed"))
    return 1 if problems else 0


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fay")
    ap.add_argument("--testprogs", help="the build's tests/testprogs directory")
    ap.add_argument("--smallfiles", help="bench/workloads/src/smallfiles.c, built")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--consumers", type=int, help="fay record --consumers, for the eBPF backend")
    ap.add_argument("--list", action="store_true", help="print the workload names")
    ap.add_argument("workload", nargs="?", choices=sorted(WORKLOADS))
    opts = ap.parse_args()
    if opts.list:
        print("\n".join(WORKLOADS))
        return 0
    if not opts.workload or not opts.fay or not opts.testprogs or not opts.smallfiles:
        ap.error("--fay, --testprogs, --smallfiles and WORKLOAD are required")
    if not os.access(opts.fay, os.X_OK):
        print(f"SKIP: fay is not built ({opts.fay} is missing)")
        return 77
    for path in [os.path.join(opts.testprogs, "getppid_loop"), opts.smallfiles]:
        if not os.access(path, os.X_OK):
            print(f"FAIL: {path} is missing: build the testprogs and identity_smallfiles targets")
            return 1
    wl = WORKLOADS[opts.workload]
    work = tempfile.mkdtemp(prefix=f"fay-identity-{opts.workload}-")
    # The test program runs from a private copy: uprobes attach to a file, and another test
    # probing the build's func_calls at the same time would add its uretprobe calls to ours.
    private = os.path.join(work, "bin")
    os.mkdir(private)
    ctx = {
        "work": work,
        "smallfiles": os.path.abspath(opts.smallfiles),
        "consumers": opts.consumers,
        "env": {"PATH": f"{MISSING_DIR}:{private}:/usr/bin:/bin:{os.path.abspath(opts.testprogs)}",
                "LC_ALL": "C"},
    }
    argv = wl.argv(ctx) if callable(wl.argv) else wl.argv
    prog = os.path.join(opts.testprogs, argv[0])
    if "/" not in argv[0] and os.access(prog, os.X_OK):
        shutil.copy2(prog, os.path.join(private, argv[0]))
    fay = os.path.abspath(opts.fay)
    failures = []
    traces = {}
    for backend in BACKENDS:
        trace, errors = record(fay, backend, wl, argv, ctx)
        traces[backend] = trace
        failures += errors
        failures += trace.problems[:10] if trace else []
    print(f"workload {opts.workload}: {' '.join(argv)}" +
          (f" (--consumers={opts.consumers})" if opts.consumers else ""))
    for backend in BACKENDS:
        t = traces[backend]
        print(f"  {backend}: " + (f"{sum(len(v) for v in t.threads.values())} lines in "
                                  f"{len(t.threads)} threads" if t else "no trace"))
    ref = traces[REFERENCE]
    if ref:
        for call, want in sorted(wl.counts.items()):
            got = ref.counts.get(call, 0)
            if got != want:
                failures.append(f"{REFERENCE}: {got} {call} calls, want {want}")
    for backend in BACKENDS[1:]:
        # Without both traces there is nothing to compare; the failed run is reported above.
        diff = compare(ref, traces[backend], backend) if ref and traces[backend] else []
        if diff:
            failures.append(f"{backend} differs from {REFERENCE}:\n" + "\n".join(diff))
    if failures:
        print("FAIL")
        for f in failures:
            print(f)
        print(f"scratch directory: {work}" if opts.keep else "(rerun with --keep for the dumps)")
    else:
        print("PASS: identical")
    if not opts.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
