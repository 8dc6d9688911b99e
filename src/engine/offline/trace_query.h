// Runs a plan over a recorded trace: the offline source of `fay query -i`. The plan and the
// aggregates are the live ones; the evaluator is the user-space interpreter. Aggregations read
// the events chunks in parallel (each chunk decodes on its own) and merge the partial states,
// as the live path merges per-CPU maps. A query that needs file order (`select`, `every`, or
// `path`, whose fd table is built call by call) reads the chunks in one pass, in order.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/output/sink.h"
#include "engine/value.h"
#include "query/plan.h"

namespace fay {

struct TraceQueryOptions {
  // Events whose [entry, exit] overlaps [from_ns, to_ns] (CLOCK_MONOTONIC, as recorded). The
  // footer index skips the chunks outside the range.
  uint64_t from_ns = 0;
  uint64_t to_ns = std::numeric_limits<uint64_t>::max();
  unsigned threads = 0;  // 0: one per online CPU
  // from_ns and to_ns are offsets from each trace's start (its clock anchor), not instants:
  // for several traces, each with its own clock.
  bool relative_range = false;
  std::string trace_name;  // the `trace` field (empty: the path)
};

struct TraceQueryStats {
  RunStats run;
  uint64_t events_read = 0;  // syscall events decoded (in range), whether traced or not
  uint64_t chunks_skipped = 0;
  unsigned threads = 1;
  double seconds = 0;  // reading and evaluating, output excluded
  // CPU time the reading threads spent (reading, checking, decompressing, decoding,
  // evaluating): events / cpu_seconds is the throughput of one core.
  double cpu_seconds = 0;
};

// Prints the results to sink. Damage in the trace stops the reading at the damaged chunk; the
// events before it are still aggregated and printed, then the damage is returned.
Status RunTraceQuery(const Plan& plan, const std::string& path, const TraceQueryOptions& options,
                     OutputSink& sink, TraceQueryStats* stats);

// The plan over several traces as over one (`fay query -i A -i B`): aggregates are merged key by
// key with the exact AggState merge, as the cluster merges hosts; `select` rows come trace after
// trace, in the order given. Traces are read in parallel, up to options.threads at a time. Each
// trace's `trace` field is its path as given. Damage in one trace is returned after the others
// were read and the merged result printed.
Status RunTracesQuery(const Plan& plan, const std::vector<std::string>& paths,
                      const TraceQueryOptions& options, OutputSink& sink, TraceQueryStats* stats);

}  // namespace fay
