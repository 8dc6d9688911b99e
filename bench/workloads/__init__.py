"""Each module here defines workloads(env) -> [Workload] and ORDER (run order, low first)."""
