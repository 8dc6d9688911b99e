#!/bin/sh
# The hardening campaign, repeatable: MUTATIONS structure-aware mutated traces through every
# trace reader (fay_mutate.py) and QUERIES generated queries, offline and live (gen_queries.py).
# It fails on any crash, any run past 20 s, any silent wrong answer (a mutated trace read with
# exit 0 to a different answer) and any query fay blames on itself. As root, from the source
# tree, after a build:  tests/fuzz/campaign.sh [build/fay] [MUTATIONS] [QUERIES] [SEED]
set -e
FAY=${1:-build/fay}
MUTATIONS=${2:-2000}
QUERIES=${3:-1000}
SEED=${4:-1}
PROGS=${FAY_TESTPROGS:-$(dirname "$FAY")/tests/testprogs}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/pc"
# Two traces: one with many distinct buffers and blob chunks, one with paths of every kind.
"$FAY" record -q --backend ptrace -o "$dir/w.fay" -- "$PROGS/write_random" 300 4096 >/dev/null
"$FAY" record -q --backend ptrace -o "$dir/p.fay" -- "$PROGS/path_calls" "$dir/pc" 20
fail=0
half=$((MUTATIONS / 2))
# Each tool's whole report goes to a file; its summary and any failure are shown.
for t in w p; do
  python3 "$(dirname "$0")/fay_mutate.py" run --fay "$FAY" "$dir/$t.fay" -n "$half" \
    --seed "$SEED" > "$dir/$t.out" || fail=1
  grep -E '^(seed|FAIL)' "$dir/$t.out"
done
python3 "$(dirname "$0")/gen_queries.py" --fay "$FAY" --trace "$dir/p.fay" -n "$QUERIES" \
  --seed "$SEED" --live-every 3 > "$dir/q.out" || fail=1
grep -E '^(queries|FAIL)' "$dir/q.out" | tail -40
[ $fail = 0 ] && echo "campaign: passed" || echo "campaign: FAILED"
exit $fail
