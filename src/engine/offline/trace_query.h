// Runs a plan over a recorded trace: the offline source of `fay query -i`. The plan and the
// aggregates are the live ones; the evaluator is the user-space interpreter. Aggregations read
// the events chunks in parallel (each chunk decodes on its own) and merge the partial states,
// as the live path merges per-CPU maps. A query that needs file order (`select`, `every`, or
// `path`, whose fd table is built call by call) reads the chunks in one pass, in order.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

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

}  // namespace fay
