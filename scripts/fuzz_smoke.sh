#!/bin/sh
# `make fuzz-smoke`: builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan in their
# own build directory and runs each for a short, fixed time from the seed corpus kept in
# tests/fuzz/corpus. A crash, a leak, undefined behaviour, an input slower than 10 s or a run
# over 2.5 GB fails it, leaving the input in $FUZZ_BUILD/crashes. CI runs it after `make test`.
#   FUZZ_BUILD   build directory (build-fuzz)
#   FUZZ_SECONDS seconds per target (30)
#   FUZZ_SEED    libFuzzer's -seed (1: the same run each time; 0: a new one)
set -e
cd "$(dirname "$0")/.."
B=${FUZZ_BUILD:-build-fuzz}
SECS=${FUZZ_SECONDS:-30}
SEED=${FUZZ_SEED:-1}
JOBS=${JOBS:-$(nproc)}
# -O1 and no debug information: the sanitizers need no more, and the three targets build in
# about 2 minutes on 2 cores instead of 3 (fuzz_cluster adds the generated protobuf code).
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DFAY_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS_RELEASE=-O1 -DCMAKE_CXX_FLAGS_RELEASE=-O1 >/dev/null
cmake --build "$B" -j "$JOBS" --target fuzz_reader fuzz_codecs fuzz_query fuzz_cluster >/dev/null
mkdir -p "$B/crashes"
failed=0
for t in reader codecs query cluster; do
  work=$(mktemp -d)
  # New inputs go to the scratch directory first; the kept corpus is only read.
  if "$B/tests/fuzz/fuzz_$t" -seed="$SEED" -max_total_time="$SECS" -timeout=10 \
      -rss_limit_mb=2560 -artifact_prefix="$B/crashes/$t-" -print_final_stats=1 \
      "$work" "tests/fuzz/corpus/$t" >"$B/fuzz_$t.log" 2>&1; then
    runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$B/fuzz_$t.log")
    cov=$(grep -oE 'cov: [0-9]+' "$B/fuzz_$t.log" | tail -1)
    echo "fuzz_$t: ok, $runs inputs in ${SECS} s, $cov"
  else
    echo "fuzz_$t: FAILED (log: $B/fuzz_$t.log; input: $B/crashes/)"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$B/fuzz_$t.log" | head -5
    failed=1
  fi
  rm -rf "$work"
done
exit $failed
