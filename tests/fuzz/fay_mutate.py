#!/usr/bin/env python3
"""Structure-aware mutations of a .fay trace (docs/FORMAT.md), and a harness that runs every
trace reader over them.

  fay_mutate.py craft MUTATION IN OUT [ARG]   one named mutation, every CRC recomputed
  fay_mutate.py run --fay FAY TRACE [-n N] [--seed S] [--keep DIR]
  fay_mutate.py seeds OUTDIR TRACE...          fuzz_codecs seeds: each chunk's payload

`run` applies N random mutations (a seeded, repeatable sequence) to TRACE and runs `fay info`,
`info --check`, `dump -x`, two `query -i` (one reading str() of the buffers) and
`convert --to jsonl --buffers` over each file. It fails when a
reader crashes (dies of a signal), runs past 20 s, or exits 0 with an answer that differs from
the one it gives for the original trace: a reader may refuse a mutated file, but must not
silently answer differently. The mutations keep every checksum right (the chunks are moved,
repeated, cut or re-indexed, their CRCs recomputed), so only the structure checks catch them.

Mutations: dup-chunk (an events or blob chunk stored twice), dup-chunk-indexed (the same, the
footer re-indexed to match), dup-chunk-nofooter (the same in a file without footer), swap-chunks, swap-chunks-indexed, drop-chunk-indexed,
cut (at a chunk boundary or anywhere), concat (the file twice, or a prefix then the file),
blob-hash-swap (two same-size blobs' hashes swapped in the footer), blob-offset (a footer entry
pointed at another blob's bytes), claim (an events chunk's raw length inflated),
footer-not-last (a chunk moved after the footer).
"""
import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag(v):
    return varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def varint(self):
        v = s = 0
        while True:
            b = self.d[self.p]
            self.p += 1
            v |= (b & 0x7F) << s
            s += 7
            if not b & 0x80:
                return v

    def zigzag(self):
        v = self.varint()
        v = (v >> 1) ^ -(v & 1)
        return v

    def raw(self, n):
        b = self.d[self.p:self.p + n]
        self.p += n
        return b


class Chunk:
    def __init__(self, type_, codec, flags, seq, raw_length, count, payload):
        self.type, self.codec, self.flags, self.seq = type_, codec, flags, seq
        self.raw_length, self.count, self.payload = raw_length, count, payload
        self.offset = None

    def encode(self):
        h = b"FAYC" + struct.pack("<BBHIIIII", self.type, self.codec, self.flags, self.seq,
                                  len(self.payload), self.raw_length, self.count,
                                  crc32c(self.payload))
        return h + struct.pack("<I", crc32c(h)) + self.payload

    def raw(self):
        if self.codec == 0:
            return self.payload
        return subprocess.run(["zstd", "-d", "-c", "-q"], input=self.payload,
                              stdout=subprocess.PIPE, check=True).stdout


def parse(data):
    """Preamble, chunks (header to footer, in file order) and whether a trailer ended it."""
    pre, chunks, p = data[:16], [], 16
    while p + 32 <= len(data) and data[p:p + 4] == b"FAYC":
        t, codec, flags, seq, stored, raw, count, _ = struct.unpack_from("<BBHIIIII", data, p + 4)
        if p + 32 + stored > len(data):
            break
        c = Chunk(t, codec, flags, seq, raw, count, data[p + 32:p + 32 + stored])
        c.offset = p
        chunks.append(c)
        p += 32 + stored
        if t == 4:
            break
    return pre, chunks


def decode_footer(raw):
    r = Reader(raw)
    events = []
    for _ in range(r.varint()):
        e = dict(offset=r.varint(), seq=r.varint(), stored=r.varint(), raw=r.varint(),
                 first=r.varint(), span=r.varint(), records=r.varint())
        tids, t = [], 0
        for _ in range(r.varint()):
            t += r.zigzag()
            tids.append(t)
        e["tids"] = tids
        events.append(e)
    blobs = []
    for _ in range(r.varint()):
        b = dict(offset=r.varint(), seq=r.varint(), stored=r.varint(), raw=r.varint())
        b["blobs"] = [[r.raw(16), r.varint(), r.varint()] for _ in range(r.varint())]
        blobs.append(b)
    streams = None
    if r.p < len(raw):
        streams = [r.varint() for _ in range(r.varint())]
    return events, blobs, streams, raw[r.p:]


def encode_footer(events, blobs, streams, tail):
    out = bytearray(varint(len(events)))
    for e in events:
        for k in ("offset", "seq", "stored", "raw", "first", "span", "records"):
            out += varint(e[k])
        out += varint(len(e["tids"]))
        prev = 0
        for t in e["tids"]:
            out += zigzag(t - prev)
            prev = t
    out += varint(len(blobs))
    for b in blobs:
        for k in ("offset", "seq", "stored", "raw"):
            out += varint(b[k])
        out += varint(len(b["blobs"]))
        for h, off, size in b["blobs"]:
            out += h + varint(off) + varint(size)
    if streams is not None:
        out += varint(len(streams))
        for s in streams:
            out += varint(s)
    return bytes(out + tail)


class Trace:
    def __init__(self, data):
        self.pre, chunks = parse(data)
        self.header = chunks[0]
        self.footer = chunks[-1] if chunks[-1].type == 4 else None
        self.body = chunks[1:-1] if self.footer else chunks[1:]
        self.index = {}
        self.streams = self.tail = None
        if self.footer:
            events, blobs, self.streams, self.tail = decode_footer(self.footer.raw())
            for e in events:
                self.index[e["offset"]] = ("e", e)
            for b in blobs:
                self.index[b["offset"]] = ("b", b)
            # Each body chunk keeps its own index entry, whatever happens to its offset.
            for c in self.body:
                c.entry = self.index.get(c.offset)

    def build(self, reindex=True, renumber=False, footer=True):
        """The file: reindex rebuilds the footer from the chunks' entries at their new offsets
        (seq numbers as the chunks carry them, unless renumber)."""
        out = bytearray(self.pre) + self.header.encode()
        events, blobs, streams = [], [], []
        for i, c in enumerate(self.body):
            if renumber:
                c.seq = i + 1
            at = len(out)
            out += c.encode()
            kind, e = getattr(c, "entry", None) or (None, None)
            if e is None:
                continue
            e = dict(e)
            e["offset"], e["seq"], e["stored"], e["raw"] = at, c.seq, len(c.payload), c.raw_length
            if kind == "e":
                events.append(e)
                streams.append(c.flags)
            else:
                blobs.append(e)
        if not footer or not self.footer:
            return bytes(out)
        if not reindex:
            f = self.footer
        else:
            payload = encode_footer(events, blobs, streams if self.streams is not None else None,
                                    self.tail)
            last = self.body[-1].seq if self.body else 0
            f = Chunk(4, 0, 0, last + 1, len(payload), len(events) + len(blobs), payload)
        at = len(out)
        out += f.encode()
        t = b"FAYTRAIL" + struct.pack("<QI", at, f.seq + 1)
        return bytes(out + t + struct.pack("<I", crc32c(t)))


def same_size_blobs(tr, rng):
    """Two footer entries of distinct blobs of equal size in one chunk: the largest such pair
    (craft, whose blobs are a program's data), or any (run, rng given)."""
    pairs = []
    for c in tr.body:
        kind, b = getattr(c, "entry", None) or (None, None)
        if kind != "b":
            continue
        seen = {}
        for i, (h, off, size) in enumerate(b["blobs"]):
            if size in seen:
                pairs.append((size, (b, seen[size]), (b, i)))
            seen[size] = i
    if not pairs:
        return None
    pairs.sort(key=lambda p: -p[0])
    return (rng.choice(pairs) if rng else pairs[0])[1:]


def mutate(name, data, rng, craft=False):
    tr = Trace(data)
    body = tr.body
    pick = lambda types: rng.choice([c for c in body if c.type in types] or [None])
    if name in ("dup-chunk", "dup-chunk-indexed", "dup-chunk-nofooter"):
        c = pick((3,)) if rng.random() < 0.7 else pick((2, 3))
        if c is None:
            return None
        i = body.index(c)
        d = Chunk(c.type, c.codec, c.flags, c.seq, c.raw_length, c.count, c.payload)
        d.entry = c.entry if hasattr(c, "entry") else None
        body.insert(i + 1 + rng.randrange(0, 2) if i + 1 < len(body) else i + 1, d)
        return tr.build(reindex=name.endswith("indexed"), footer=not name.endswith("nofooter"))
    if name in ("swap-chunks", "swap-chunks-indexed"):
        if len(body) < 2:
            return None
        i, j = sorted(rng.sample(range(len(body)), 2))
        body[i], body[j] = body[j], body[i]
        return tr.build(reindex=name.endswith("indexed"))
    if name == "drop-chunk-indexed":
        # Not the last chunk: without it, and re-indexed, the file is a valid trace of a shorter
        # recording, which no check can tell from one (the format has no signature).
        c = rng.choice([c for c in body[:-1] if c.type == 3] or [None])
        if c is None:
            return None
        body.remove(c)
        return tr.build()
    if name == "cut":
        if rng.random() < 0.5:
            ends = [c.offset + 32 + len(c.payload) for c in [tr.header] + body]
            return data[:rng.choice(ends)]
        return data[:rng.randrange(16, len(data))]
    if name == "concat":
        if rng.random() < 0.5:
            return data + data
        return data[:rng.randrange(16, len(data))] + data
    if name in ("blob-hash-swap", "blob-offset"):
        pair = same_size_blobs(tr, None if craft else rng)
        if pair is None:
            return None
        (b1, i1), (b2, i2) = pair
        e1, e2 = b1["blobs"][i1], b2["blobs"][i2]
        if name == "blob-hash-swap":
            e1[0], e2[0] = e2[0], e1[0]
        else:
            e1[1] = e2[1]
        return tr.build()
    if name == "claim":
        c = pick((3,))
        if c is None:
            return None
        c.raw_length = rng.choice([c.raw_length * 2, 1 << 30, 0xFFFFFFFF, c.raw_length + 1])
        if getattr(c, "entry", None):
            c.entry[1]["raw"] = c.raw_length
        return tr.build()
    if name == "footer-not-last":
        if not tr.footer or not body:
            return None
        whole = tr.build()
        c = body[-1]
        tail = c.encode()
        # The footer and trailer as they were, then a chunk after them.
        return whole + tail
    raise SystemExit(f"unknown mutation {name}")


MUTATIONS = ["dup-chunk", "dup-chunk-indexed", "dup-chunk-nofooter", "swap-chunks", "swap-chunks-indexed",
             "drop-chunk-indexed", "cut", "concat", "blob-hash-swap", "blob-offset", "claim",
             "footer-not-last"]


def readers(fay, path):
    return {
        "info": [fay, "info", path],
        "info --check": [fay, "info", "--check", path],
        "dump": [fay, "dump", "-x", path],
        "query -i": [fay, "query", "-i", path, "syscall:* | count(), sum(ret) by comm, probe"],
        "query -i str": [fay, "query", "-i", path,
                         "syscall:write, syscall:read | count() by probe, str(args.buf)"],
        "convert": [fay, "convert", path, "--to", "jsonl", "--buffers", "-o", "-"],
    }


def run_one(argv):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    except subprocess.TimeoutExpired:
        return "timeout", b"", b""
    return p.returncode, p.stdout, p.stderr


def normalize(name, out, path):
    # info names the file and its size; the answer is the rest.
    lines = out.replace(path.encode(), b"TRACE").splitlines()
    if name.startswith("info"):
        lines = [l for l in lines if not l.startswith((b"file", b"size", b"chunks", b"stored",
                                                       b"ratio", b"blob"))]
    return b"\n".join(lines)


def cmd_run(a):
    rng = random.Random(a.seed)
    original = open(a.trace, "rb").read()
    want = {}
    for name, argv in readers(a.fay, a.trace).items():
        code, out, err = run_one(argv)
        if code != 0:
            raise SystemExit(f"{name} of the original trace exited {code}: {err.decode()}")
        want[name] = normalize(name, out, a.trace)
    tmp = a.keep or tempfile.mkdtemp(prefix="fay-mutate-")
    os.makedirs(tmp, exist_ok=True)
    tally = {"files": 0, "runs": 0, "refused": 0, "exit0 same": 0, "crash": 0, "timeout": 0,
             "exit0 different": 0}
    by_mutation = {}
    failures = []
    for k in range(a.n):
        name = a.only or rng.choice(MUTATIONS)
        data = mutate(name, original, rng)
        if data is None or data == original:
            continue
        path = os.path.join(tmp, f"m{k:04d}-{name}.fay")
        with open(path, "wb") as f:
            f.write(data)
        tally["files"] += 1
        m = by_mutation.setdefault(name, [0, 0, 0])
        m[0] += 1
        bad = False
        for rname, argv in readers(a.fay, path).items():
            tally["runs"] += 1
            code, out, err = run_one(argv)
            if code == "timeout":
                tally["timeout"] += 1
                failures.append(f"{path}: {rname}: ran past 20 s")
                bad = True
            elif code < 0 or code > 128:
                tally["crash"] += 1
                failures.append(f"{path}: {rname}: died ({code}): {err.decode()[-300:]}")
                bad = True
            elif code == 0:
                if normalize(rname, out, path) == want[rname]:
                    tally["exit0 same"] += 1
                else:
                    tally["exit0 different"] += 1
                    failures.append(f"{path}: {rname}: exit 0 with a different answer")
                    bad = True
            else:
                tally["refused"] += 1
                m[1] += 1
        if bad:
            m[2] += 1
        elif not a.keep:
            os.unlink(path)
    print(f"seed {a.seed}: {tally['files']} mutated files, {tally['runs']} reader runs: "
          f"{tally['refused']} refused (non-zero exit), {tally['exit0 same']} exit 0 with the "
          f"original's answer, {tally['exit0 different']} exit 0 with another answer, "
          f"{tally['crash']} crashed, {tally['timeout']} past 20 s")
    for name, (files, refused, bad) in sorted(by_mutation.items()):
        print(f"  {name:22} {files:4} files, {refused:4} runs refused, {bad} files failing")
    for f in failures[:40]:
        print("FAIL", f)
    if not a.keep and not failures:
        os.rmdir(tmp)
    return 1 if failures else 0


def cmd_seeds(a):
    """fuzz_codecs seeds from real traces: each chunk's payload, uncompressed, behind the
    selector byte and the record count fuzz_codecs.cc reads (blobs 0, events 1 and 2, footer 3,
    header 4)."""
    selectors = {2: [0], 3: [1, 2], 4: [3], 1: [4]}
    os.makedirs(a.out, exist_ok=True)
    n = 0
    for path in a.traces:
        _, chunks = parse(open(path, "rb").read())
        base = os.path.splitext(os.path.basename(path))[0]
        seen = set()
        for i, c in enumerate(chunks):
            for sel in selectors.get(c.type, []):
                if (c.type, sel) in seen and c.type != 3:
                    continue
                seen.add((c.type, sel))
                raw = c.raw()
                with open(os.path.join(a.out, "%s-%d-%d" % (base, i, sel)), "wb") as f:
                    f.write(bytes([sel]) + struct.pack("<I", c.count) + raw)
                n += 1
    print("%d codec seeds in %s" % (n, a.out))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("craft")
    c.add_argument("mutation", choices=MUTATIONS)
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("run")
    r.add_argument("--fay", required=True)
    r.add_argument("trace")
    r.add_argument("-n", type=int, default=100)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--only", choices=MUTATIONS)
    r.add_argument("--keep", help="keep the mutated files here")
    sd = sub.add_parser("seeds")
    sd.add_argument("out")
    sd.add_argument("traces", nargs="+")
    a = ap.parse_args()
    if a.cmd == "seeds":
        return cmd_seeds(a)
    if a.cmd == "craft":
        data = mutate(a.mutation, open(a.input, "rb").read(), random.Random(a.seed), craft=True)
        if data is None:
            raise SystemExit(f"{a.input}: nothing to apply {a.mutation} to")
        with open(a.output, "wb") as f:
            f.write(data)
        return 0
    return cmd_run(a)


if __name__ == "__main__":
    sys.exit(main())
