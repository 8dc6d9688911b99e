"""Replay rows: a workload recorded once, then `fay replay --prepare --verify` into a fresh root,
timed against the original program's own runs.

Every replay run is checked: it must exit 0, every replayed call must verify (the summary's
"verified" equals "replayed" and "mismatches: 0"), and the tree it leaves in the root (names,
sizes and SHA-256 of every file, directories, symlink targets) must equal the tree the recorded
run left behind. A run failing any of that is a failed run, never a time.
"""

import hashlib
import os
import re
import shutil
import subprocess

from benchlib.tools import Tool, exited_zero

_REPLAYED = re.compile(r"^replayed:\s+(\d+)$", re.M)
_VERIFIED = re.compile(r"^verified:\s+(\d+) \(", re.M)
_MISMATCHES = re.compile(r"^mismatches:\s+(\d+)", re.M)
_EMULATED = re.compile(r"^emulated:\s+(\d+)", re.M)
_WALL = re.compile(r"^wall:\s+([\d.]+) s replay .*; load ([\d.]+) s, prepare ([\d.]+) s$", re.M)


def tree(path):
    """{relative path: description} of everything below path (not path itself)."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, path)
            if os.path.islink(p):
                out[rel] = ("symlink", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            else:
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                out[rel] = ("file", os.path.getsize(p), h.hexdigest())
    return out


def tree_difference(want, got):
    """'' when equal, else the first difference in words."""
    for k in sorted(set(want) | set(got)):
        if want.get(k) != got.get(k):
            return f"{k}: {want.get(k, 'absent')} after the recorded run, " \
                   f"{got.get(k, 'absent')} after the replay"
    return ""


class Recording:
    """A workload recorded once per bench run by setup(): the trace and the tree it left."""

    def __init__(self, env, name, argv, workdir, cwd=None):
        self.env = env
        self.trace = os.path.join(env.data_dir(), f"replay-{name}.fay")
        self.argv = argv        # the recorded command
        self.workdir = workdir  # the directory whose final tree the replay must reproduce
        self.cwd = cwd
        self.want = None

    def record(self):
        shutil.rmtree(self.workdir, ignore_errors=True)
        os.makedirs(self.workdir)
        r = subprocess.run([self.env.fay, "record", "-q", "-o", self.trace, "--"] + self.argv,
                           cwd=self.cwd or self.workdir, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            return f"fay record failed: {(r.stderr.strip().splitlines() or ['?'])[-1][:200]}"
        self.want = tree(self.workdir)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return None

    def cleanup(self):
        shutil.rmtree(self.workdir, ignore_errors=True)
        if os.path.exists(self.trace):
            os.unlink(self.trace)


def replay_tool(env, rec, root):
    """`fay replay --prepare --verify` of rec into root ("{scratch}/..." or a fixed path on the
    file system the original ran on), which is made before each run (untimed: the original's
    runs start in a directory that is there too) and which the check removes."""
    argv = [env.fay, "replay", rec.trace, "--root", root, "--prepare", "--verify",
            "--no-progress"]

    def before(scratch):
        os.mkdir(root.replace("{scratch}", scratch))

    def check(run):
        real_root = root.replace("{scratch}", run.scratch or "")
        try:
            err = exited_zero(run)
            if err:
                m = re.search(r"^mismatch: .*$", run.stdout, re.M)
                return err + (f"; first {m.group(0)}" if m else ""), None
            replayed = _REPLAYED.search(run.stdout)
            verified = _VERIFIED.search(run.stdout)
            mism = _MISMATCHES.search(run.stdout)
            wall = _WALL.search(run.stdout)
            if not (replayed and verified and mism and wall):
                return "fay replay printed no summary", None
            if int(mism.group(1)) != 0 or verified.group(1) != replayed.group(1):
                return f"{mism.group(1)} mismatches, {verified.group(1)} of " \
                       f"{replayed.group(1)} replayed calls verified", None
            if rec.want is None:
                return "the recording failed", None
            diff = tree_difference(rec.want, tree(real_root + rec.workdir))
            if diff:
                return f"the replayed tree differs: {diff}", None
            run.metrics["replayed_calls"] = int(replayed.group(1))
            run.metrics["verified_calls"] = int(verified.group(1))
            emulated = _EMULATED.search(run.stdout)
            if emulated:
                run.metrics["emulated_calls"] = int(emulated.group(1))
            run.metrics["replay_phase_s"] = float(wall.group(1))
            run.metrics["load_s"] = float(wall.group(2))
            run.metrics["prepare_s"] = float(wall.group(3))
            run.events = int(replayed.group(1)) + int(emulated.group(1) if emulated else 0)
            return None, f"{verified.group(1)} of {replayed.group(1)} replayed calls verified, " \
                         f"tree identical"
        finally:
            shutil.rmtree(real_root, ignore_errors=True)

    return Tool("fay replay --prepare --verify", "fay", argv, check, needs=[env.fay],
                before=before)


def replay_rule(limit):
    """The whole `fay replay --prepare --verify` command (asap: loading the trace, --prepare and
    the replay, as a user times it) <= limit x the original run's wall, with every run verified
    and its tree identical (a run that was not is a failed row). The replay phase's own ratio
    (the summary's wall line) and the load and --prepare times are shown beside it."""
    def rule(results, _all):
        t = {r["tool"]: r for r in results["tools"]}
        rep, base = t.get("fay replay --prepare --verify"), t.get("untraced")
        if not rep or rep["status"] != "ok":
            return "FAIL", f"fay replay failed: {rep.get('reason') if rep else 'did not run'}"
        if not base or base["status"] != "ok":
            return "n/a", "the original run failed"
        m = rep.get("metrics", {})
        phase = m.get("replay_phase_s")
        if phase is None:
            return "FAIL", "no replay wall time in fay replay's summary"
        whole = rep["median_wall_s"] / base["median_wall_s"]
        ratio = phase / base["median_wall_s"]
        detail = (f"whole command {whole:.2f} x the original run (<= {limit:g}); replay phase "
                  f"{ratio:.2f} x, load {m.get('load_s', 0):.3f} s, prepare "
                  f"{m.get('prepare_s', 0):.3f} s; {m.get('verified_calls', 0):.0f} of "
                  f"{m.get('replayed_calls', 0):.0f} replayed calls verified, tree identical "
                  f"on every run")
        return ("PASS" if whole <= limit else "FAIL"), detail
    return f"fay replay --prepare --verify: whole command <= {limit:g} x the original run, " \
           f"100% verified, identical tree (issue 6)", rule


def verified_rule():
    """Every run verified with an identical tree; no time limit."""
    def rule(results, _all):
        t = {r["tool"]: r for r in results["tools"]}
        rep = t.get("fay replay --prepare --verify")
        if not rep or rep["status"] != "ok":
            return "FAIL", f"fay replay failed: {rep.get('reason') if rep else 'did not run'}"
        m = rep.get("metrics", {})
        return "PASS", f"{m.get('verified_calls', 0):.0f} of {m.get('replayed_calls', 0):.0f} " \
                       f"replayed calls verified, tree identical on every run"
    return "fay replay --prepare --verify: 100% verified, identical tree (issue 6)", rule
