"""The side-by-side benchmark harness behind bench/run (see docs/BENCHMARKS.md)."""
