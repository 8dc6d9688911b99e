#!/bin/sh
# Rebuilds the seed corpus in tests/fuzz/corpus/ that `make fuzz-smoke` starts from: a few small
# real traces (both backends, several processes, threads, several streams, failed calls, cut
# buffers), each chunk's payload for fuzz_codecs, generated queries for fuzz_query, and the
# cluster's messages as a real peer sends them for fuzz_cluster (bench/cluster_sim --dump).
# Run as root from the repository, after `make build`:  tests/fuzz/make_corpus.sh [BUILD]
set -e
B=${1:-build}
T=$B/tests/testprogs
C=tests/fuzz/corpus
rm -rf "$C" && mkdir -p "$C/reader" "$C/codecs" "$C/query" "$C/cluster"
rec() { name=$1; shift; "$B/fay" record -q -o "$C/reader/$name.fay" "$@" >/dev/null; }
rec ptrace-write --backend ptrace -- "$T/write_n" 3 200
rec ptrace-fork --backend ptrace -- "$T/fork_tree" 2 2 1
rec ebpf-missing --backend ebpf -- "$T/open_missing" 4
rec ebpf-threads --backend ebpf --consumers 2 -- "$T/threads_read" 2 3
rec ebpf-cut --backend ebpf --max-buffer 16 -- "$T/write_random" 4 300
rec ebpf-iovec --backend ebpf -- "$T/iovec_rw" "$C/iovec.tmp"
rm -f "$C/iovec.tmp"
python3 tests/fuzz/fay_mutate.py seeds "$C/codecs" "$C"/reader/*.fay
# A trace without its footer (cut where the recorder would have been killed).
python3 tests/fuzz/fay_mutate.py craft cut "$C/reader/ptrace-write.fay" "$C/reader/cut.fay" --seed 3
"$B/bench/cluster_sim" --dump "$C/cluster"
i=0
python3 tests/fuzz/gen_queries.py --print -n 150 --seed 11 | while IFS= read -r q; do
  [ ${#q} -le 4096 ] || continue
  i=$((i + 1))
  printf '%s' "$q" > "$C/query/gen-$i"
done
n=0
while IFS= read -r q; do
  n=$((n + 1))
  printf '%s' "$q" > "$C/query/doc-$n"
done <<'END'
syscall:* | count() as calls by comm | top 15 | for 5s
syscall:openat | where ret < 0 | count() by str(args.filename), errno
syscall:read | hist(ret) by comm
syscall:write | where pid == 42 and args.count > 4096 | select time, tid, args.fd, args.count
tracepoint:sched:sched_switch | count() by prev_comm, next_comm | every 1s | for 3s
syscall:open, syscall:openat | select str(coalesce(args.filename, args.pathname))
uprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:malloc | sum(args.0), avg(latency) by comm
syscall:* | where comm in ("bash", "sh*") and not errno in (2, 11) | lhist(latency, 0, 1000000, 1000)
syscall:read* | sample 1/100 | min(ret), max(ret), count() by probe
END
echo "corpus: $(ls "$C/reader" | wc -l) traces, $(ls "$C/codecs" | wc -l) codec seeds, $(ls "$C/query" | wc -l) queries, $(ls "$C/cluster" | wc -l) cluster messages; $(du -sk "$C" | cut -f1) KB"
